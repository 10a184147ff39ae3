"""Batched decode (issue 23 item 3, docs/api.md §18): tokens/s of B independent sequences at mixed positions
advanced together by `step_many`, against one sequence stepped alone (B = 1, `step`).

Two models of about the same size (~23 MB of float32 weights): bench_lowbit_decode.py's Samba benchmark model
(vocab 256, d_model 384, [mamba3, attention] x 2, n_heads 6, intermediate 1024, tied head) and a llama-style
CausalLM (vocab 256, d_model 384, 4 layers, 6 heads, intermediate 768, tied), written to a temporary
directory; deterministic weights, no PyTorch. Sequence i is first fed a prompt of its own length
(16 + 37 i mod 64), so the rows sit at mixed positions (B = 1 is the sequence at position 16); then `--steps`
steps are timed, the best of `--repeats` rounds (each on fresh copies of the prefilled states, after one
untimed step). Each row gives the time of one batched step, tokens/s (B tokens per step), the ratio to B = 1
and issue 23's target (5x at B = 8, 15x at B = 32), and, for the same B sequences stepped one by one (what the
server did before step_many), their tokens/s and the batched step's ratio to it.

The bound columns give the least time a B-row step can take on this machine (docs/performance.md §E): the
larger of (bytes it must read / read bandwidth) and (FLOPs / FMA peak), and which of the two binds. Shared by
the rows and read once: every weight (the tied head included). Per row: its own state at its own position
during the timed steps (a Mamba-3 layer's h and its open chunk's buffered keys, values and three scalars per
head; an attention layer's keys and values of every cached position, the new one included) and its FLOPs (2
per weight of every projection and of the head, plus its attention scores and values, and Mamba-3's state
read-out and open-chunk products). The bandwidth is build/bench_gemm's probe of exactly that footprint at that
thread count, the peak its per-core FMA probe of the SIMD target times the threads; without build/bench_gemm
the columns read n/a. "bound vs B=1" is the best ratio to the measured B = 1 tokens/s the bound allows
(B x B=1 step / bound), "at both bounds" the same with B = 1 also at its bound; a target above it cannot be
met on this machine. The machine may be shared: figures are indicative.

    python3 bench/bench_batched_decode.py [--threads 1 2] [--batches 1 8 32] [--repeats 3] [--steps 16]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import samebits
from bench_lowbit_decode import CONFIG, decode_parser, read_bandwidth, simd_target, weights_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "python"))
from test_causal_lm import write_model  # noqa: E402

TARGETS = {8: 5.0, 32: 15.0}
TRANSFORMER = dict(model_type="llama", hidden_size=384, num_attention_heads=6, num_key_value_heads=6,
                   intermediate_size=768, num_hidden_layers=4, vocab_size=256, max_position_embeddings=1024,
                   tie_word_embeddings=True, rms_norm_eps=1e-5)


def transformer_weights(config, seed=1):
    """Checkpoint tensors for TRANSFORMER: norms near one, matrices N(0, 1/fan_in)."""
    rng = np.random.default_rng(seed)
    d, it = config["hidden_size"], config["intermediate_size"]

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm():
        return (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)

    tensors = {"model.embed_tokens.weight": matrix(config["vocab_size"], d), "model.norm.weight": norm()}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors.update({p + "input_layernorm.weight": norm(), p + "post_attention_layernorm.weight": norm()})
        for name in ("q", "k", "v", "o"):
            tensors[p + f"self_attn.{name}_proj.weight"] = matrix(d, d)
        tensors[p + "mlp.gate_proj.weight"], tensors[p + "mlp.up_proj.weight"] = matrix(it, d), matrix(it, d)
        tensors[p + "mlp.down_proj.weight"] = matrix(d, it)
    return tensors


def prompt_length(i):
    """Sequence i's prompt: 16 + 37 i mod 64 tokens."""
    return 16 + 37 * i % 64


# Mamba-3's fixed widths (blocks/mamba3/state.hpp): chunk Q, state N, head P; d_inner = 2 d_model.
CHUNK, STATE_DIM, HEAD_DIM = 64, 128, 64


class Cost:
    """What one decode step of a model reads and computes: shared by every row (weights) and per row."""

    def __init__(self, weights, layers, d_model, kv_width):
        self.weight_bytes = sum(array.nbytes for array in weights.values())
        # 2 FLOPs per weight of every projection matrix and of the tied head (the embedding, read whole).
        matrices = sum(a.size for name, a in weights.items() if a.ndim == 2 and ("proj" in name or "embed" in name))
        self.projection_flops = 2 * matrices
        self.layers, self.d_model, self.kv_width = layers, d_model, kv_width

    def row(self, cached):
        """(bytes, FLOPs) of one row whose state holds `cached` tokens before the step."""
        read = flops = 0
        for kind in self.layers:
            if kind == "mamba3":
                heads, open_rows = 2 * self.d_model // HEAD_DIM, cached % CHUNK
                read += 4 * heads * (HEAD_DIM * STATE_DIM + open_rows * (STATE_DIM + HEAD_DIM + 3))
                # the read-out q h^T, the scores against the open rows' keys, their values
                flops += 2 * heads * (HEAD_DIM * STATE_DIM + open_rows * (STATE_DIM + HEAD_DIM))
            else:
                keys = cached + 1
                read += 2 * 4 * self.kv_width * keys
                flops += 2 * 2 * self.d_model * keys  # q.k and the weighted values
        return read, flops + self.projection_flops

    def step(self, batch, steps):
        """Mean (bytes, FLOPs) of a timed step of rows 0..batch-1 (row i holds prompt_length(i) + 1 + j
        tokens before timed step j: the untimed step came first)."""
        read, flops = self.weight_bytes, 0
        for i in range(batch):
            for j in range(steps):
                b, f = self.row(prompt_length(i) + 1 + j)
                read, flops = read + b / steps, flops + f / steps
        return read, flops


