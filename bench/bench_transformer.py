"""TransformerBlockInference vs PyTorch eager fp32 on the same weights and thread count, in one run.

Shape of issue 3: d_model 512, 8 heads, 2 kv heads, intermediate 1536. Prefill tokens/s at L = 512 and
the decode step time at positions 16, 512 and 2048 (both sides carry a KV cache: PyTorch writes into a
preallocated cache and attends over its used prefix; neither recomputes cached keys or values).

    python3 bench/bench_transformer.py [--threads 2] [--repeats 5] [--steps 32]

Prints one table with milliseconds / microseconds and the speed ratio (PyTorch time / samebits time;
above 1 means samebits is faster). The machine may be shared: the load average is printed with it.
"""

import argparse
import os
import time

import numpy as np
import torch

import samebits

D_MODEL, HEADS, KV_HEADS, INTERMEDIATE = 512, 8, 2, 1536
HEAD_DIM = D_MODEL // HEADS
NAMES_SHAPES = [
    ("input_layernorm.weight", (D_MODEL,)),
    ("post_attention_layernorm.weight", (D_MODEL,)),
    ("q_proj.weight", (HEADS * HEAD_DIM, D_MODEL)),
    ("k_proj.weight", (KV_HEADS * HEAD_DIM, D_MODEL)),
    ("v_proj.weight", (KV_HEADS * HEAD_DIM, D_MODEL)),
    ("o_proj.weight", (D_MODEL, HEADS * HEAD_DIM)),
    ("gate_proj.weight", (INTERMEDIATE, D_MODEL)),
    ("up_proj.weight", (INTERMEDIATE, D_MODEL)),
    ("down_proj.weight", (D_MODEL, INTERMEDIATE)),
]


