#!/usr/bin/env python3
"""GEMM NT throughput of samebits beside numpy's sgemm and the machine's measured ceilings, in one run.

Runs bench_gemm (Google Benchmark, JSON output), then times numpy's np.matmul(A, W.T) in float32 on
the same shapes with 1 and 2 BLAS threads in child processes, and prints one table:
shape, threads, samebits GFLOP/s, numpy GFLOP/s, their ratio, % of the measured per-core FMA peak
(times the thread count) and, for M = 1, % of the measured single-thread DRAM read bandwidth.

    python3 bench/gemm_vs_numpy.py [path/to/bench_gemm] [--out table.md] [--repetitions 3]

Every figure is the best of the repetitions: on a shared machine the best run is the one least
disturbed by other processes. The busy column (CPU time / wall time of the timing thread, single
thread rows only) shows how much other load there was: well below 1.0 means the numbers are low.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SHAPES = [(1, 4096, 1024), (64, 1024, 1024), (512, 1024, 1024), (512, 4096, 1024),
          # SmolLM2-135M prefill of 512 tokens (q/o, k/v, gate/up, down, the tied lm head), then batched decode
          (512, 576, 576), (512, 192, 576), (512, 1536, 576), (512, 576, 1536), (512, 49152, 576),
          (8, 1536, 576), (32, 576, 576), (32, 1536, 576), (32, 576, 1536)]
THREADS = [1, 2]
# The cold M = 1 rows rotate through weight copies totalling this much, as bench_gemm does.
COLD_FOOTPRINT_BYTES = 256 << 20

# Runs inside a child process whose environment fixes the BLAS thread count before numpy loads.
NUMPY_CHILD = r"""
import json, sys, time
import numpy as np
shapes, threads, reps, min_time, cold_bytes = json.loads(sys.argv[1])
blas = []
limiter = None
try:
    import threadpoolctl
    limiter = threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
    blas = [{k: info.get(k) for k in ("internal_api", "version", "architecture", "num_threads", "filepath")}
            for info in threadpoolctl.threadpool_info() if info.get("user_api") == "blas"]
except ImportError:
    pass
rng = np.random.default_rng(1234)

def best_rate(call, flops):
    call()  # warm-up: first-touch, BLAS buffers, thread start
    best, busy = 0.0, 1.0
    for _ in range(reps):
        count, wall0, cpu0 = 0, time.perf_counter(), time.process_time()
        while True:
            call()
            count += 1
            wall = time.perf_counter() - wall0
            if wall >= min_time:
                break
        rate = flops * count / wall
        if rate > best:
            best, busy = rate, (time.process_time() - cpu0) / wall
    return best, busy

