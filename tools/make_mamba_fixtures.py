"""Float64 reference fixtures for Mamba-1 and Mamba-2, computed in PyTorch from the MATH, not from the
identical-profile rounding schedule: the plain per-token recurrences

    Mamba-1:  h_t = exp(delta_t A) h_{t-1} + (delta_t B_t) u_t,       y_t = C_t . h_t + D u_t
    Mamba-2:  h_t = exp(dt_t A) h_{t-1} + B_t (x_t dt_t),             y_t = C_t . h_t + D x_t

(Mamba-2 without any chunking: the chunked SSD of the profile is an exact factorization of this
recurrence, so in exact arithmetic both agree), around the blocks' RMSNorms, projections, causal conv,
SiLU, softplus, dt clamp, gate and residual, all in float64. The outputs are saved with the float32
inputs and weights under tests/fixtures/mamba1/ and tests/fixtures/mamba2/; the pytest suites (no torch)
compare samebits with them within a stated tolerance.

Usage: python3 tools/make_mamba_fixtures.py   (writes the .npz files; needs numpy and torch)
"""

import os

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPS = 1e-5


def rmsnorm(x, w):
    return w * (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS))


def causal_conv_silu(pre, weight, bias, window=None):
    """pre (B, L, C); weight (C, 4); window (B, C, 4) of earlier inputs (zeros when None)."""
    B, L, C = pre.shape
    past = torch.zeros(B, 3, C, dtype=pre.dtype) if window is None else window[:, :, 1:].transpose(1, 2)
    ext = torch.cat([past, pre], dim=1)  # (B, L + 3, C)
    acc = bias.expand(B, L, C).clone()
    for k in range(4):
        acc = acc + weight[:, k] * ext[:, k : k + L]
    return torch.nn.functional.silu(acc)


def softplus(v):
    return torch.where(v <= 20.0, torch.log1p(torch.exp(v)), v)


def mamba1_forward(w, x):
    """The Mamba-1 block (docs/blocks.md §1) in w's dtype, from a zero state."""
    dm = x.shape[-1]
    di, r = 2 * dm, (dm + 15) // 16
    n = rmsnorm(x, w["norm.weight"])
    proj = n @ w["in_proj.weight"].T
    xh, z = proj[..., :di], proj[..., di:]
    u = causal_conv_silu(xh, w["conv1d.weight"].reshape(di, 4), w["conv1d.bias"])
    xp = u @ w["x_proj.weight"].T
    dt_low, Bm, Cm = xp[..., :r], xp[..., r : r + 16], xp[..., r + 16 :]
    delta = softplus(dt_low @ w["dt_proj.weight"].T + w["dt_proj.bias"])
    A = -torch.exp(w["A_log"])  # (di, 16)
    h = torch.zeros(x.shape[0], di, 16, dtype=x.dtype)
    ys = []
    for t in range(x.shape[1]):
        dl = delta[:, t, :, None]
        h = torch.exp(dl * A) * h + (dl * Bm[:, t, None, :]) * u[:, t, :, None]
        ys.append((h * Cm[:, t, None, :]).sum(-1))
    y = torch.stack(ys, dim=1) + u * w["D"]
    return x + (y * torch.nn.functional.silu(z)) @ w["out_proj.weight"].T


def mamba2_forward(w, x, dt_limit=(0.0, float("inf")), h0=None):
    """The Mamba-2 block (docs/blocks.md §2) in w's dtype, by its per-token recurrence from h0 (zeros)."""
    B, L, dm = x.shape
    di = 2 * dm
    H, cd = di // 64, di + 256
    n = rmsnorm(x, w["block_norm.weight"])
    proj = n @ w["in_proj.weight"].T
    z, xbc_pre, dt_raw = proj[..., :di], proj[..., di : di + cd], proj[..., di + cd :]
    xbc = causal_conv_silu(xbc_pre, w["conv1d.weight"].reshape(cd, 4), w["conv1d.bias"])
    xs = xbc[..., :di].reshape(B, L, H, 64)
    Bm, Cm = xbc[..., di : di + 128], xbc[..., di + 128 :]
    dt = torch.clamp(softplus(dt_raw + w["dt_bias"]), dt_limit[0], dt_limit[1])  # (B, L, H)
    A = -torch.exp(w["A_log"])  # (H,)
    h = torch.zeros(B, H, 64, 128, dtype=x.dtype) if h0 is None else h0.clone()
    ys = []
    for t in range(L):
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]
        h = decay * h + (xs[:, t] * dt[:, t, :, None])[..., None] * Bm[:, t, None, None, :]
        ys.append((h * Cm[:, t, None, None, :]).sum(-1))  # (B, H, 64)
    y = torch.stack(ys, dim=1) + xs * w["D"][:, None]
    g = y.reshape(B, L, di) * torch.nn.functional.silu(z)
    return x + rmsnorm(g, w["norm.weight"]) @ w["out_proj.weight"].T, h


