"""Writes tests/fixtures/transformer/*.npz: float64 PyTorch references of the Llama decoder block.

Independent of samebits: the reference is the block's mathematics (RMSNorm eps 1e-6, RoPE theta 10000
rotate-half at absolute positions, grouped-query causal / sliding-window softmax attention, SwiGLU, two
residuals) evaluated in float64 by PyTorch, on float32 weights and inputs. Each file holds the float32
inputs and weights, the case's integers and y64 (float64). tests/python/test_transformer_fixtures.py
compares samebits (float32 arithmetic) against y64 without importing torch.

    python3 tools/make_transformer_fixtures.py
"""

import math
import pathlib
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "transformer"
sys.path.insert(0, str(ROOT / "tests" / "python"))
from samba_checkpoint_writer import ATTENTION_NAMES as NAMES  # noqa: E402  (the block's parameter names, in order)
# name, batch, length, d_model, n_heads, n_kv_heads, intermediate, window, seed
CASES = [
    ("mha_small", 2, 12, 32, 2, 2, 64, 0, 1),
    ("gqa_window8", 2, 40, 64, 4, 2, 96, 8, 2),
    ("mqa_odd_heads", 1, 33, 48, 3, 1, 80, 0, 3),
    ("gqa_long_window16", 1, 150, 32, 4, 1, 48, 16, 4),
]


def weights_for(d_model, n_heads, n_kv_heads, intermediate, rng):
    hd = d_model // n_heads
    shapes = [
        (d_model,),
        (d_model,),
        (n_heads * hd, d_model),
        (n_kv_heads * hd, d_model),
        (n_kv_heads * hd, d_model),
        (d_model, n_heads * hd),
        (intermediate, d_model),
        (intermediate, d_model),
        (d_model, intermediate),
    ]
    out = {}
    for name, shape in zip(NAMES, shapes):
        if len(shape) == 1:
            out[name] = (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[name] = (rng.standard_normal(shape) / math.sqrt(shape[1])).astype(np.float32)
    return out


def reference(x, w, n_heads, n_kv_heads, window, eps=1e-6, theta=10000.0):
    """y in float64 for x (B, L, d), all weights widened exactly to float64."""
    x = torch.from_numpy(x).double()
    t = {name: torch.from_numpy(value).double() for name, value in w.items()}
    b, length, d = x.shape
    hd = d // n_heads
    group = n_heads // n_kv_heads

    def rms(v, weight):
        return weight * (v / torch.sqrt((v * v).mean(-1, keepdim=True) + eps))

    def rope(v):  # v (B, heads, L, hd), absolute positions 0..L-1
        inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        angle = torch.outer(torch.arange(length, dtype=torch.float64), inv)
        cos = torch.cat([angle.cos(), angle.cos()], dim=-1)
        sin = torch.cat([angle.sin(), angle.sin()], dim=-1)
        half = hd // 2
        rotated = torch.cat([-v[..., half:], v[..., :half]], dim=-1)
        return v * cos + rotated * sin

    h = rms(x, t["input_layernorm.weight"])
    q = (h @ t["q_proj.weight"].T).view(b, length, n_heads, hd).transpose(1, 2)
    k = (h @ t["k_proj.weight"].T).view(b, length, n_kv_heads, hd).transpose(1, 2)
    v = (h @ t["v_proj.weight"].T).view(b, length, n_kv_heads, hd).transpose(1, 2)
    q, k = rope(q), rope(k)
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(2, 3)) / math.sqrt(hd)
    query = torch.arange(length).unsqueeze(1)
    key = torch.arange(length).unsqueeze(0)
    hidden = key > query
    if window > 0:
        hidden = hidden | (key <= query - window)
    probs = torch.softmax(scores.masked_fill(hidden, -math.inf), dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(b, length, n_heads * hd)
    r1 = x + ctx @ t["o_proj.weight"].T
    h2 = rms(r1, t["post_attention_layernorm.weight"])
    gate = h2 @ t["gate_proj.weight"].T
    mlp = (gate / (1.0 + torch.exp(-gate))) * (h2 @ t["up_proj.weight"].T)
    return (r1 + mlp @ t["down_proj.weight"].T).numpy()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, batch, length, d_model, n_heads, n_kv_heads, intermediate, window, seed in CASES:
        rng = np.random.default_rng(seed)
        w = weights_for(d_model, n_heads, n_kv_heads, intermediate, rng)
        x = rng.standard_normal((batch, length, d_model)).astype(np.float32)
        y64 = reference(x, w, n_heads, n_kv_heads, window)
        arrays = {f"w:{n}": v for n, v in w.items()}
        np.savez_compressed(
            OUT / f"{name}.npz",
            x=x,
            y64=y64,
            config=np.array([n_heads, n_kv_heads, window], np.int64),
            **arrays,
        )
        print(f"{name}: x {x.shape}, |y| max {np.abs(y64).max():.3f}")


if __name__ == "__main__":
    main()