results = []
for m, n, k, cold in shapes:
    a = rng.uniform(-1.0, 1.0, size=(m, k)).astype(np.float32)
    w = rng.uniform(-1.0, 1.0, size=(n, k)).astype(np.float32)
    copies = max(2, cold_bytes // w.nbytes) if cold else 1
    weights = [w] + [w.copy() for _ in range(copies - 1)]
    out = np.empty((m, n), dtype=np.float32)
    state = {"next": 0}

    def call():
        np.matmul(a, weights[state["next"]].T, out=out)
        state["next"] = (state["next"] + 1) % copies

    rate, busy = best_rate(call, 2.0 * m * n * k)
    results.append({"shape": [m, n, k], "cold": cold, "gflops": rate * 1e-9, "busy": busy,
                    "gbps": rate * 1e-9 / (2.0 * m) * 4.0})  # weight bytes: 4 per 2*m flops
print(json.dumps({"numpy": np.__version__, "blas": blas, "results": results}))
"""


def find_bench(explicit):
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            sys.exit(f"bench_gemm not found at {path}")
        return path
    root = Path(__file__).resolve().parent.parent
    for candidate in sorted(root.glob("build*/bench_gemm")) + sorted(root.glob("build*/**/bench_gemm")):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("bench_gemm not found under build*/; build it (cmake --build build --target bench_gemm) or pass its path")


def run_bench(path, repetitions):
    cmd = [str(path), "--benchmark_format=json", f"--benchmark_repetitions={repetitions}"]
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    runs = {}
    for entry in json.loads(done.stdout)["benchmarks"]:
        if entry.get("run_type") == "aggregate":
            continue
        name = entry["run_name"].removesuffix("/real_time").removesuffix("/iterations:1")
        runs.setdefault(name, []).append(entry)
    context = json.loads(done.stdout)["context"]
    return runs, context


def best(runs, name, counter):
    """The repetition with the highest `counter`, or None when the benchmark did not run."""
    entries = runs.get(name)
    if not entries:
        return None
    return max(entries, key=lambda e: e.get(counter, 0.0))


def busy_fraction(entry):
    return entry["cpu_time"] / entry["real_time"] if entry and entry["real_time"] > 0 else float("nan")


def run_numpy(threads, repetitions, min_time):
    env = dict(os.environ)
    # These tuning overrides may be set here for other tools and slow OpenBLAS down: numpy runs without them.
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        env[var] = str(threads)
    shapes = [[m, n, k, False] for m, n, k in SHAPES] + [[m, n, k, True] for m, n, k in SHAPES if m == 1]
    arg = json.dumps([shapes, threads, repetitions, min_time, COLD_FOOTPRINT_BYTES])
    print(f"running: numpy matmul, {threads} thread(s)", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-c", NUMPY_CHILD, arg], check=True, capture_output=True, text=True,
                          env=env)
    return json.loads(done.stdout)


def fmt(value, digits=1, suffix=""):
    if value is None or value != value:  # None or NaN
        return "-"
    return f"{value:.{digits}f}{suffix}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", nargs="?", help="path to bench_gemm (default: first build*/bench_gemm)")
    parser.add_argument("--out", help="also write the table as markdown to this path")
    parser.add_argument("--repetitions", type=int, default=3, help="repetitions per benchmark; the best is kept")
    parser.add_argument("--numpy-min-time", type=float, default=0.3, help="seconds per numpy repetition")
    args = parser.parse_args()

    runs, context = run_bench(find_bench(args.bench), args.repetitions)
    numpy_runs = {t: run_numpy(t, args.repetitions, args.numpy_min_time) for t in THREADS}

    peaks = {name.split("/", 1)[1]: best(runs, name, "GFLOP/s")["GFLOP/s"]
             for name in runs if name.startswith("BM_FmaPeak/")}
    dram = best(runs, "BM_ReadBandwidth/256MiB", "GB/s")
    l3 = best(runs, "BM_ReadBandwidth/16MiB", "GB/s")
    dram_gbps = dram["GB/s"] if dram else None
    some_gemm = best(runs, "BM_GemmNT/%d/%d/%d/1" % SHAPES[0], "GFLOP/s")
    target = some_gemm.get("label", "?") if some_gemm else "?"
    peak = peaks.get(target)

    avx2_peak = peaks.get("avx2")
    header = ["shape MxNxK", "threads", f"samebits {target} GFLOP/s", "samebits avx2 GFLOP/s", "numpy GFLOP/s",
              "samebits/numpy", "% of peak (core x thr)", "avx2 % of avx2 peak", "% of DRAM BW", "busy (1 thr)",
              "% of peak by CPU time (1 thr)"]
    rows = []
    for m, n, k in SHAPES:
        for cold in ([False, True] if m == 1 else [False]):
            for threads in THREADS:
                base = ("BM_GemmNTCold" if cold else "BM_GemmNT") + f"/{m}/{n}/{k}/{threads}"
                ours = best(runs, base, "GFLOP/s")
                avx2 = None if cold else best(runs, f"BM_GemmNT_avx2/{m}/{n}/{k}/{threads}", "GFLOP/s")
                theirs = next(r for r in numpy_runs[threads]["results"] if r["shape"] == [m, n, k] and r["cold"] == cold)
                ours_gflops = ours["GFLOP/s"] if ours else None
                ratio = ours_gflops / theirs["gflops"] if ours_gflops and theirs["gflops"] else None
                pct_peak = 100.0 * ours_gflops / (peak * threads) if ours_gflops and peak else None
                pct_avx2 = 100.0 * avx2["GFLOP/s"] / (avx2_peak * threads) if avx2 and avx2_peak else None
                pct_bw = 100.0 * ours["GB/s"] / dram_gbps if ours and m == 1 and dram_gbps else None
                busy = f"{busy_fraction(ours):.2f} / {theirs['busy']:.2f}" if threads == 1 and ours else "-"
                # One thread: flops per CPU-second of that thread, i.e. the per-core rate with time slices
                # lost to other processes taken out.
                pct_cpu = 100.0 * ours_gflops / busy_fraction(ours) / peak if threads == 1 and ours_gflops and peak else None
                label = f"{m}x{n}x{k}" + (" cold" if cold else "")
                rows.append([label, str(threads), fmt(ours_gflops), fmt(avx2["GFLOP/s"] if avx2 else None),
                             fmt(theirs["gflops"]), fmt(ratio, 2), fmt(pct_peak, 0, "%"), fmt(pct_avx2, 0, "%"),
                             fmt(pct_bw, 0, "%"), busy,
                             fmt(pct_cpu, 0, "%")])

    blas = numpy_runs[1]["blas"]
    blas_text = ", ".join(f"{b['internal_api']} {b['version']} kernel {b['architecture']}" for b in blas) or \
        "unknown (pip install threadpoolctl to see it)"
    notes = [
        f"Machine: {context.get('num_cpus')} CPUs at {context.get('mhz_per_cpu')} MHz (nominal); "
        f"caches {', '.join(str(c['size'] >> 10) + ' KiB L' + str(c['level']) for c in context.get('caches', []) if c['type'] != 'Instruction')}",
        "Measured FMA peak per core (GFLOP/s): " + ", ".join(f"{t} {v:.1f}" for t, v in peaks.items()),
        f"Measured single-thread read bandwidth: {fmt(dram_gbps)} GB/s over 256 MiB (DRAM), "
        f"{fmt(l3['GB/s'] if l3 else None)} GB/s over 16 MiB (the M=1 weight size)",
        f"numpy {numpy_runs[1]['numpy']}, BLAS: {blas_text} (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset for numpy)",
        "% of FMA peak = GFLOP/s / (per-core peak of the best target x threads); % of DRAM BW = weight GB/s / "
        "single-thread DRAM GB/s (M=1 only). 'cold' rows rotate weight copies totalling 256 MiB so every call "
        "streams from DRAM; the other M=1 rows reuse one 16 MiB weight (L3-resident here).",
        "busy = CPU time / wall time of the timing thread for samebits / numpy (1-thread rows); < 0.9 means "
        "other load disturbed the run. '% of peak by CPU time' divides samebits' 1-thread rate by busy: the "
        "per-core rate with the time slices other processes took removed.",
    ]

    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    print(line(header))
    for r in rows:
        print(line(r))
    print()
    for note in notes:
        print(note)

    if args.out:
        md = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        md += ["| " + " | ".join(r) + " |" for r in rows]
        md += [""] + [f"- {note}" for note in notes]
        Path(args.out).write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