def random_weights(tensors, seed, tweak):
    rng = np.random.default_rng(seed)
    out = {name: (rng.standard_normal(shape) * 0.1).astype(np.float32) for name, shape in tensors}
    tweak(out, rng)
    return out


def as64(arrays):
    return {k: torch.from_numpy(np.asarray(v, np.float64)) for k, v in arrays.items()}


def main():
    torch.set_grad_enabled(False)
    dm = 32
    m1_tensors = [
        ("norm.weight", (dm,)), ("in_proj.weight", (4 * dm, dm)), ("conv1d.weight", (2 * dm, 1, 4)),
        ("conv1d.bias", (2 * dm,)), ("x_proj.weight", (2 + 32, 2 * dm)), ("dt_proj.weight", (2 * dm, 2)),
        ("dt_proj.bias", (2 * dm,)), ("A_log", (2 * dm, 16)), ("D", (2 * dm,)), ("out_proj.weight", (dm, 2 * dm)),
    ]

    def m1_tweak(w, rng):
        w["norm.weight"] += 1.0
        w["A_log"] = np.log(np.tile(np.arange(1, 17, dtype=np.float32), (2 * dm, 1)))  # S4D-real init
        w["dt_proj.bias"] = (rng.uniform(-4.0, -1.0, 2 * dm)).astype(np.float32)

    w1 = random_weights(m1_tensors, 41, m1_tweak)
    x1 = np.random.default_rng(42).standard_normal((2, 40, dm)).astype(np.float32)
    y1 = mamba1_forward(as64(w1), torch.from_numpy(x1.astype(np.float64))).numpy()
    os.makedirs(os.path.join(ROOT, "tests/fixtures/mamba1"), exist_ok=True)
    np.savez_compressed(os.path.join(ROOT, "tests/fixtures/mamba1/recurrence_f64.npz"), x=x1, y64=y1,
                        **{"w:" + k: v for k, v in w1.items()})

    m2_tensors = [
        ("block_norm.weight", (dm,)), ("in_proj.weight", (4 * dm + 256 + 1, dm)), ("conv1d.weight", (2 * dm + 256, 1, 4)),
        ("conv1d.bias", (2 * dm + 256,)), ("dt_bias", (1,)), ("A_log", (1,)), ("D", (1,)), ("norm.weight", (2 * dm,)),
        ("out_proj.weight", (dm, 2 * dm)),
    ]

    def m2_tweak(w, rng):
        w["block_norm.weight"] += 1.0
        w["norm.weight"] += 1.0
        w["A_log"] = np.array([0.5], np.float32)
        w["dt_bias"] = np.array([-2.0], np.float32)

    w2 = random_weights(m2_tensors, 43, m2_tweak)
    x2 = np.random.default_rng(44).standard_normal((1, 300, dm)).astype(np.float32)  # crosses the 256 chunk
    h0 = (np.random.default_rng(45).standard_normal((1, 1, 64, 128)) * 0.05).astype(np.float32)
    x64 = torch.from_numpy(x2.astype(np.float64))
    y2, _ = mamba2_forward(as64(w2), x64)
    y2c, _ = mamba2_forward(as64(w2), x64[:, :80], dt_limit=(0.01, 0.1), h0=torch.from_numpy(h0.astype(np.float64)))
    os.makedirs(os.path.join(ROOT, "tests/fixtures/mamba2"), exist_ok=True)
    np.savez_compressed(os.path.join(ROOT, "tests/fixtures/mamba2/recurrence_f64.npz"), x=x2, y64=y2.numpy(),
                        h0=h0, y64_clamped_h0=y2c.numpy(), **{"w:" + k: v for k, v in w2.items()})
    for sub in ("mamba1", "mamba2"):
        path = os.path.join(ROOT, f"tests/fixtures/{sub}/recurrence_f64.npz")
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
