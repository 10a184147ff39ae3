"""Mamba-1 / Mamba-2 at d_model 768 against PyTorch eager fp32 on the same weights and thread count, in
the same run: prefill tokens/s at L = 1024 and decode step time, plus the Mamba-2 step at positions
1, 255, 256, 1000 and 4000 (samebits' flat-cost decoding vs re-running the open chunk).

The PyTorch side is a straightforward eager implementation of the same blocks (HF-style mixers):
Mamba-1 prefill runs the selective scan as a loop over time (HF MambaMixer's slow path), Mamba-2 prefill
runs the chunked SSD with segment sums (HF Mamba2Mixer's torch path, chunk 256); decode is the
per-token recurrence with a carried conv window and SSM state. For Mamba-2 a second PyTorch decode,
re-running the open chunk each token as mojolearn's profile does, is shown for the position sweep.

Usage: python3 bench/bench_mamba.py [--threads N] [--quick]
"""

import argparse
import time

import numpy as np
import torch

import samebits

F = torch.nn.functional
D_MODEL = 768


# ------------------------------------------------------------------------------------------- weights


def mamba1_weights(dm, rng):
    di, r = 2 * dm, (dm + 15) // 16
    w = {
        "norm.weight": 1 + 0.02 * rng.standard_normal(dm),
        "in_proj.weight": rng.standard_normal((2 * di, dm)) / np.sqrt(dm),
        "conv1d.weight": rng.standard_normal((di, 1, 4)) * 0.3,
        "conv1d.bias": rng.standard_normal(di) * 0.1,
        "x_proj.weight": rng.standard_normal((r + 32, di)) / np.sqrt(di),
        "dt_proj.weight": rng.standard_normal((di, r)) / np.sqrt(r),
        "dt_proj.bias": rng.uniform(-4.0, -1.0, di),
        "A_log": np.log(np.tile(np.arange(1, 17), (di, 1))),
        "D": np.ones(di),
        "out_proj.weight": rng.standard_normal((dm, di)) / np.sqrt(di),
    }
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


def mamba2_weights(dm, rng):
    di = 2 * dm
    H, cd = di // 64, di + 256
    w = {
        "block_norm.weight": 1 + 0.02 * rng.standard_normal(dm),
        "in_proj.weight": rng.standard_normal((2 * di + 256 + H, dm)) / np.sqrt(dm),
        "conv1d.weight": rng.standard_normal((cd, 1, 4)) * 0.3,
        "conv1d.bias": rng.standard_normal(cd) * 0.1,
        "dt_bias": rng.uniform(-4.0, -1.0, H),
        "A_log": np.log(rng.uniform(1.0, 16.0, H)),
        "D": np.ones(H),
        "norm.weight": 1 + 0.02 * rng.standard_normal(di),
        "out_proj.weight": rng.standard_normal((dm, di)) / np.sqrt(di),
    }
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


# ------------------------------------------------------------------------------------------- torch


