"""SambaInference vs a PyTorch eager fp32 Samba stack: upstream's "full" config, same weights, threads and run.

Config: vocab 256, d_model 384, layers [mamba3, attention, mamba3, attention], n_heads 6, intermediate 1024,
tied head. Deterministic weights (samba_torch.weights_for) go into both samebits.SambaInference and
samba_torch.TorchSamba. First the two are compared numerically (max |logit difference|, float32 vs float32
on different schedules, so small but not zero); then, for each thread count (torch.set_num_threads and
samebits.set_num_threads together):

  * forward B=2 L=512, stateless (tokens/s and seconds);
  * decode step B=1 at positions 16, 512 and 2048: both sides prefill to the position (untimed), then
    `--steps` consecutive single-token steps are timed (samebits: model.step with a SambaState; PyTorch:
    its carried-state decode, which never re-runs chunks or recomputes cached keys/values) and divided
    by the step count. Each repeat restarts from a copy of the prefilled state. The default 64 steps are
    one Mamba-3 chunk: a decode loop seals a chunk once every 64 tokens, and so does every timed round
    (512 and 2048 are chunk boundaries, so a round of 32 from there would count one seal per 32 steps).

Every figure is the best of `--repeats` runs, samebits and PyTorch alternating so both see the same load;
each decode round starts with `--warm-steps` untimed steps on a throwaway copy of its state, so that it times
steady decoding rather than re-reading the weights the other side's round has just pushed out of the shared
cache (right after the other side's round a samebits step at 16 takes about twice its steady time, and it
needs some four steps, not one, to get back to it).
The ratio is PyTorch time / samebits time (above 1: samebits is faster). Targets of issue 6: forward >= 1x,
decode step >= 5x. The machine may be shared: the load average is recorded before, after and with each row.
With more threads than free cores, PyTorch's OpenMP workers spin-wait on each other and its multi-thread
times can grow tenfold or more; `OMP_WAIT_POLICY=PASSIVE python3 bench/bench_samba.py` shows PyTorch
without that effect (the policy in force is printed). Those workers also spin on after PyTorch's round, so
every timed round of either side starts after a short pause (SETTLE_SECONDS) that lets the other side's
threads go idle: otherwise samebits' two-thread rounds would run beside a spinning PyTorch worker.

With build/bench_gemm built, two bandwidth tables follow: one-thread decode against the probes over 256 MiB
(memory) and 16 MiB (last-level cache), and every decode row against its own footprint: right after the
row, `bench_gemm` re-reads exactly the bytes that step must read (SAMEBITS_PROBE_BYTES) with the row's
thread count, and bytes / rate is the least time any step could take at that moment.

With build/bench_samba_split built, a forward table follows (issue 23): the forward rows against the FMA
peak measured in the same run (bench_gemm's BM_FmaPeak for the active instruction set, times the thread
count) counting only the projection FLOPs (2 x tokens x every projection matrix, the tied head included),
and where a forward's time goes: bench_samba_split runs the same config stateless at B=2 L=512 with the
engine's stage clock on, which splits it into projection GEMMs, Mamba-3 scans (everything between a block's
in_proj and out_proj: gates, angles, rotations, the chunked scan with its inner products) and attention
(RoPE, the KV cache, scores, softmax, values), the rest (norms, residuals, SwiGLU, embedding) by difference.
Targets: >= 60% of the peak, >= 2x PyTorch, scans + attention <= 25% of the forward.

`--profile` adds a samebits-only breakdown of the decode step: the Python wrapper's own time (the native
call replaced by a stub that returns at once), each layer's native step (its block class's step, run in
stack order on states prefilled to the position, minus that class's own Python wrapper), and the rest
of the native step (embedding, final RMSNorm, head GEMV and glue, by difference).

    python3 bench/bench_samba.py [--threads 1 2] [--repeats 5] [--steps 64] [--warm-steps 8] [--out FILE.md]
                                 [--profile]
"""

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch

