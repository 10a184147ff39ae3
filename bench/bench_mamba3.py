"""Mamba-3 block speed: samebits vs PyTorch eager fp32 running the same math, same weights, same threads.

PyTorch prefill runs the chunked (Q = 64) factorization with batched matmuls; PyTorch decode runs the
per-token trapezoidal recurrence (H = alpha H + beta v'k'^T + gamma v k^T, y = H q + D v), O(P N) per
head. samebits runs its bit-exact profile: `forward` for the prefill and `step` for decoding (Python
API; its reports are computed when first read).

Decode is timed two ways. The decode loop (the ratio the target applies to) runs --run-steps consecutive
steps from position --run-from on each side's own carried state, best round of the mean step, so that
samebits' chunk seals (one per 64 tokens) count at the rate a loop meets them. The single steps show how
the cost depends on the position: each is timed on a fresh copy of a state prepared at that position, made
untimed just before it (best of several). That copy reads and writes the whole state (4.4 MB at d_model
768, its transposed copies included) and zeroes its new pages right before the step, through the caches
the weights live in, so a single step costs more than the same step inside a loop; PyTorch's single step
runs on its cache without copying it.
bench_mamba3.cpp (Google Benchmark) times the C++ engine alone, single steps and consecutive ones.

    python3 bench/bench_mamba3.py [--threads 1 2] [--d-model 384 768] [--repeat 5] [--run-from 1000]
                                  [--run-steps 128]
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

import samebits

# weights_for(d_model, seed): the golden fixtures' weight ranges (projections uniform in [-1/8, 1/8), norms
# near one), from the fixture writer.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from make_mamba3_fixtures import weights_for  # noqa: E402

HEAD_DIM, STATE_DIM, ANGLES, CHUNK, EPS = 64, 128, 32, 64, 1e-5
POSITIONS = (1, 63, 64, 65, 1000, 4000)


class TorchMamba3:
    """The Mamba-3 SISO block in PyTorch eager fp32 (no compile, no custom kernels)."""

    def __init__(self, weights):
        self.w = {k: torch.from_numpy(v.copy()) for k, v in weights.items()}
        self.d_model = weights["block_norm.weight"].shape[0]
        self.di, self.nh = 2 * self.d_model, 2 * self.d_model // HEAD_DIM

    def _rms(self, x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w

    def _rotate(self, v, theta):
        c, s = torch.cos(theta), torch.sin(theta)
        v0, v1 = v[..., 0 : 2 * ANGLES : 2], v[..., 1 : 2 * ANGLES : 2]
        rot = torch.stack((v0 * c - v1 * s, v0 * s + v1 * c), dim=-1).flatten(-2)
        return torch.cat((rot, v[..., 2 * ANGLES :]), dim=-1)

    def _project(self, x):
        w, di, nh = self.w, self.di, self.nh
        proj = self._rms(x, w["block_norm.weight"]) @ w["in_proj.weight"].T
        z, v = proj[..., :di], proj[..., di : 2 * di]
        b_raw = proj[..., 2 * di : 2 * di + STATE_DIM]
        c_raw = proj[..., 2 * di + STATE_DIM : 2 * di + 2 * STATE_DIM]
        rest = proj[..., 2 * di + 2 * STATE_DIM :]
        dd_dt, dd_a, trap, angle = rest[..., :nh], rest[..., nh : 2 * nh], rest[..., 2 * nh : 3 * nh], rest[..., 3 * nh :]
        a = torch.clamp(-torch.where(dd_a >= 0, 1 + dd_a, 1 / (1 - dd_a)), max=-1e-4)
        dt = torch.nn.functional.softplus(dd_dt + w["dt_bias"])
        sig = torch.sigmoid(trap)
        bn, cn = self._rms(b_raw, w["B_norm.weight"]), self._rms(c_raw, w["C_norm.weight"])
        rate = torch.tanh(angle) * torch.pi
        return z, v, bn, cn, a, dt, sig, rate

    def _finish(self, x, y, z):
        return x + (y * torch.nn.functional.silu(z)) @ self.w["out_proj.weight"].T

    @torch.no_grad()
    def prefill(self, x):
        """Stateless forward over (B, L, d_model), the chunked factorization."""
        w, nh = self.w, self.nh
        bsz, length, _ = x.shape
        z, v, bn, cn, a, dt, sig, rate = self._project(x)
        theta = torch.remainder(torch.cumsum(rate[:, :, None, :] * dt[..., None], dim=1), 2 * torch.pi)
        k = self._rotate(bn[:, :, None, :] + w["B_bias"], theta)
        q = self._rotate(cn[:, :, None, :] + w["C_bias"], theta)
        v = v.reshape(bsz, length, nh, HEAD_DIM)
        gamma = dt * sig
        beta_next = torch.zeros_like(gamma)
        beta_next[:, :-1] = (dt * (1 - sig))[:, 1:]
        kscale = k * (gamma + beta_next)[..., None]
        diag = (q * k).sum(-1) * gamma
        pad = (-length) % CHUNK
        nc = (length + pad) // CHUNK

        def chunks(t):  # (B, L, H, ...) -> (B, H, nc, Q, ...)
            t = torch.nn.functional.pad(t, (0, 0, 0, 0, 0, pad))
            return t.reshape(bsz, nc, CHUNK, nh, t.shape[-1]).permute(0, 3, 1, 2, 4)

        qc, kc, vc = chunks(q), chunks(kscale), chunks(v)  # (B, H, nc, Q, N|P)
        adt = torch.nn.functional.pad(a * dt, (0, 0, 0, pad)).reshape(bsz, nc, CHUNK, nh).permute(0, 3, 1, 2)
        dacs = torch.cumsum(adt, dim=-1)  # (B, H, nc, Q)
        seg = dacs[..., :, None] - dacs[..., None, :]
        mask = torch.tril(torch.ones(CHUNK, CHUNK, dtype=torch.bool), diagonal=-1)
        decay = torch.exp(seg.masked_fill(~mask, -torch.inf))
        y_intra = ((qc @ kc.transpose(-1, -2)) * decay) @ vc
        h = torch.zeros(bsz, nh, HEAD_DIM, STATE_DIM)
        entering = []
        for c in range(nc):
            entering.append(h)
            dl = dacs[:, :, c, -1]
            vs = vc[:, :, c] * torch.exp(dl[..., None] - dacs[:, :, c])[..., None]
            h = torch.exp(dl)[..., None, None] * h + vs.transpose(-1, -2) @ kc[:, :, c]
        h_in = torch.stack(entering, dim=2)  # (B, H, nc, P, N)
        y_state = (qc @ h_in.transpose(-1, -2)) * torch.exp(dacs)[..., None]
        y = (y_state + y_intra).permute(0, 2, 3, 1, 4).reshape(bsz, nc * CHUNK, nh, HEAD_DIM)[:, :length]
        y = y + (w["D"][:, None] + diag[..., None]) * v
        return self._finish(x, y.reshape(bsz, length, self.di), z)

    def allocate(self, bsz):
        return {
            "h": torch.zeros(bsz, self.nh, HEAD_DIM, STATE_DIM),
            "theta": torch.zeros(bsz, self.nh, ANGLES),
            "k": torch.zeros(bsz, self.nh, STATE_DIM),
            "v": torch.zeros(bsz, self.nh, HEAD_DIM),
            "beta_ready": torch.zeros(bsz, self.nh),
        }

    @torch.no_grad()
    def step(self, x, cache):
        """One token (B, 1, d_model) by the recurrence; `cache` is updated in place."""
        w, nh = self.w, self.nh
        bsz = x.shape[0]
        z, v, bn, cn, a, dt, sig, rate = self._project(x[:, 0])
        cache["theta"] = torch.remainder(cache["theta"] + rate[:, None, :] * dt[..., None], 2 * torch.pi)
        k = self._rotate(bn[:, None, :] + w["B_bias"], cache["theta"])
        q = self._rotate(cn[:, None, :] + w["C_bias"], cache["theta"])
        v = v.reshape(bsz, nh, HEAD_DIM)
        alpha = torch.exp(a * dt)
        beta = (1 - sig) * dt * alpha * cache["beta_ready"]
        h = alpha[..., None, None] * cache["h"]
        h = h + beta[..., None, None] * (cache["v"][..., :, None] * cache["k"][..., None, :])
        h = h + (sig * dt)[..., None, None] * (v[..., :, None] * k[..., None, :])
        cache.update(h=h, k=k, v=v, beta_ready=torch.ones_like(beta))
        y = (h @ q[..., None])[..., 0] + w["D"][:, None] * v
        return self._finish(x, y.reshape(bsz, 1, self.di), z[:, None])


# PyTorch's OpenMP workers keep spinning for a while after its last parallel region (samebits' pool briefly
# too): each series of timings starts after a pause that lets the other side's threads go idle.
SETTLE_SECONDS = 0.05


def best_of(fn, repeat):
    time.sleep(SETTLE_SECONDS)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def step_from_copies(block, state, token, repeat):
    """Best time of one step from `state`'s position: each timed step runs on a fresh copy made (untimed)
    just before it, so the state is as warm as in a decode loop (PyTorch's step reuses its warm cache)."""
    time.sleep(SETTLE_SECONDS)
    best = float("inf")
    for _ in range(repeat):
        fresh = state.copy()
        t0 = time.perf_counter()
        block.step(token, fresh)
        best = min(best, time.perf_counter() - t0)
    return best


def decode_run(step, fresh_state, tokens, repeat):
    """Best, over `repeat` rounds, of the mean step time of a decode loop: consecutive steps over `tokens`
    (B, T, d_model) from a fresh copy of the state (made untimed before each round). With T a multiple of
    the chunk, every round seals the same number of chunks, so the mean includes their share."""
    time.sleep(SETTLE_SECONDS)
    best = float("inf")
    for _ in range(repeat):
        state = fresh_state()
        t0 = time.perf_counter()
        for t in range(tokens.shape[1]):
            step(tokens[:, t : t + 1], state)
        best = min(best, (time.perf_counter() - t0) / tokens.shape[1])
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--d-model", type=int, nargs="+", default=[384, 768])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--run-from", type=int, default=1000, help="position the decode loops start from")
    parser.add_argument("--run-steps", type=int, default=2 * CHUNK, help="steps per decode-loop round")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        samebits.set_num_threads(threads)
        for d_model in args.d_model:
            weights = weights_for(d_model, seed=0)
            ours, theirs = samebits.Mamba3BlockInference(weights), TorchMamba3(weights)
            x = np.random.default_rng(1).standard_normal((1, args.length, d_model)).astype(np.float32)
            xt = torch.from_numpy(x)
            # The two compute the same function: compare once (float32 vs float32, different schedules).
            gap = np.max(np.abs(ours.forward(x) - theirs.prefill(xt).numpy()))
            t_ours, _ = best_of(lambda: ours.forward(x), args.repeat)
            t_torch, _ = best_of(lambda: theirs.prefill(xt), args.repeat)
            print(f"threads={threads} d_model={d_model} prefill L={args.length}: samebits {args.length / t_ours:9.0f} tok/s"
                  f"  torch {args.length / t_torch:9.0f} tok/s  ratio {t_torch / t_ours:5.2f}x  (max |diff| {gap:.1e})")
            token = np.ascontiguousarray(x[:, :1])
            cache = theirs.allocate(1)
            theirs.step(torch.from_numpy(token), cache)
            t_torch_step, _ = best_of(lambda: theirs.step(torch.from_numpy(token), dict(cache)), args.repeat * 20)
            steps = {}
            for position in POSITIONS:
                state = ours.allocate_state(1)
                prefix = np.random.default_rng(2).standard_normal((1, position, d_model)).astype(np.float32)
                ours.forward(prefix, state)
                steps[position] = step_from_copies(ours, state, token, args.repeat * 20)
            by_position = " ".join(f"{p}:{t * 1e6:.0f}us" for p, t in steps.items())
            print(f"threads={threads} d_model={d_model} decode step: torch {t_torch_step * 1e6:.0f}us; samebits by "
                  f"position {by_position}; single-step ratio at 1000: {t_torch_step / steps[1000]:.2f}x")
            # A decode loop: consecutive steps from --run-from, each side on its own carried state.
            run_tokens = np.random.default_rng(3).standard_normal((1, args.run_steps, d_model)).astype(np.float32)
            run_tokens_t = torch.from_numpy(run_tokens)
            state = ours.allocate_state(1)
            prefix = np.random.default_rng(2).standard_normal((1, args.run_from, d_model)).astype(np.float32)
            ours.forward(prefix, state)
            run_torch = decode_run(theirs.step, lambda: dict(cache), run_tokens_t, args.repeat)
            run_ours = decode_run(ours.step, state.copy, run_tokens, args.repeat)
            print(f"threads={threads} d_model={d_model} decode loop of {args.run_steps} steps from {args.run_from} "
                  f"(mean step, chunk seals included): torch {run_torch * 1e6:.0f}us samebits {run_ours * 1e6:.0f}us "
                  f"ratio {run_torch / run_ours:.2f}x (target >= 5x: {'met' if run_torch >= 5 * run_ours else 'not met'})")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
