"""Decode speed of the Samba benchmark model with float32, bfloat16 and int8 (`samebits.lowbit`) weights.

The config is bench_samba.py's (vocab 256, d_model 384, layers [mamba3, attention, mamba3, attention],
n_heads 6, intermediate 1024, tied head); the weights are deterministic (norms and other vectors near one,
matrices N(0, 1/fan_in)) and need no PyTorch. Each format's model is built from the same float32 weights
packed by `samebits.lowbit.pack`; the GEMM keeps every projection in its packed form and widens it in
registers (docs/numerics.md §3.6), so a step reads about 1/2 (bfloat16) or 1/4 (int8) of the float32 bytes.
For each thread count a model is prefilled to `--position` tokens and `--steps` single-token steps are timed;
the best of `--repeats` rounds counts. Each row gives tokens/s, the speed-up over float32, the bytes of
weights a step reads, and, with build/bench_gemm built, the fraction of the measured read bandwidth those
bytes take (bytes / bandwidth / step time). Issue 22's targets: bfloat16 >= 1.8x and int8 >= 3x float32.
The machine may be shared: figures are indicative.

    python3 bench/bench_lowbit_decode.py [--threads 1 2] [--repeats 5] [--steps 64] [--position 16]
"""

import argparse
import json
import os
import subprocess
import time

import numpy as np

import samebits
from samebits import lowbit

CONFIG = dict(vocab=256, d_model=384, layers=["mamba3", "attention", "mamba3", "attention"], n_heads=6,
              intermediate=1024, tie_embeddings=True)
FORMATS = ("float32", "bfloat16", "int8")
TARGETS = {"bfloat16": 1.8, "int8": 3.0}


def weights_for(config, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in config.registry():
        if len(shape) < 2:
            out[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[name] = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    return out


def step_bytes(weights, fmt):
    """Bytes of the 2-D weights a step reads in `fmt` (int8 adds a float32 scale per row)."""
    total = 0
    for array in weights.values():
        if array.ndim != 2:
            total += array.nbytes
        elif fmt == "float32":
            total += array.size * 4
        elif fmt == "bfloat16":
            total += array.size * 2
        else:
            total += array.size + array.shape[0] * 4
    return total


def read_bandwidth(footprint, threads):
    """GB/s of `threads` threads re-reading `footprint` bytes (build/bench_gemm's probe), or None."""
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bench_gemm")
    if not os.path.exists(exe):
        return None
    env = dict(os.environ, SAMEBITS_PROBE_BYTES=str(int(footprint)))
    run = subprocess.run([exe, f"--benchmark_filter=BM_ReadFootprint/{int(footprint)}/{threads}/",
                          "--benchmark_format=json"], capture_output=True, text=True, env=env)
    rows = json.loads(run.stdout).get("benchmarks", []) if run.returncode == 0 else []
    return rows[0]["GB/s"] if rows else None


def simd_target():
    """The instruction set the kernels run: SAMEBITS_SIMD when set, else the best this CPU offers."""
    if os.environ.get("SAMEBITS_SIMD"):
        return os.environ["SAMEBITS_SIMD"]
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return "unknown"
    return "avx512" if " avx512f" in flags else "avx2" if " avx2" in flags and " fma" in flags else "scalar"


def decode_seconds(model, position, steps, repeats, vocab=CONFIG["vocab"]):
    """Seconds per single-token step after a `position`-token prompt, the best of `repeats` rounds."""
    ids = np.random.default_rng(2).integers(0, vocab, (1, position + steps))
    best = float("inf")
    for _ in range(repeats):
        state = model.allocate_state(1, position + steps)
        model.forward(ids[:, :position], state)
        start = time.perf_counter()
        for t in range(position, position + steps):
            model.step(ids[:, t], state)
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def decode_parser(doc, repeats, steps):
    """The options every decode benchmark takes: --threads, --repeats, --steps (its docstring's first line)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--steps", type=int, default=steps)
    return parser


def main():
    parser = decode_parser(__doc__, repeats=5, steps=64)
    parser.add_argument("--position", type=int, default=16)
    args = parser.parse_args()

    config = samebits.SambaConfig(**CONFIG)
    weights = weights_for(config)
    models = {fmt: samebits.SambaInference(config, weights if fmt == "float32" else lowbit.pack(weights, fmt))
              for fmt in FORMATS}
    print(f"samebits {samebits.__version__}; SIMD target {simd_target()}; load average "
          f"{os.getloadavg()[0]:.2f}")
    print("| threads | weights | step ms | tokens/s | vs float32 | target | weight MB/step | roofline |")
    print("|---|---|---|---|---|---|---|---|")
    for threads in args.threads:
        samebits.set_num_threads(threads)
        base = None
        for fmt in FORMATS:
            seconds = decode_seconds(models[fmt], args.position, args.steps, args.repeats)
            base = seconds if fmt == "float32" else base
            footprint = step_bytes(weights, fmt)
            bandwidth = read_bandwidth(footprint, threads)
            roofline = f"{footprint / (bandwidth * 1e9) / seconds:.2f}" if bandwidth else "n/a"
            print(f"| {threads} | {fmt} | {seconds * 1e3:.3f} | {1 / seconds:.0f} | {base / seconds:.2f}x | "
                  f"{TARGETS.get(fmt, 1.0):.1f}x | {footprint / 1e6:.2f} | {roofline} |")


if __name__ == "__main__":
    main()