import samebits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from samba_torch import TorchSamba, weights_for  # noqa: E402

CONFIG = dict(vocab=256, d_model=384, layers=["mamba3", "attention", "mamba3", "attention"], n_heads=6,
              intermediate=1024, tie_embeddings=True)
FORWARD_BATCH, FORWARD_LENGTH = 2, 512
POSITIONS = (16, 512, 2048)
TARGETS = {"forward": 1.0, "decode": 5.0}


def require_samba():
    if not hasattr(samebits, "SambaInference"):
        sys.exit(f"bench_samba: the samebits at {samebits.__file__} has no SambaInference; reinstall it from "
                 "this tree (pip install .)")


def clone_state(state):
    """An independent samebits.SambaState with the same bits: every layer state's own copy()."""
    return samebits.SambaState(state.batch_size, state.max_tokens, [layer.copy() for layer in state.layers])


def ids_for(batch, length, seed):
    return np.random.default_rng(seed).integers(0, CONFIG["vocab"], (batch, length))


def agreement(ours, theirs):
    """Max |logit difference| of the stateless forward (B=2, L=100: two Mamba-3 chunks) and of 8 decode
    steps after a 70-token prefill; also whether samebits' steps equal its own forward bit for bit."""
    ids = ids_for(2, 100, 3)
    mine = ours.forward(ids)
    with torch.no_grad():
        ref = theirs.forward(torch.from_numpy(ids)).numpy()
    state = ours.allocate_state(2, 100)
    ours.forward(ids[:, :70], state)
    _, torch_state = theirs.prefill(torch.from_numpy(ids[:, :70]), 100)
    step_gap, bitwise = 0.0, True
    for t in range(70, 78):
        got = ours.step(ids[:, t], state)
        want = theirs.step(torch.from_numpy(ids[:, t]), torch_state).numpy()
        step_gap = max(step_gap, float(np.abs(got - want).max()))
        bitwise &= got.tobytes() == mine[:, t].tobytes()
    return {"forward": float(np.abs(mine - ref).max()), "step": step_gap, "scale": float(np.abs(ref).max()),
            "bitwise": bitwise}


# PyTorch's OpenMP workers keep spinning for a while after its last parallel region (and samebits' pool
# briefly too); a side timed straight after the other's round would share its cores with those spinners.
# Each timed round therefore starts after this pause, on both sides.
SETTLE_SECONDS = 0.05


def timed(fn, warm_up=None):
    """Seconds fn() takes, after the settling pause and, when given, one untimed warm_up() right before it."""
    time.sleep(SETTLE_SECONDS)
    if warm_up is not None:
        warm_up()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_forward(ours, theirs, repeats):
    ids = ids_for(FORWARD_BATCH, FORWARD_LENGTH, 1)
    ids_t = torch.from_numpy(ids)
    best_ours = best_torch = float("inf")
    for _ in range(repeats + 1):  # the first round warms both up and counts like any other
        best_ours = min(best_ours, timed(lambda: ours.forward(ids)))
        best_torch = min(best_torch, timed(lambda: theirs.forward(ids_t)))
    return best_ours, best_torch


def prefilled(ours, theirs, position, steps):
    """Both sides prefilled with the same `position` ids, their states and the ids to decode next."""
    ids = ids_for(1, position + steps, 2)
    state = ours.allocate_state(1, position + steps)
    ours.forward(ids[:, :position], state)
    _, torch_state = theirs.prefill(torch.from_numpy(ids[:, :position]), position + steps)
    return state, torch_state, ids[:, position:]


def decode_loop(step, state, tokens):
    def run():
        for t in range(tokens.shape[1]):
            step(tokens[:, t], state)

    return run