def make_weights(seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in NAMES_SHAPES:
        if len(shape) == 1:
            out[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[name] = (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32)
    return out


class TorchBlock:
    """A plain eager Llama decoder layer (GQA, RoPE rotate-half, causal mask, SwiGLU) with a static cache."""

    def __init__(self, weights, max_positions=4096, eps=1e-6, theta=10000.0):
        t = {name: torch.from_numpy(value.copy()) for name, value in weights.items()}
        self.w = t
        self.eps = eps
        inv = 1.0 / (theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
        angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv)
        emb = torch.cat([angles, angles], dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()

    def norm(self, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)

    def new_cache(self, batch, max_tokens):
        shape = (batch, KV_HEADS, max_tokens, HEAD_DIM)
        return {"k": torch.zeros(shape), "v": torch.zeros(shape), "len": 0}

    def rotated_qkv(self, x, pos0, n_heads, n_kv_heads, head_dim):
        """q, k, v of x (B, L, d_model) as (B, heads, L, head_dim), q and k rotated for positions pos0 on."""
        w, F = self.w, torch.nn.functional
        b, length, _ = x.shape
        h = self.norm(x, w["input_layernorm.weight"])
        q = F.linear(h, w["q_proj.weight"]).view(b, length, n_heads, head_dim).transpose(1, 2)
        k = F.linear(h, w["k_proj.weight"]).view(b, length, n_kv_heads, head_dim).transpose(1, 2)
        v = F.linear(h, w["v_proj.weight"]).view(b, length, n_kv_heads, head_dim).transpose(1, 2)
        cos, sin = self.cos[pos0 : pos0 + length], self.sin[pos0 : pos0 + length]
        return q * cos + self.rotate_half(q) * sin, k * cos + self.rotate_half(k) * sin, v

    def output(self, x, ctx):
        """The block's output from x and the attention context ctx (B, L, heads * head_dim): o_proj and the
        first residual, then RMSNorm, the SwiGLU MLP and the second residual."""
        w, F = self.w, torch.nn.functional
        r1 = x + F.linear(ctx, w["o_proj.weight"])
        h2 = self.norm(r1, w["post_attention_layernorm.weight"])
        mlp = F.silu(F.linear(h2, w["gate_proj.weight"])) * F.linear(h2, w["up_proj.weight"])
        return r1 + F.linear(mlp, w["down_proj.weight"])

    def forward(self, x, cache):
        b, length, _ = x.shape
        pos0 = cache["len"]
        q, k, v = self.rotated_qkv(x, pos0, HEADS, KV_HEADS, HEAD_DIM)
        cache["k"][:, :, pos0 : pos0 + length] = k
        cache["v"][:, :, pos0 : pos0 + length] = v
        total = pos0 + length
        cache["len"] = total
        keys = cache["k"][:, :, :total].repeat_interleave(HEADS // KV_HEADS, dim=1)
        values = cache["v"][:, :, :total].repeat_interleave(HEADS // KV_HEADS, dim=1)
        scores = torch.matmul(q, keys.transpose(2, 3)) * (HEAD_DIM**-0.5)
        if length > 1:
            query_pos = torch.arange(pos0, total).unsqueeze(1)
            key_pos = torch.arange(total).unsqueeze(0)
            scores = scores + torch.where(key_pos > query_pos, torch.finfo(torch.float32).min, 0.0)
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, values).transpose(1, 2).reshape(b, length, HEADS * HEAD_DIM)
        return self.output(x, ctx)


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_prefill(ours, theirs, repeats, length=512):
    x = np.random.default_rng(1).standard_normal((1, length, D_MODEL)).astype(np.float32)
    xt = torch.from_numpy(x)
    ours.forward(x)
    with torch.no_grad():
        theirs.forward(xt, theirs.new_cache(1, length))
        t_torch = best_of(repeats, lambda: theirs.forward(xt, theirs.new_cache(1, length)))
    t_ours = best_of(repeats, lambda: ours.forward(x))
    # agreement check (not bitwise: PyTorch is not this profile)
    with torch.no_grad():
        diff = np.abs(ours.forward(x) - theirs.forward(xt, theirs.new_cache(1, length)).numpy()).max()
    return t_ours, t_torch, diff


def bench_decode(ours, theirs, position, repeats, steps):
    rng = np.random.default_rng(2)
    prompt = rng.standard_normal((1, position, D_MODEL)).astype(np.float32)
    tokens = rng.standard_normal((steps, 1, 1, D_MODEL)).astype(np.float32)
    capacity = position + steps
    prefilled = ours.allocate_state(1, capacity)
    ours.forward(prompt, prefilled)
    state = prefilled.copy()

    def run_ours():
        for t in range(steps):
            ours.step(tokens[t], state)

    def reset_ours():
        nonlocal state
        state = prefilled.copy()

    tokens_t = torch.from_numpy(tokens)
    with torch.no_grad():
        cache = theirs.new_cache(1, capacity)
        theirs.forward(torch.from_numpy(prompt), cache)

        def run_theirs():
            cache["len"] = position
            for t in range(steps):
                theirs.forward(tokens_t[t], cache)

        run_theirs()
        t_torch = best_of(repeats, run_theirs) / steps
    best = float("inf")
    for _ in range(repeats):
        reset_ours()
        start = time.perf_counter()
        run_ours()
        best = min(best, time.perf_counter() - start)
    return best / steps, t_torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    samebits.set_num_threads(args.threads)
    weights = make_weights()
    ours = samebits.TransformerBlockInference(weights, n_heads=HEADS, n_kv_heads=KV_HEADS)
    theirs = TorchBlock(weights)
    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}")
    t_ours, t_torch, diff = bench_prefill(ours, theirs, args.repeats)
    print(f"prefill L=512   samebits {t_ours * 1e3:8.2f} ms ({512 / t_ours:9.0f} tok/s)   "
          f"torch {t_torch * 1e3:8.2f} ms ({512 / t_torch:9.0f} tok/s)   ratio {t_torch / t_ours:5.2f}x   "
          f"max |diff| {diff:.2e}")
    for position in (16, 512, 2048):
        t_ours, t_torch = bench_decode(ours, theirs, position, args.repeats, args.steps)
        print(f"decode at {position:5d}  samebits {t_ours * 1e6:8.1f} us   torch {t_torch * 1e6:8.1f} us   "
              f"ratio {t_torch / t_ours:5.2f}x")


if __name__ == "__main__":
    main()