def rmsnorm(x, w, eps=1e-5):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class TorchMamba1:
    def __init__(self, w):
        self.w = {k: torch.from_numpy(v) for k, v in w.items()}
        self.dm = w["norm.weight"].shape[0]
        self.di, self.r = 2 * self.dm, (self.dm + 15) // 16
        self.A = -torch.exp(self.w["A_log"])

    def forward(self, x):
        w, di, r = self.w, self.di, self.r
        B, L, _ = x.shape
        proj = rmsnorm(x, w["norm.weight"]) @ w["in_proj.weight"].T
        xh, z = proj[..., :di].transpose(1, 2), proj[..., di:]
        u = F.silu(F.conv1d(xh, w["conv1d.weight"], w["conv1d.bias"], padding=3, groups=di)[..., :L])  # (B, di, L)
        xp = u.transpose(1, 2) @ w["x_proj.weight"].T
        dt, Bm, Cm = xp[..., :r], xp[..., r : r + 16], xp[..., r + 16 :]
        delta = F.softplus(dt @ w["dt_proj.weight"].T + w["dt_proj.bias"]).transpose(1, 2)  # (B, di, L)
        dA = torch.exp(self.A[None, :, None, :] * delta[..., None])  # (B, di, L, 16)
        dBu = delta[..., None] * Bm[:, None, :, :] * u[..., None]
        h = torch.zeros(B, di, 16)
        ys = []
        for t in range(L):
            h = dA[:, :, t] * h + dBu[:, :, t]
            ys.append(torch.matmul(h, Cm[:, t, :, None])[..., 0])
        y = torch.stack(ys, dim=-1) + u * w["D"][None, :, None]
        y = y.transpose(1, 2) * F.silu(z)
        return x + y @ w["out_proj.weight"].T

    def state(self, B):
        return torch.zeros(B, self.di, 4), torch.zeros(B, self.di, 16)

    def step(self, x, state):
        w, di, r = self.w, self.di, self.r
        window, h = state
        proj = rmsnorm(x[:, 0], w["norm.weight"]) @ w["in_proj.weight"].T
        xh, z = proj[:, :di], proj[:, di:]
        window.copy_(torch.roll(window, shifts=-1, dims=-1))
        window[:, :, -1] = xh
        u = F.silu((window * w["conv1d.weight"][:, 0]).sum(-1) + w["conv1d.bias"])
        xp = u @ w["x_proj.weight"].T
        delta = F.softplus(xp[:, :r] @ w["dt_proj.weight"].T + w["dt_proj.bias"])
        Bm, Cm = xp[:, r : r + 16], xp[:, r + 16 :]
        h.mul_(torch.exp(delta[..., None] * self.A)).add_(delta[..., None] * Bm[:, None, :] * u[..., None])
        y = (h @ Cm[..., None])[..., 0] + u * w["D"]
        return x + ((y * F.silu(z)) @ w["out_proj.weight"].T)[:, None]


def segsum(x):
    """exp-ready segment sums: out[..., i, j] = sum_{j < k <= i} x[..., k], -inf above the diagonal."""
    T = x.size(-1)
    x = x[..., None].expand(*x.shape, T)
    x = x.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1), 0)
    s = torch.cumsum(x, dim=-2)
    return s.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=0), -torch.inf)