def bench_decode(ours, theirs, position, steps, repeats, warm_steps):
    state, torch_state, tokens = prefilled(ours, theirs, position, steps)
    tokens_t = torch.from_numpy(tokens)
    best_ours = best_torch = float("inf")
    # Each round first runs `warm_steps` untimed steps on a throwaway copy, right before its timed steps, so
    # that it times steady decoding: its weights back in the shared cache that the other side's round has
    # just filled with its own (the cache's replacement takes a few passes over the step's bytes to evict
    # the other side's lines: one pass is not enough).
    warm = max(1, min(warm_steps, steps))
    for _ in range(repeats):
        spare_ours, spare_torch = clone_state(state), TorchSamba.clone_state(torch_state)
        best_ours = min(best_ours, timed(decode_loop(ours.step, clone_state(state), tokens),
                                         decode_loop(ours.step, spare_ours, tokens[:, :warm])) / steps)
        best_torch = min(best_torch, timed(decode_loop(theirs.step, TorchSamba.clone_state(torch_state), tokens_t),
                                           decode_loop(theirs.step, spare_torch, tokens_t[:, :warm])) / steps)
    return best_ours, best_torch


class Stub:
    """Stands in for a native engine: `name` returns `result` at once, everything else is the engine's."""

    def __init__(self, engine, name, result):
        self._engine, self._name, self._result = engine, name, result

    def __getattr__(self, attribute):
        if attribute == self._name:
            return lambda *args, **kwargs: self._result
        return getattr(self._engine, attribute)


def wrapper_time(owner, name, result, call, repeats, count=200):
    """Seconds per `call()` with owner._engine.<name> stubbed: the Python wrapper's own cost."""
    engine = owner._engine
    owner._engine = Stub(engine, name, result)

    def calls():
        for _ in range(count):
            call()

    try:
        calls()  # warm-up
        return min(timed(calls) for _ in range(repeats)) / count
    finally:
        owner._engine = engine


def layer_blocks(ours, weights, position, steps):
    """For each layer, (block, state factory, stub) built from the same layer weights, its state prefilled
    with `position` random rows (a step's cost does not depend on the values)."""
    cfg = ours.config
    prefix_x = np.random.default_rng(5).standard_normal((1, position, cfg.d_model)).astype(np.float32)
    out = []
    for i, kind in enumerate(cfg.layers):
        prefix = f"layers.{i}."
        block_weights = {n[len(prefix):]: a for n, a in weights.items() if n.startswith(prefix)}
        if kind == "mamba3":
            block = samebits.Mamba3BlockInference(block_weights)
            state = block.allocate_state(1)
            block.forward(prefix_x, state)
            out.append((block, state.copy, ("step", (prefix_x[:, :1], None))))
        else:
            block = samebits.TransformerBlockInference(block_weights, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads,
                                                       head_dim=cfg.head_dim)
            state = block.allocate_state(1, position + steps)
            block.forward(prefix_x, state)

            out.append((block, state.copy, ("forward_state", (prefix_x[:, :1], position, True))))
    return out


