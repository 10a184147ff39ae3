"""Float64 reference fixtures for the Mamba-3 block, computed in PyTorch from the MATH, not from the
chunked profile (docs/blocks.md §3.4): per token and head the trapezoidal recurrence

    H_t = alpha_t H_{t-1} + beta_t v_{t-1} k_{t-1}^T + gamma_t v_t k_t^T,   y_t = H_t q_t + D v_t,
    alpha_t = exp(A_t dt_t), gamma_t = sigmoid(trap_t) dt_t, beta_t = (1 - sigmoid(trap_t)) dt_t alpha_t,

with q, k the biased, normed and rotated C / B (rotation angle theta_t = theta_{t-1} + tanh(angle_t) pi dt_t
on interleaved pairs of the first 32 pairs), out = x + out_proj((y) * silu(z)). Every step runs in
float64 on the float32 weights and inputs, so the only float32 rounding in the comparison is samebits'.

Writes tests/fixtures/mamba3/recurrence_d32.npz (weights, x, y, the final H and theta, float32); the pytest
test_mamba3_fixtures.py compares samebits with a stated tolerance. Run: python3 tools/make_mamba3_fixtures.py
"""

import os

import numpy as np
import torch

HEAD_DIM, STATE_DIM, ANGLES = 64, 128, 32
EPS = 1e-5


def weights_for(d_model, seed):
    """Weights in the golden fixtures' ranges: projections uniform in [-1/8, 1/8), norms near one."""
    rng = np.random.default_rng(seed)
    di, h = 2 * d_model, 2 * d_model // HEAD_DIM
    dip = 2 * di + 2 * STATE_DIM + 3 * h + ANGLES
    u = lambda shape, lo, hi: rng.uniform(lo, hi, shape).astype(np.float32)  # noqa: E731
    return {
        "block_norm.weight": u((d_model,), 0.9, 1.1),
        "in_proj.weight": u((dip, d_model), -0.125, 0.125),
        "dt_bias": u((h,), -0.5, 0.5),
        "B_norm.weight": u((STATE_DIM,), 0.9, 1.1),
        "C_norm.weight": u((STATE_DIM,), 0.9, 1.1),
        "B_bias": u((h, STATE_DIM), -0.5, 0.5),
        "C_bias": u((h, STATE_DIM), -0.5, 0.5),
        "D": u((h,), -1.0, 1.0),
        "out_proj.weight": u((d_model, di), -0.125, 0.125),
    }


def rmsnorm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rotate(v, theta):
    """Interleaved pairs (2j, 2j+1) for j < 32 rotated by theta[..., j]; the rest unchanged."""
    out = v.clone()
    c, s = torch.cos(theta), torch.sin(theta)
    v0, v1 = v[..., 0 : 2 * ANGLES : 2], v[..., 1 : 2 * ANGLES : 2]
    out[..., 0 : 2 * ANGLES : 2] = v0 * c - v1 * s
    out[..., 1 : 2 * ANGLES : 2] = v0 * s + v1 * c
    return out


def recurrence(weights, x):
    """The block by its per-token recurrence in float64. x: (B, L, d_model). Returns (y, H_T, theta_T)."""
    w = {k: torch.from_numpy(v).double() for k, v in weights.items()}
    x = torch.from_numpy(x).double()
    bsz, length, d_model = x.shape
    di, nh = 2 * d_model, 2 * d_model // HEAD_DIM
    proj = rmsnorm(x, w["block_norm.weight"]) @ w["in_proj.weight"].T
    z, v_all = proj[..., :di], proj[..., di : 2 * di]
    b_raw = proj[..., 2 * di : 2 * di + STATE_DIM]
    c_raw = proj[..., 2 * di + STATE_DIM : 2 * di + 2 * STATE_DIM]
    rest = proj[..., 2 * di + 2 * STATE_DIM :]
    dd_dt, dd_a, trap, angle = rest[..., :nh], rest[..., nh : 2 * nh], rest[..., 2 * nh : 3 * nh], rest[..., 3 * nh :]
    heavy = torch.where(dd_a >= 0, 1 + dd_a, 1 / (1 - dd_a))
    a = torch.clamp(-heavy, max=-1e-4)
    dt = torch.nn.functional.softplus(dd_dt + w["dt_bias"])
    sig = torch.sigmoid(trap)
    bn, cn = rmsnorm(b_raw, w["B_norm.weight"]), rmsnorm(c_raw, w["C_norm.weight"])
    rate = torch.tanh(angle) * torch.pi  # (B, L, 32), shared by the heads
    theta = torch.cumsum(rate[:, :, None, :] * dt[..., None], dim=1)  # (B, L, H, 32)
    k = rotate(bn[:, :, None, :] + w["B_bias"], theta)  # (B, L, H, N)
    q = rotate(cn[:, :, None, :] + w["C_bias"], theta)
    v = v_all.reshape(bsz, length, nh, HEAD_DIM)
    alpha, gamma = torch.exp(a * dt), sig * dt
    beta = (1 - sig) * dt * alpha
    state = torch.zeros(bsz, nh, HEAD_DIM, STATE_DIM, dtype=torch.float64)
    ys = []
    for t in range(length):
        state = alpha[:, t, :, None, None] * state + gamma[:, t, :, None, None] * torch.einsum(
            "bhp,bhn->bhpn", v[:, t], k[:, t]
        )
        if t > 0:
            state = state + beta[:, t, :, None, None] * torch.einsum("bhp,bhn->bhpn", v[:, t - 1], k[:, t - 1])
        ys.append(torch.einsum("bhpn,bhn->bhp", state, q[:, t]) + w["D"][:, None] * v[:, t])
    y = torch.stack(ys, dim=1).reshape(bsz, length, di)
    out = x + (y * torch.nn.functional.silu(z)) @ w["out_proj.weight"].T
    return out.numpy(), state.numpy(), torch.remainder(theta[:, -1], 2 * torch.pi).numpy()


def main():
    d_model, bsz, length = 32, 2, 150  # crosses the 64 and 128 chunk boundaries
    weights = weights_for(d_model, 2024)
    x = np.random.default_rng(7).standard_normal((bsz, length, d_model)).astype(np.float32)
    y, h_last, theta_last = recurrence(weights, x)
    root = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "mamba3")
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "recurrence_d32.npz")
    # The float64 results are stored rounded to float32 (one rounding, at most 6e-8 relative): far below
    # the test's tolerance, and half the file size.
    refs = {"y": y, "h_last": h_last, "theta_last": theta_last}
    np.savez_compressed(
        path, x=x, **{k: v.astype(np.float32) for k, v in refs.items()}, **{f"w:{k}": v for k, v in weights.items()}
    )
    print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
