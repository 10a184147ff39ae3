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
server did before step_many), their tokens/s and the batched step's ratio to it. The machine may be shared:
figures are indicative.

    python3 bench/bench_batched_decode.py [--threads 1 2] [--batches 1 8 32] [--repeats 3] [--steps 16]
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import samebits
from bench_lowbit_decode import CONFIG, decode_parser, simd_target, weights_for

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


def prefilled(model, batch, vocab, capacity):
    """`batch` one-row states, sequence i fed 16 + 37 i mod 64 tokens."""
    rng = np.random.default_rng(5)
    states = []
    for i in range(batch):
        state = model.allocate_state(1, capacity)
        model.forward(rng.integers(0, vocab, (1, 16 + 37 * i % 64)), state)
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
    samba = samebits.SambaInference(samebits.SambaConfig(**CONFIG), weights_for(samebits.SambaConfig(**CONFIG)))
    with tempfile.TemporaryDirectory() as scratch:
        transformer = samebits.CausalLM.load(write_model(Path(scratch) / "llama", TRANSFORMER,
                                                         transformer_weights(TRANSFORMER)))
    models = {"samba": samba, "transformer": transformer}
    print(f"samebits {samebits.__version__}; SIMD target {simd_target()}; load average {os.getloadavg()[0]:.2f}")
    print("| model | threads | B | step ms | tokens/s | vs B=1 | target | one by one tokens/s | vs one by one |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, model in models.items():
        states = prefilled(model, max(args.batches), 256, capacity)
        for threads in args.threads:
            samebits.set_num_threads(threads)
            single = None
            for batch in args.batches:
                seconds = step_seconds(model, states[:batch], 256, args.steps, args.repeats, batch > 1)
                alone = step_seconds(model, states[:batch], 256, args.steps, args.repeats, False)
                rate, alone_rate = batch / seconds, batch / alone
                single = rate if single is None else single
                target = f"{TARGETS[batch]:.0f}x" if batch in TARGETS else "-"
                print(f"| {name} | {threads} | {batch} | {seconds * 1e3:.2f} | {rate:.0f} | {rate / single:.2f}x | "
                      f"{target} | {alone_rate:.0f} | {rate / alone_rate:.2f}x |")

if __name__ == "__main__":
    main()