def profile_decode(ours, weights, position, steps, repeats):
    """{part: microseconds per step} of samebits' decode step at `position` (see the module docstring).

    The layers are timed inside a stack: the four block classes run one after another on each token, as
    the model does, so each block finds its weights where the other layers' traffic left them (timed
    alone, a block's 4-7 MB of weights stay cached and its step looks several times cheaper)."""
    cfg = ours.config
    ids = ids_for(1, position + steps, 2)
    state = ours.allocate_state(1, position + steps)
    ours.forward(ids[:, :position], state)
    tokens = ids[:, position:]
    canned = (np.zeros((1, 1, cfg.vocab), np.float32), [None if kind == "mamba3" else (position, True) for kind in cfg.layers])
    spare = clone_state(state)
    wrapper = wrapper_time(ours, "run", canned, lambda: ours.step(tokens[:, 0], spare), repeats)

    # Each repeat runs the model's steps, then the block chain's steps over the same number of tokens (not
    # interleaved token by token: the two hold separate weight copies, and together they would not fit
    # the last-level cache that either fits alone). The chain's parts are taken from its best repeat.
    blocks = layer_blocks(ours, weights, position, steps)
    x_steps = np.random.default_rng(6).standard_normal((steps, 1, 1, cfg.d_model)).astype(np.float32)
    full, best = float("inf"), None
    for _ in range(repeats):
        full = min(full, timed(decode_loop(ours.step, clone_state(state), tokens)) / steps)
        states = [fresh() for _, fresh, _ in blocks]
        spent = [0.0] * len(blocks)
        for t in range(steps):
            x = x_steps[t]
            for i, (block, _, _) in enumerate(blocks):
                start = time.perf_counter()
                x = block.step(x, states[i])
                spent[i] += time.perf_counter() - start
        if best is None or sum(spent) < sum(best) * steps:
            best = [v / steps for v in spent]
    out = {"step (python API)": full * 1e6, "python wrapper (SambaInference.step)": wrapper * 1e6}
    native = 0.0
    for i, ((block, fresh, (name, result)), kind) in enumerate(zip(blocks, cfg.layers)):
        spare = fresh()
        own = wrapper_time(block, name, result, lambda: block.step(x_steps[0], spare), repeats)
        out[f"layer {i} {kind} (native)"] = (best[i] - own) * 1e6
        native += best[i] - own
    out["embedding + norm_f + head + glue (native, by difference)"] = (full - wrapper - native) * 1e6
    return out


def read_bandwidth(footprint=None, threads=1):
    """Streaming read bandwidth in GB/s from the probes in build/bench_gemm (./scripts/build.sh builds it), or
    {} when it is not built. Without `footprint`: one thread over 256 MiB and 16 MiB ({"256MiB": .., "16MiB":
    ..}). With it: `threads` threads re-reading a buffer of exactly `footprint` bytes pass after pass, as a
    decode loop re-reads its weights and state ({"footprint": ..})."""
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bench_gemm")
    if not os.path.exists(exe):
        return {}
    env = dict(os.environ, SAMEBITS_NUM_THREADS="1")
    wanted = "BM_ReadBandwidth"
    if footprint is not None:
        env["SAMEBITS_PROBE_BYTES"] = str(int(footprint))
        wanted = f"BM_ReadFootprint/{int(footprint)}/{threads}/"
    run = subprocess.run([exe, f"--benchmark_filter={wanted}", "--benchmark_format=json"],
                         capture_output=True, text=True, env=env)
    if run.returncode != 0:
        return {}
    rates = {b["name"].split("/")[1]: b["GB/s"] for b in json.loads(run.stdout)["benchmarks"]}
    return {"footprint": next(iter(rates.values()))} if footprint is not None and rates else rates


def build_exe(name):
    """build/<name> beside this script's tree, or None when it is not built."""
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", name)
    return exe if os.path.exists(exe) else None


def fma_peaks():
    """{instruction set: one core's FMA peak in GFLOP/s} from bench_gemm's BM_FmaPeak, or {} without it."""
    exe = build_exe("bench_gemm")
    if exe is None:
        return {}
    run = subprocess.run([exe, "--benchmark_filter=BM_FmaPeak", "--benchmark_format=json"], capture_output=True,
                         text=True, env=dict(os.environ, SAMEBITS_NUM_THREADS="1"))
    if run.returncode != 0:
        return {}
    return {b["name"].split("/")[1]: b["GFLOP/s"] for b in json.loads(run.stdout)["benchmarks"]}


def forward_split(threads, repeats):
    """[{threads, isa, seconds, projection, scan, attention}] from build/bench_samba_split, or []."""
    exe = build_exe("bench_samba_split")
    if exe is None:
        return []
    run = subprocess.run([exe, "--threads", *map(str, threads), "--repeats", str(repeats), "--batch",
                          str(FORWARD_BATCH), "--length", str(FORWARD_LENGTH)], capture_output=True, text=True)
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")] if run.returncode == 0 else []