def fma_peak(target):
    """Per-core FMA peak in FLOP/s of `target` (build/bench_gemm's probe), or None."""
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bench_gemm")
    if not os.path.exists(exe):
        return None
    run = subprocess.run([exe, f"--benchmark_filter=BM_FmaPeak/{target}/", "--benchmark_format=json"],
                         capture_output=True, text=True)
    rows = json.loads(run.stdout).get("benchmarks", []) if run.returncode == 0 else []
    return rows[0]["GFLOP/s"] * 1e9 if rows else None


def bound_seconds(cost, batch, steps, threads, peak):
    """The least time of a `batch`-row step, max(bytes / bandwidth, FLOPs / peak), and which of the two it is
    ("bytes" or "FLOPs"); (None, None) without the probes."""
    read, flops = cost.step(batch, steps)
    bandwidth = read_bandwidth(read, threads)
    if bandwidth is None or peak is None:
        return None, None
    reading, computing = read / (bandwidth * 1e9), flops / (peak * threads)
    return max(reading, computing), "bytes" if reading >= computing else "FLOPs"


def prefilled(model, batch, vocab, capacity):
    """`batch` one-row states, sequence i fed prompt_length(i) tokens."""
    rng = np.random.default_rng(5)
    states = []
    for i in range(batch):
        state = model.allocate_state(1, capacity)
        model.forward(rng.integers(0, vocab, (1, prompt_length(i))), state)
        states.append(state)
    return states


def copy_of(state):
    return state.clone() if hasattr(state, "clone") else state.copy()


def step_seconds(model, states, vocab, steps, repeats, together):
    """Seconds to advance every state by one token, best of `repeats` rounds of `steps`: one `step_many` call
    (together) or one `step` per state (alone)."""
    tokens = np.random.default_rng(7).integers(0, vocab, (steps + 1, len(states)))

    def advance(row, fresh):
        if together:
            model.step_many(row, fresh)
        else:
            for token, state in zip(row, fresh):
                model.step(token[None], state)

    best = float("inf")
    for _ in range(repeats):
        fresh = [copy_of(s) for s in states]
        advance(tokens[0], fresh)  # untimed: a copy's first call settles its cache layout
        start = time.perf_counter()
        for row in tokens[1:]:
            advance(row, fresh)
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def main():
    parser = decode_parser(__doc__, repeats=3, steps=16)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    capacity = 16 + 64 + args.steps + 1
    samba_weights = weights_for(samebits.SambaConfig(**CONFIG))
    samba = samebits.SambaInference(samebits.SambaConfig(**CONFIG), samba_weights)
    llama_weights = transformer_weights(TRANSFORMER)
    with tempfile.TemporaryDirectory() as scratch:
        transformer = samebits.CausalLM.load(write_model(Path(scratch) / "llama", TRANSFORMER, llama_weights))
    models = {"samba": samba, "transformer": transformer}
    d = CONFIG["d_model"]
    costs = {"samba": Cost(samba_weights, CONFIG["layers"], d, d),
             "transformer": Cost(llama_weights, ["attention"] * TRANSFORMER["num_hidden_layers"],
                                 TRANSFORMER["hidden_size"], TRANSFORMER["hidden_size"])}
    target_isa = simd_target()
    peak = fma_peak(target_isa)
    peak_text = f"{peak / 1e9:.1f} GFLOP/s per core" if peak else "n/a (no build/bench_gemm)"
    print(f"samebits {samebits.__version__}; SIMD target {target_isa}; FMA peak {peak_text}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| model | threads | B | step ms | tokens/s | vs B=1 | target | one by one tokens/s | vs one by one "
          "| MB read | MFLOP | bound ms | bound / step | bound vs B=1 | at both bounds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, model in models.items():
        states = prefilled(model, max(args.batches), 256, capacity)
        for threads in args.threads:
            samebits.set_num_threads(threads)
            single = single_bound = None
            for batch in args.batches:
                seconds = step_seconds(model, states[:batch], 256, args.steps, args.repeats, batch > 1)
                alone = step_seconds(model, states[:batch], 256, args.steps, args.repeats, False)
                rate, alone_rate = batch / seconds, batch / alone
                single = seconds if single is None else single
                read, flops = costs[name].step(batch, args.steps)
                bound, bound_by = bound_seconds(costs[name], batch, args.steps, threads, peak)
                single_bound = bound if single_bound is None else single_bound
                target = f"{TARGETS[batch]:.0f}x" if batch in TARGETS else "-"
                if bound is None:
                    bounds = "n/a | n/a | n/a | n/a"
                else:
                    bounds = (f"{bound * 1e3:.2f} ({bound_by}) | {bound / seconds:.2f} | "
                              f"{batch * single / bound:.2f}x | "
                              f"{batch * single_bound / bound:.2f}x")
                print(f"| {name} | {threads} | {batch} | {seconds * 1e3:.2f} | {rate:.0f} | "
                      f"{rate * single:.2f}x | {target} | {alone_rate:.0f} | {rate / alone_rate:.2f}x | "
                      f"{read / 1e6:.2f} | {flops / 1e6:.1f} | {bounds} |")

if __name__ == "__main__":
    main()