class TorchMamba2:
    Q = 256

    def __init__(self, w):
        self.w = {k: torch.from_numpy(v) for k, v in w.items()}
        self.dm = w["block_norm.weight"].shape[0]
        self.di = 2 * self.dm
        self.H, self.cd = self.di // 64, self.di + 256
        self.A = -torch.exp(self.w["A_log"])

    def _in(self, x):
        w, di, cd = self.w, self.di, self.cd
        proj = rmsnorm(x, w["block_norm.weight"]) @ w["in_proj.weight"].T
        return proj[..., :di], proj[..., di : di + cd], proj[..., di + cd :]

    def _out(self, x, y, z):
        g = y * F.silu(z)
        return x + rmsnorm(g, self.w["norm.weight"]) @ self.w["out_proj.weight"].T

    def ssd(self, xs, dt, Bm, Cm, h0):
        """Chunked SSD (ssd_minimal) over (B, L) with L a multiple of Q; returns y (B, L, H, P) and h."""
        Bsz, L, H, P = xs.shape
        c, Q = L // self.Q, self.Q
        X = (xs * dt[..., None]).reshape(Bsz, c, Q, H, P)
        Adt = (dt * self.A).reshape(Bsz, c, Q, H).permute(0, 3, 1, 2)  # (B, H, c, Q)
        Bc, Cc = Bm.reshape(Bsz, c, Q, -1), Cm.reshape(Bsz, c, Q, -1)
        cs = torch.cumsum(Adt, dim=-1)
        Lm = torch.exp(segsum(Adt))
        y_diag = torch.einsum("bcln,bcsn,bhcls,bcshp->bclhp", Cc, Bc, Lm, X)
        decay = torch.exp(cs[..., -1:] - cs)
        states = torch.einsum("bcln,bhcl,bclhp->bchpn", Bc, decay, X)
        states = torch.cat([h0[:, None], states], dim=1)
        chunk_decay = torch.exp(segsum(F.pad(cs[..., -1], (1, 0))))
        new_states = torch.einsum("bhzc,bchpn->bzhpn", chunk_decay, states)
        states, h = new_states[:, :-1], new_states[:, -1]
        y_off = torch.einsum("bcln,bchpn,bhcl->bclhp", Cc, states, torch.exp(cs))
        return (y_diag + y_off).reshape(Bsz, L, H, P), h

    def forward(self, x):
        B, L, _ = x.shape
        z, xbc, dt_raw = self._in(x)
        xbc = F.silu(F.conv1d(xbc.transpose(1, 2), self.w["conv1d.weight"], self.w["conv1d.bias"], padding=3,
                              groups=self.cd)[..., :L].transpose(1, 2))
        dt = F.softplus(dt_raw + self.w["dt_bias"])
        pad = (-L) % self.Q
        xs = F.pad(xbc[..., : self.di], (0, 0, 0, pad)).reshape(B, L + pad, self.H, 64)
        Bm, Cm = F.pad(xbc[..., self.di : self.di + 128], (0, 0, 0, pad)), F.pad(xbc[..., self.di + 128 :], (0, 0, 0, pad))
        y, _ = self.ssd(xs, F.pad(dt, (0, 0, 0, pad)), Bm, Cm, torch.zeros(B, self.H, 64, 128))
        y = y[:, :L] + xbc[..., : self.di].reshape(B, L, self.H, 64) * self.w["D"][:, None]
        return self._out(x, y.reshape(B, L, self.di), z)

    def state(self, B):
        return torch.zeros(B, self.cd, 4), torch.zeros(B, self.H, 64, 128)

    def step(self, x, state):
        window, h = state
        z, xbc, dt_raw = self._in(x[:, 0])
        window.copy_(torch.roll(window, shifts=-1, dims=-1))
        window[:, :, -1] = xbc
        xbc = F.silu((window * self.w["conv1d.weight"][:, 0]).sum(-1) + self.w["conv1d.bias"])
        dt = F.softplus(dt_raw + self.w["dt_bias"])  # (B, H)
        xs = xbc[:, : self.di].reshape(-1, self.H, 64)
        Bm, Cm = xbc[:, self.di : self.di + 128], xbc[:, self.di + 128 :]
        h.mul_(torch.exp(dt * self.A)[..., None, None]).add_((xs * dt[..., None])[..., None] * Bm[:, None, None, :])
        y = (h @ Cm[:, None, :, None])[..., 0] + xs * self.w["D"][:, None]
        return self._out(x, y.reshape(-1, 1, self.di), z[:, None])

    def step_rerun_open_chunk(self, window_state, x_hist):
        """The profile's decode: re-run the open chunk (the last `len(x_hist) mod 256` rows) through the
        chunked SSD each token. x_hist holds the open chunk's post-conv rows, dt rows; one step's cost."""
        xs, dt, Bm, Cm, h0 = x_hist
        q = xs.shape[1]
        pad = self.Q - q
        y, _ = self.ssd(F.pad(xs, (0, 0, 0, 0, 0, pad)), F.pad(dt, (0, 0, 0, pad)), F.pad(Bm, (0, 0, 0, pad)),
                        F.pad(Cm, (0, 0, 0, pad)), h0)
        return y[:, q - 1]


# ------------------------------------------------------------------------------------------- timing


def best_of(fn, repeats, inner=1):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def steps_from_copies(block, state, x, count):
    """Mean time of `count` steps, each from a fresh copy of `state` made (untimed) just before it, so every
    step starts at the same position with its state as warm as a decode loop's (PyTorch's steps below reuse
    one warm state too)."""
    total = 0.0
    for _ in range(count):
        fresh = state.copy()
        t0 = time.perf_counter()
        block.step(x, fresh)
        total += time.perf_counter() - t0
    return total / count


# PyTorch's OpenMP workers keep spinning for a while after its last parallel region (samebits' pool briefly
# too); a side timed straight after the other's round would share its cores with those spinners.
SETTLE_SECONDS = 0.05