def projection_flops(config, tokens):
    """2 x tokens x the elements of every projection matrix the forward multiplies by (the head included)."""
    matrices = sum(int(np.prod(shape)) for name, shape in config.registry()
                   if name.endswith("proj.weight") or name == "lm_head.weight")
    if config.tie_embeddings:
        matrices += config.vocab * config.d_model
    return 2 * tokens * matrices


def decode_bytes(config, position):
    """What one decode step must read at least once: every weight (the tied head reads the whole embedding
    table), each Mamba-3 layer's state (h and the open chunk's buffers, scanned and read), and each attention
    layer's keys and values for `position` tokens."""
    weights = 4 * sum(int(np.prod(shape)) for _, shape in config.registry())
    heads = 2 * config.d_model // 64
    mamba3_state = 4 * (heads * 64 * 128 + 64 * heads * (128 + 128 + 64 + 3) + heads * 32)
    kv = 4 * 2 * position * config.n_kv_heads * config.head_dim
    kinds = list(config.layers)
    return weights + kinds.count("mamba3") * mamba3_state + kinds.count("attention") * kv


def verdict(t_torch, t_ours, target):
    """The row's last four cells: ratio, target, met, and the 1-minute load average when it finished."""
    ratio = t_torch / t_ours
    return f"| {ratio:.2f}x | >= {target:g}x | {'yes' if ratio >= target else 'no'} | {os.getloadavg()[0]:.1f} |"


def forward_tables(config, forward_times, threads, repeats):
    """The forward against the FMA peak and its profile split (see the module docstring), as markdown lines."""
    out = []
    split = forward_split(threads, repeats)
    peaks = fma_peaks()
    isa = split[0]["isa"] if split else None
    peak = peaks.get(isa)
    flops = projection_flops(config, FORWARD_BATCH * FORWARD_LENGTH)
    if peak:
        out += ["", f"Forward B={FORWARD_BATCH} L={FORWARD_LENGTH} against the FMA peak: {flops / 1e9:.2f} GFLOP of "
                    f"projections; instruction set {isa}, peak {peak:.1f} GFLOP/s per core (bench_gemm BM_FmaPeak, "
                    "this run) times the thread count.", "",
                "| threads | samebits | GFLOP/s | fraction of peak | target | PyTorch ratio | target |",
                "|---|---|---|---|---|---|---|"]
        for t, (t_ours, t_torch) in forward_times.items():
            fraction = flops / t_ours / 1e9 / (peak * t)
            out.append(f"| {t} | {t_ours:.3f} s | {flops / t_ours / 1e9:.1f} | {fraction:.2f} | >= 0.60 "
                       f"{'yes' if fraction >= 0.6 else 'no'} | {t_torch / t_ours:.2f}x | >= 2x "
                       f"{'yes' if t_torch >= 2 * t_ours else 'no'} |")
    if split:
        out += ["", "Where the forward's time goes (build/bench_samba_split: the same config with deterministic "
                    "weights, stateless, best of the repeats, the engine's stage clock on; other = norms, residuals, "
                    "SwiGLU, embedding, by difference):", "",
                "| threads | forward | projection GEMMs | scans (Mamba-3) | attention | other | scans + attention "
                "(target <= 25%) | projections at |",
                "|---|---|---|---|---|---|---|---|"]
        for row in split:
            total = row["seconds"]
            other = total - row["projection"] - row["scan"] - row["attention"]
            share = (row["scan"] + row["attention"]) / total

            def cell(seconds):
                return f"{seconds * 1e3:.1f} ms ({100 * seconds / total:.0f}%)"

            at = f"{flops / row['projection'] / 1e9:.0f} GFLOP/s" if row["projection"] > 0 else "-"
            if peak and row["projection"] > 0:
                at += f" ({flops / row['projection'] / 1e9 / (peak * row['threads']):.2f} of peak)"
            out.append(f"| {row['threads']} | {total * 1e3:.1f} ms | {cell(row['projection'])} | {cell(row['scan'])} | "
                       f"{cell(row['attention'])} | {cell(other)} | {100 * share:.0f}% "
                       f"{'yes' if share <= 0.25 else 'no'} | {at} |")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=64,
                        help="timed consecutive steps per decode round (64: one Mamba-3 chunk, so exactly one seal)")
    parser.add_argument("--warm-steps", type=int, default=8,
                        help="untimed steps on a throwaway copy before each timed decode round (both sides)")
    parser.add_argument("--positions", type=int, nargs="+", default=list(POSITIONS))
    parser.add_argument("--out", help="also write the results as markdown to this file")
    parser.add_argument("--profile", action="store_true", help="add the samebits decode-step breakdown")
    args = parser.parse_args()
    require_samba()

    started = time.perf_counter()
    load_before = os.getloadavg()
    config = samebits.SambaConfig(**CONFIG)
    weights = weights_for(config)
    ours, theirs = samebits.SambaInference(config, weights), TorchSamba(config, weights)
    torch.set_num_threads(args.threads[0])
    samebits.set_num_threads(args.threads[0])
    gap = agreement(ours, theirs)
    gc.collect()
    gc.freeze()  # setup objects leave the collector's generations: neither side's steps pay to traverse them

    lines = [
        "# SambaInference vs PyTorch eager fp32 (bench/bench_samba.py)",
        "",
        f"Config: {CONFIG}; {len(config.registry())} tensors, "
        f"{sum(int(np.prod(s)) for _, s in config.registry()):,} parameters.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__}, "
        f"samebits {samebits.__version__}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}. "
        f"Load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}.",
        f"Agreement (float32 vs float32, different schedules): forward B=2 L=100 max |logit diff| "
        f"{gap['forward']:.2e}, 8 decode steps after a 70-token prefill {gap['step']:.2e} (max |logit| "
        f"{gap['scale']:.2f}); samebits step == samebits forward bit for bit: {gap['bitwise']}.",
        f"Best of {args.repeats} (forward: +1 warm-up round); decode = mean over {args.steps} consecutive steps, "
        f"each round after {args.warm_steps} untimed steps on a throwaway copy.",
        "",
        "| measurement | threads | samebits | PyTorch | ratio (PyTorch / samebits) | target | met | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    profiles = []
    forward_times = {}
    decode_times = {}
    footprint_rates = {}  # (threads, position) -> GB/s re-reading that step's footprint, probed right after
    for threads in args.threads:
        torch.set_num_threads(threads)
        samebits.set_num_threads(threads)
        t_ours, t_torch = bench_forward(ours, theirs, args.repeats)
        tokens = FORWARD_BATCH * FORWARD_LENGTH
        row = (f"| forward B={FORWARD_BATCH} L={FORWARD_LENGTH} | {threads} "
               f"| {t_ours:.3f} s ({tokens / t_ours:,.0f} tok/s) | {t_torch:.3f} s ({tokens / t_torch:,.0f} tok/s) "
               + verdict(t_torch, t_ours, TARGETS["forward"]))
        lines.append(row)
        print(row, flush=True)
        forward_times[threads] = (t_ours, t_torch)
        for position in args.positions:
            t_ours, t_torch = bench_decode(ours, theirs, position, args.steps, args.repeats, args.warm_steps)
            row = (f"| decode step B=1 at {position} | {threads} | {t_ours * 1e3:.2f} ms | {t_torch * 1e3:.2f} ms "
                   + verdict(t_torch, t_ours, TARGETS["decode"]))
            lines.append(row)
            print(row, flush=True)
            decode_times[(threads, position)] = (t_ours, t_torch)
            footprint_rates[(threads, position)] = read_bandwidth(decode_bytes(config, position), threads)
        if args.profile:
            for position in args.positions:
                profiles.append((threads, position, profile_decode(ours, weights, position, args.steps,
                                                                   args.repeats)))
    load_after = os.getloadavg()
    tail = ["", f"Load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; "
                f"wall time {time.perf_counter() - started:.0f} s."]
    bandwidth = read_bandwidth()
    if bandwidth and 1 in args.threads:
        dram, l3 = bandwidth.get("256MiB"), bandwidth.get("16MiB")
        tail += ["", f"One-thread decode against the core's read bandwidth (bench_gemm probe: {dram:.1f} GB/s over "
                     f"256 MiB, from memory; {l3:.1f} GB/s over 16 MiB, from the last-level cache). A step reads "
                     "every weight and state byte at least once; its working set is larger than the 16 MiB probe, "
                     "so its rate falls between the two. bytes / rate bounds the step time from below, and "
                     "PyTorch's step over that bound is the largest ratio any implementation could reach:", "",
                 "| position | bytes read per step | floor from memory | floor from cache | samebits streams at | "
                 "largest ratio (memory / cache) | samebits ratio |", "|---|---|---|---|---|---|---|"]
        for position in args.positions:
            t_ours, t_torch = decode_times[(1, position)]
            need = decode_bytes(config, position)
            slow, fast = need / (dram * 1e9), need / (l3 * 1e9)
            tail.append(f"| {position} | {need / 1e6:.1f} MB | {slow * 1e3:.2f} ms | {fast * 1e3:.2f} ms | "
                        f"{need / t_ours / 1e9:.1f} GB/s | {t_torch / slow:.2f}x / {t_torch / fast:.2f}x | "
                        f"{t_torch / t_ours:.2f}x |")
    probed = [key for key in decode_times if footprint_rates.get(key)]
    if probed:
        tail += ["", "Every decode row against its own footprint, probed right after it in this run: the bench_gemm "
                     "probe re-reads a buffer of exactly the step's bytes with the row's thread count, pass after "
                     "pass, as consecutive steps re-read the weights and state; so its rate includes whatever part "
                     "of that footprint the caches keep between passes. bytes / rate is the least time a step can "
                     "take, and PyTorch's step over it the largest ratio any implementation could reach here. (A "
                     "state nobody holds keeps its KV caches in the engine's spread layout, so a step writes only "
                     "its new rows.)", "",
                 "| threads | position | bytes read per step | footprint read at | floor | samebits | PyTorch | "
                 "largest ratio | samebits ratio | 5x reachable here |", "|---|---|---|---|---|---|---|---|---|---|"]
        for threads, position in probed:
            t_ours, t_torch = decode_times[(threads, position)]
            need = decode_bytes(config, position)
            rate = footprint_rates[(threads, position)]["footprint"]
            floor = need / (rate * 1e9)
            tail.append(f"| {threads} | {position} | {need / 1e6:.1f} MB | {rate:.1f} GB/s | {floor * 1e3:.2f} ms | "
                        f"{t_ours * 1e3:.2f} ms | {t_torch * 1e3:.2f} ms | {t_torch / floor:.2f}x | "
                        f"{t_torch / t_ours:.2f}x | {'yes' if t_torch / floor >= TARGETS['decode'] else 'no'} |")
    tail += forward_tables(config, forward_times, args.threads, args.repeats)
    if profiles:
        parts = list(profiles[0][2])
        tail += ["", "samebits decode step breakdown (microseconds per step):", "",
                 "| threads | position | " + " | ".join(parts) + " |", "|---|---|" + "---|" * len(parts)]
        tail += [f"| {t} | {p} | " + " | ".join(f"{prof[k]:.0f}" for k in parts) + " |" for t, p, prof in profiles]
    lines += tail
    print("\n".join(tail))
    if args.out:
        with open(args.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