def paired_best_of(ours, theirs, repeats, inner=1):
    """Best of `repeats` for each side, the two sides alternating round by round, so that a burst of load
    from elsewhere on a shared machine falls on both of them rather than on whichever ran at the time. Each
    round starts after a pause that lets the other side's threads go idle."""
    best_ours = best_theirs = float("inf")
    for _ in range(repeats):
        time.sleep(SETTLE_SECONDS)
        best_ours = min(best_ours, best_of(ours, 1, inner))
        time.sleep(SETTLE_SECONDS)
        best_theirs = min(best_theirs, best_of(theirs, 1, inner))
    return best_ours, best_theirs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.set_num_threads(args.threads)
    samebits.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    reps = 2 if args.quick else 4
    L = 1024
    x = rng.standard_normal((1, L, D_MODEL)).astype(np.float32)
    xt = torch.from_numpy(x)
    rows = []
    print(f"d_model {D_MODEL}, threads {args.threads}, prefill L = {L}, B = 1")

    for name, make_w, Ours, Theirs in (("mamba1", mamba1_weights, samebits.Mamba1BlockInference, TorchMamba1),
                                       ("mamba2", mamba2_weights, samebits.Mamba2BlockInference, TorchMamba2)):
        w = make_w(D_MODEL, rng)
        ours, theirs = Ours(w), Theirs(w)
        y_ours, y_torch = ours.forward(x), theirs.forward(xt).numpy()
        err = float(np.abs(y_ours - y_torch).max())
        t_ours, t_torch = paired_best_of(lambda: ours.forward(x), lambda: theirs.forward(xt), reps)
        rows.append((name, "prefill tokens/s", L / t_ours, L / t_torch, t_torch / t_ours, err))
        # Decode: a prefilled state of 100 tokens, then steps.
        st = ours.allocate_state(1)
        ours.forward(x[:, :100], st)
        ts = theirs.state(1)
        for t in range(100):
            theirs.step(xt[:, t : t + 1], ts)
        step_in = x[:, 100:101]
        step_t = xt[:, 100:101]
        n = 50 if args.quick else 200
        s_ours, s_torch = paired_best_of(lambda: ours.step(step_in, st), lambda: theirs.step(step_t, ts), 2 * reps, n)
        rows.append((name, "decode step (us)", s_ours * 1e6, s_torch * 1e6, s_torch / s_ours, None))

    print(f"{'block':8s} {'measure':20s} {'samebits':>12s} {'pytorch':>12s} {'speedup':>8s}  max|diff|")
    for name, what, a, b, ratio, err in rows:
        e = "" if err is None else f"  {err:.2e}"
        print(f"{name:8s} {what:20s} {a:12.1f} {b:12.1f} {ratio:7.2f}x{e}")

    # Mamba-2 decode step vs position: samebits (flat cost) vs PyTorch re-running the open chunk.
    w = mamba2_weights(D_MODEL, np.random.default_rng(1))
    ours, theirs = samebits.Mamba2BlockInference(w), TorchMamba2(w)
    positions = (1, 255, 256, 1000) if args.quick else (1, 255, 256, 1000, 4000)
    long_x = np.random.default_rng(2).standard_normal((1, max(positions) + 1, D_MODEL)).astype(np.float32)
    print("\nmamba2 decode step vs position (us): samebits from a state at that position; PyTorch recurrent step;")
    print("PyTorch re-running the open chunk (the profile's decode, chunked SSD over the buffered rows)")
    H = D_MODEL * 2 // 64
    for p in positions:
        st = ours.allocate_state(1)
        if p:
            ours.forward(long_x[:, :p], st)
        n = 20 if args.quick else 60
        time.sleep(SETTLE_SECONDS)
        s_ours = min(steps_from_copies(ours, st, long_x[:, p : p + 1], n) for _ in range(reps))
        q = p % 256 + 1
        hist = (torch.randn(1, q, H, 64), torch.rand(1, q, H) * 0.1, torch.randn(1, q, 128), torch.randn(1, q, 128),
                torch.zeros(1, H, 64, 128))
        ts = theirs.state(1)
        s_rec = best_of(lambda: theirs.step(torch.from_numpy(long_x[:, p : p + 1]), ts), reps, n)
        s_rerun = best_of(lambda: theirs.step_rerun_open_chunk(None, hist), reps, max(3, n // 10))
        print(f"  position {p:5d} (open rows {p % 256:3d}): samebits {s_ours * 1e6:8.1f}   "
              f"torch recurrent {s_rec * 1e6:8.1f}   torch re-run chunk SSD only {s_rerun * 1e6:9.1f}")


if __name__ == "__main__":
    main()
