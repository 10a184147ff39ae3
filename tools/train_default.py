"""Trains samebits' default model: a small byte-level Samba stack (Mamba-3 and attention layers) on the King
James Bible, in PyTorch, and ships it as a streamed v2 archive (docs/formats.md §3) that samebits loads.

samebits does no training. This tool implements the MATHEMATICS of the stack (docs/blocks.md §3.4 and §4, docs/api.md §7)
in ordinary float32 PyTorch, not mojolearn's exact chunked arithmetic; samebits then runs the trained weights
with its own exact arithmetic, and the two agree within float32 rounding (checked by --check before training
and by tests/python/test_default_model.py afterwards).

  * Mamba-3 (SISO, trapezoidal): per head, with alpha_t = exp(A_t dt_t), gamma_t = sigmoid(trap_t) dt_t and
    the trapezoid's shifted weight beta'_t = (1 - sigmoid(trap_t)) dt_t,
        y_t = sum_{s<t} (q_t . k_s) exp(sum_{r=s+1..t} A_r dt_r) (gamma_s + beta'_{s+1}) v_s
              + gamma_t (q_t . k_t) v_t + D v_t,
    q, k the normed, biased and rotated C / B. This is the recurrence H_t = alpha_t H_{t-1} + beta_t v_{t-1}
    k_{t-1}^T + gamma_t v_t k_t^T, y_t = H_t q_t + D v_t written as one masked (L x L) product per head, the
    parallel form that trains well on a CPU for the short windows used here.
  * Attention: the Llama decoder layer with RMSNorm eps 1e-6, RoPE theta 10000 rotate-half at positions
    0..L-1, causal softmax scaled by 1/sqrt(head_dim), SwiGLU.
  * Stack: embedding, the blocks in order, final RMSNorm with the config's norm_eps, tied head.

Corpus: the KJV text of Debian's bible-kjv-text package, decoded by its bible-kjv reader
(`bible -f gen1:1-rev22:21`), verse references removed, one verse per line. The last 5% of the bytes
(cut at a line start) are held out.

    python3 tools/train_default.py --check            # tiny random stack: PyTorch vs samebits, no training
    python3 tools/train_default.py                    # train, write assets/default-model/, print bits/byte
"""

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
import samba_checkpoint_writer as writer  # noqa: E402  (the spec-built archive writer)

ASSET_DIR = ROOT / "assets" / "default-model"
CHECKPOINT_NAME = "samba-kjv.ckpt"
FIXTURE = ROOT / "tests" / "fixtures" / "default_model" / "heldout_logits.npz"

HEAD_DIM, STATE_DIM, ANGLES = 64, 128, 32  # Mamba-3 constants (docs/formats.md §1.4)
MAMBA_EPS, ATTENTION_EPS, ROPE_THETA, A_FLOOR = 1e-5, 1e-6, 10000.0, 1e-4
HELDOUT_FRACTION = 0.05

DEFAULT_CONFIG = dict(vocab=256, d_model=128, layers=["mamba3", "attention", "mamba3", "attention"], n_heads=4,
                      intermediate=384, norm_eps=1e-5)


# ------------------------------------------------------------------------------------------- corpus

def read_corpus(path=None):
    """The KJV as bytes: a given file as it is, or the Debian packages' text with verse references removed."""
    if path is not None:
        return Path(path).read_bytes()
    try:
        raw = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL, capture_output=True,
                             check=True).stdout.decode("ascii")
    except FileNotFoundError:
        sys.exit("train_default: the `bible` reader is missing; apt-get install bible-kjv bible-kjv-text")
    verses = [re.sub(r"^\S+?\d+:\d+ ", "", line) for line in raw.splitlines()]
    return ("\n".join(verses) + "\n").encode("ascii")


def split_corpus(data):
    """(train, held-out): the held-out part is the last 5% of the bytes, starting at a line start."""
    cut = data.index(b"\n", int(len(data) * (1 - HELDOUT_FRACTION))) + 1
    return data[:cut], data[cut:]


# ------------------------------------------------------------------------------------------- the stack

def registry(cfg):
    return writer.registry(cfg)


def init_weights(cfg, seed):
    """docs/formats.md §1.7's scheme: embedding N(0, 0.02); other matrices kaiming-uniform 1/sqrt(fan_in);
    dt_bias U(-4, -2); norm weights, D, B_bias and C_bias one."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in registry(cfg):
        leaf = name.rsplit(".", 1)[-1]
        if name in ("embed.weight", "lm_head.weight"):
            value = torch.randn(shape, generator=gen) * 0.02
        elif len(shape) == 2 and leaf == "weight":
            bound = 1 / math.sqrt(shape[1])
            value = (torch.rand(shape, generator=gen) * 2 - 1) * bound
        elif name.endswith("dt_bias"):
            value = torch.rand(shape, generator=gen) * 2 - 4
        else:
            value = torch.ones(shape)
        weights[name] = value.float()
    return weights


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate_pairs(v, theta):
    """Interleaved pairs (2j, 2j+1), j < 32, rotated by theta[..., j]; the other 64 values unchanged."""
    c, s = torch.cos(theta), torch.sin(theta)
    pairs = v[..., : 2 * ANGLES].unflatten(-1, (ANGLES, 2))
    v0, v1 = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack((v0 * c - v1 * s, v0 * s + v1 * c), dim=-1).flatten(-2)
    return torch.cat((rotated, v[..., 2 * ANGLES :]), dim=-1)


def chunked_mix(q, k, v, adt, scale, gamma, chunk=64):
    """sum_{s<t} (q_t . k_s) exp(sum_{r=s+1..t} adt_r) scale_s v_s + gamma_t (q_t . k_t) v_t per head, in chunks:
    an exact (chunk x chunk) product inside each chunk plus a (P x N) state carried between chunks.
    q, k (B, H, L, N); v (B, H, L, P); adt, scale, gamma (B, H, L). Padding rows at the end are zero, so
    they add nothing to the state and never reach a real row (causality)."""
    length = q.shape[2]
    pad = (-length) % chunk
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        adt, scale, gamma = (F.pad(t, (0, pad)) for t in (adt, scale, gamma))
    split = lambda t: t.unflatten(2, (-1, chunk))  # noqa: E731  (B, H, C, Q, ...)
    q, k, v, adt, scale, gamma = map(split, (q, k, v, adt, scale, gamma))
    log_decay = torch.cumsum(adt, dim=-1)  # inclusive, restarted in each chunk
    below = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool, device=q.device), -1)
    segment = (log_decay[..., :, None] - log_decay[..., None, :]).masked_fill(~below, -math.inf)
    mix = torch.exp(segment) * scale[..., None, :] + torch.diag_embed(gamma)
    y = ((q @ k.transpose(-1, -2)) * mix) @ v
    # Each chunk's own contribution to the state at its end, then the carried state entering each chunk.
    to_end = torch.exp(log_decay[..., -1:] - log_decay) * scale
    added = (v * to_end[..., None]).transpose(-1, -2) @ k  # (B, H, C, P, N)
    through = torch.exp(log_decay[..., -1])  # (B, H, C)
    state = torch.zeros_like(added[:, :, 0])
    entering = []
    for c in range(q.shape[2]):
        entering.append(state)
        state = through[:, :, c, None, None] * state + added[:, :, c]
    entering = torch.stack(entering, dim=2)
    y = y + (q @ entering.transpose(-1, -2)) * torch.exp(log_decay)[..., None]
    return y.flatten(2, 3)[:, :, :length]


def mamba3(w, x):
    """One Mamba-3 block (docs/blocks.md §3.4) from a zero state: x (B, L, dm) -> x + out."""
    bsz, length, dm = x.shape
    di = 2 * dm
    nh = di // HEAD_DIM
    proj = rmsnorm(x, w["block_norm.weight"], MAMBA_EPS) @ w["in_proj.weight"].T
    z, v = proj[..., :di], proj[..., di : 2 * di]
    b_raw, c_raw = proj[..., 2 * di : 2 * di + STATE_DIM], proj[..., 2 * di + STATE_DIM : 2 * di + 2 * STATE_DIM]
    rest = proj[..., 2 * di + 2 * STATE_DIM :]
    dd_dt, dd_a, trap, angle = rest[..., :nh], rest[..., nh : 2 * nh], rest[..., 2 * nh : 3 * nh], rest[..., 3 * nh :]
    # "heavy" A with both branches kept finite so the unused one never sends a NaN gradient through where().
    heavy = torch.where(dd_a >= 0, 1 + dd_a.clamp(min=0), 1 / (1 - dd_a.clamp(max=0)))
    a = torch.clamp(-heavy, max=-A_FLOOR)
    dt = F.softplus(dd_dt + w["dt_bias"])  # (B, L, H)
    sig = torch.sigmoid(trap)
    gamma = dt * sig
    shifted = dt * (1 - sig)  # beta'_t; token s is folded with gamma_s + beta'_{s+1}
    scale = gamma + F.pad(shifted[:, 1:], (0, 0, 0, 1))
    bn, cn = rmsnorm(b_raw, w["B_norm.weight"], MAMBA_EPS), rmsnorm(c_raw, w["C_norm.weight"], MAMBA_EPS)
    theta = torch.cumsum((torch.tanh(angle) * math.pi)[:, :, None, :] * dt[..., None], dim=1)  # (B, L, H, 32)
    k = rotate_pairs(bn[:, :, None, :] + w["B_bias"], theta).transpose(1, 2)  # (B, H, L, N)
    q = rotate_pairs(cn[:, :, None, :] + w["C_bias"], theta).transpose(1, 2)
    vh = v.unflatten(-1, (nh, HEAD_DIM)).transpose(1, 2)  # (B, H, L, P)
    y = chunked_mix(q, k, vh, (a * dt).transpose(1, 2), scale.transpose(1, 2), gamma.transpose(1, 2))
    y = y + w["D"][:, None, None] * vh
    y = y.transpose(1, 2).reshape(bsz, length, di)
    return x + (y * F.silu(z)) @ w["out_proj.weight"].T


def rope_tables(length, head_dim, dtype, device):
    half = head_dim // 2
    inv = 1.0 / ROPE_THETA ** (torch.arange(half, dtype=torch.float64) * 2 / head_dim)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)
    return torch.cat((cos, cos), -1).to(device), torch.cat((sin, sin), -1).to(device)


def rotate_half(t):
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


def attention(w, x, cfg):
    """The Llama decoder layer (docs/blocks.md §4, default options, full causal) from position 0."""
    bsz, length, dm = x.shape
    nh, nkv, hd = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    n1 = rmsnorm(x, w["input_layernorm.weight"], ATTENTION_EPS)
    q = (n1 @ w["q_proj.weight"].T).unflatten(-1, (nh, hd)).transpose(1, 2)
    k = (n1 @ w["k_proj.weight"].T).unflatten(-1, (nkv, hd)).transpose(1, 2)
    v = (n1 @ w["v_proj.weight"].T).unflatten(-1, (nkv, hd)).transpose(1, 2)
    cos, sin = rope_tables(length, hd, x.dtype, x.device)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    if nkv != nh:
        k, v = k.repeat_interleave(nh // nkv, dim=1), v.repeat_interleave(nh // nkv, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    r1 = x + ctx.transpose(1, 2).reshape(bsz, length, nh * hd) @ w["o_proj.weight"].T
    n2 = rmsnorm(r1, w["post_attention_layernorm.weight"], ATTENTION_EPS)
    mlp = F.silu(n2 @ w["gate_proj.weight"].T) * (n2 @ w["up_proj.weight"].T)
    return r1 + mlp @ w["down_proj.weight"].T


def logits(cfg, weights, ids):
    """(B, L) byte ids -> (B, L, vocab) logits, every block from a zero state (docs/api.md §7)."""
    x = weights["embed.weight"][ids]
    for i, kind in enumerate(cfg["layers"]):
        prefix = f"layers.{i}."
        w = {name[len(prefix):]: t for name, t in weights.items() if name.startswith(prefix)}
        x = mamba3(w, x) if kind == "mamba3" else attention(w, x, cfg)
    x = rmsnorm(x, weights["norm_f.weight"], cfg["norm_eps"])
    head = weights["embed.weight"] if cfg["tie_embeddings"] else weights["lm_head.weight"]
    return x @ head.T


# ------------------------------------------------------------------------------------------- evaluation

def windows(data, context):
    """Non-overlapping stateless windows: inputs data[s : s+W], targets data[s+1 : s+W+1] for s = 0, W, 2W, ...
    Every byte but the first is predicted exactly once; each window starts from a fresh state."""
    out = []
    for start in range(0, len(data) - 1, context):
        end = min(start + context, len(data) - 1)
        out.append((np.frombuffer(data[start:end], np.uint8), np.frombuffer(data[start + 1 : end + 1], np.uint8)))
    return out


@torch.no_grad()
def heldout_bits_per_byte(cfg, weights, data, context, batch=32, dtype=torch.float32):
    """Mean cross-entropy over `windows(data, context)` in bits per byte."""
    w = {k: v.to(dtype) for k, v in weights.items()}
    total, count = 0.0, 0
    pieces = windows(data, context)
    for lo in range(0, len(pieces), batch):
        group = pieces[lo : lo + batch]
        by_length = {}
        for inputs, targets in group:
            by_length.setdefault(len(inputs), []).append((inputs, targets))
        for same in by_length.values():
            ids = torch.from_numpy(np.stack([i for i, _ in same]).astype(np.int64))
            tgt = torch.from_numpy(np.stack([t for _, t in same]).astype(np.int64))
            out = logits(cfg, w, ids).double()
            total += F.cross_entropy(out.reshape(-1, out.shape[-1]), tgt.reshape(-1), reduction="sum").item()
            count += tgt.numel()
    return total / count / math.log(2), count


# ------------------------------------------------------------------------------------------- archive

def write_archive(path, cfg, weights, optimizer_state, meta):
    """The streamed v2 archive through the spec-built writer, published atomically (docs/formats.md §3.1)."""
    names = [name for name, _ in registry(cfg)]
    flat = lambda ts: np.concatenate([ts[n].detach().float().reshape(-1).numpy() for n in names])  # noqa: E731
    numpy_weights = {n: weights[n].detach().float().numpy().copy() for n in names}
    moments = (flat(optimizer_state["exp_avg"]), flat(optimizer_state["exp_avg_sq"]))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", dir=path.parent)
    os.close(fd)
    try:
        writer.write_stream(tmp, cfg, numpy_weights, moments=moments, flags=np.ones(len(names), np.int32), **meta)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the asset is an ordinary readable file
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_archive(path):
    """(config dict, weights) from a streamed v2 archive (docs/formats.md §3.2), header digest and parameter digest
    checked; independent of samebits' reader."""
    data = Path(path).read_bytes()
    if data[:17] != writer.MAGIC:
        raise ValueError(f"{path}: not a streamed v2 Samba archive")
    length = int.from_bytes(data[17:25], "little")
    header = data[25 : 25 + length]
    if hashlib.sha256(header).digest() != data[25 + length : 57 + length]:
        raise ValueError(f"{path}: header digest mismatch")
    envelope = json.loads(header)
    cfg, descriptor = envelope["state"]["config"], envelope["arrays"][0]
    raw = data[57 + length : 57 + length + descriptor["nbytes"]]
    if hashlib.sha256(raw).hexdigest() != descriptor["sha256"]:
        raise ValueError(f"{path}: parameter digest mismatch")
    flat = np.frombuffer(raw, "<f4")
    weights = {e["name"]: torch.from_numpy(flat[e["offset"] : e["offset"] + e["size"]].reshape(e["shape"]).copy())
               for e in envelope["state"]["registry"]}
    return cfg, weights


def evaluate_shipped(args):
    """Held-out bits per byte of the shipped checkpoint in PyTorch (float32 and float64) and a fresh fixture."""
    torch.set_num_threads(args.threads)
    cfg, weights = read_archive(args.out)
    _, heldout = split_corpus(read_corpus(args.corpus))
    for dtype in (torch.float32, torch.float64):
        bpb, predicted = heldout_bits_per_byte(cfg, weights, heldout, args.context, dtype=dtype)
        print(f"held-out: {bpb:.6f} bits/byte over {predicted} predictions (PyTorch {str(dtype)[6:]}, stateless "
              f"windows of {args.context})", flush=True)
    write_fixture(cfg, weights, heldout, args.context)


# ------------------------------------------------------------------------------------------- --check

def samebits_logits(cfg, weights, ids):
    import samebits

    config = samebits.SambaConfig.from_dict(cfg)
    model = samebits.SambaInference(config, {k: v.detach().float().numpy() for k, v in weights.items()})
    return np.asarray(model.forward(ids.astype(np.int32)))


def check_against_samebits(seed):
    """A tiny random stack (every layer kind, sequences across the 64-token Mamba-3 chunk): PyTorch float32
    and float64 vs samebits. A layout or naming mistake shows up as an O(1) difference."""
    cfg = writer.config_dict(256, 64, ["mamba3", "attention", "mamba3", "attention"], n_heads=2, intermediate=96)
    weights = init_weights(cfg, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    for name, value in weights.items():  # move every vector off its initial constant so each one matters
        if value.dim() == 1 or name.endswith("_bias"):
            weights[name] = value + 0.2 * torch.randn(value.shape, generator=gen)
    weights["embed.weight"] = weights["embed.weight"] * 50  # O(10) logits, as a trained model has
    ids = np.random.default_rng(seed).integers(0, 256, (2, 150))
    torch32 = logits(cfg, weights, torch.from_numpy(ids)).detach().numpy()
    torch64 = logits(cfg, {k: v.double() for k, v in weights.items()}, torch.from_numpy(ids)).detach().numpy()
    ours = samebits_logits(cfg, weights, ids)
    scale = np.abs(torch64).max()
    print(f"check: logits max |x| {scale:.3f}; samebits vs torch64 max diff {np.abs(ours - torch64).max():.3e}; "
          f"torch32 vs torch64 {np.abs(torch32 - torch64).max():.3e}; samebits vs torch32 "
          f"{np.abs(ours - torch32).max():.3e}")
    ok = np.abs(ours - torch64).max() < 1e-3 * max(1.0, scale)
    print("check:", "PASS" if ok else "FAIL")
    return ok


# ------------------------------------------------------------------------------------------- training

def lr_at(step, progress, peak, floor, warmup):
    """Linear warmup over `warmup` steps, then a cosine from peak to floor over the run's progress in [0, 1]."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(1.0, progress)))


def train(args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    corpus = read_corpus(args.corpus)
    train_bytes, heldout = split_corpus(corpus)
    print(f"corpus: {len(corpus)} bytes (sha256 {hashlib.sha256(corpus).hexdigest()[:16]}...), "
          f"train {len(train_bytes)}, held-out {len(heldout)}", flush=True)
    cfg = writer.config_dict(**DEFAULT_CONFIG)
    weights = {k: v.requires_grad_() for k, v in init_weights(cfg, args.seed).items()}
    names = [name for name, _ in registry(cfg)]
    n_params = sum(weights[n].numel() for n in names)
    print(f"config: {json.dumps(cfg)}; {n_params} parameters", flush=True)
    betas, eps = (0.9, 0.95), 1e-8
    optimizer = torch.optim.AdamW([weights[n] for n in names], lr=args.lr, betas=betas, eps=eps,
                                  weight_decay=args.weight_decay)
    data = torch.from_numpy(np.frombuffer(train_bytes, np.uint8).astype(np.int64))
    rng = np.random.default_rng(args.seed)

    def batch_loss(rows):
        out = logits(cfg, weights, rows[:, :-1])
        return F.cross_entropy(out.reshape(-1, cfg["vocab"]), rows[:, 1:].reshape(-1))

    # Inductor fuses the many small elementwise steps of the Mamba-3 math: about 8x faster per step on 2 cores.
    loss_fn = batch_loss if args.no_compile else torch.compile(batch_loss)
    # Progress is the larger of the step fraction and the time fraction of the budget (which counts from after
    # the first step, the one that compiles): the cosine schedule always completes and the run ends when the
    # budget is spent, however busy the machine is.
    budget = args.budget_minutes * 60
    start, smoothed, step, progress, clock = time.time(), None, 0, 0.0, None
    while progress < 1.0:
        lr = lr_at(step, progress, args.lr, args.min_lr, args.warmup)
        for group in optimizer.param_groups:
            group["lr"] = lr
        offsets = torch.from_numpy(rng.integers(0, len(data) - args.context - 1, args.batch))
        rows = data[offsets[:, None] + torch.arange(args.context + 1)]
        loss = loss_fn(rows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([weights[n] for n in names], args.max_norm)
        optimizer.step()
        smoothed = loss.item() if smoothed is None else 0.95 * smoothed + 0.05 * loss.item()
        clock = time.time() if clock is None else clock
        step += 1
        progress = max(step / args.steps, (time.time() - clock) / budget if budget > 0 else 0.0)
        if step % args.log_every == 1 or progress >= 1.0:
            print(f"step {step:5d}  loss {loss.item():.4f}  smoothed {smoothed / math.log(2):.4f} bits/byte  "
                  f"lr {lr:.2e}  progress {progress:.3f}  {time.time() - start:7.1f} s", flush=True)
    total_steps = step
    train_seconds = time.time() - start
    final = {k: v.detach() for k, v in weights.items()}
    bpb, predicted = heldout_bits_per_byte(cfg, final, heldout, args.context)
    print(f"held-out: {bpb:.4f} bits/byte over {predicted} predictions (PyTorch float32, stateless windows of "
          f"{args.context}); training took {train_seconds:.0f} s", flush=True)

    state = {"exp_avg": {}, "exp_avg_sq": {}}
    for n in names:
        st = optimizer.state[weights[n]]
        state["exp_avg"][n], state["exp_avg_sq"][n] = st["exp_avg"], st["exp_avg_sq"]
    meta = dict(
        t=total_steps,
        optimizer={"accumulation_steps": 1, "beta1": betas[0], "beta2": betas[1], "eps": eps, "kind": "adamw",
                   "lr": writer.round_f32(lr), "max_norm": args.max_norm, "weight_decay": args.weight_decay},
        schedule={"kind": "cosine", "min_lr": writer.round_f32(args.min_lr), "peak_lr": writer.round_f32(args.lr),
                  "total_steps": total_steps, "warmup_steps": args.warmup},
        rng={"counter": 0, "seed": args.seed},
    )
    out_path = Path(args.out)
    digest = write_archive(out_path, cfg, final, state, meta)
    print(f"wrote {out_path} ({out_path.stat().st_size} bytes, sha256 {digest})", flush=True)
    write_fixture(cfg, final, heldout, args.context)
    summary = {"config": cfg, "parameters": n_params, "train_seconds": round(train_seconds, 1), "steps": total_steps,
               "batch": args.batch, "context": args.context, "heldout_bytes": len(heldout),
               "heldout_predictions": predicted, "heldout_bits_per_byte_torch": round(bpb, 4),
               "corpus_bytes": len(corpus), "corpus_sha256": hashlib.sha256(corpus).hexdigest(),
               "checkpoint_sha256": digest}
    (out_path.parent / "training_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def write_fixture(cfg, weights, heldout, context, windows_kept=2, stride=16):
    """tests/fixtures/default_model/heldout_logits.npz: the first `windows_kept` held-out windows (bytes), the
    reference logits at every `stride`-th position and every position's negative log-likelihood. The
    reference is the same mathematics evaluated in float64 on the float32 weights, so it carries no float32
    rounding of its own."""
    pieces = windows(heldout, context)[:windows_kept]
    ids = np.stack([i for i, _ in pieces]).astype(np.int64)
    targets = np.stack([t for _, t in pieces]).astype(np.int64)
    with torch.no_grad():
        ref = logits(cfg, {k: v.double() for k, v in weights.items()}, torch.from_numpy(ids))
        nll = -torch.log_softmax(ref, -1).gather(-1, torch.from_numpy(targets)[..., None])[..., 0]
        single = logits(cfg, {k: v.float() for k, v in weights.items()}, torch.from_numpy(ids)).double()
    # The float32 evaluation error of this model on this slice: the scale the samebits tolerance is set from.
    print(f"fixture: logits max |x| {ref.abs().max():.3f}; PyTorch float32 vs float64 max diff "
          f"{(single - ref).abs().max():.3e}; bits/byte float64 {nll.mean() / math.log(2):.6f}", flush=True)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(FIXTURE, ids=ids.astype(np.uint8), targets=targets.astype(np.uint8),
                        positions=np.arange(0, context, stride, dtype=np.int32),
                        logits=ref[:, ::stride].numpy().astype(np.float32), nll=nll.numpy())
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({FIXTURE.stat().st_size} bytes)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare PyTorch with samebits on a tiny stack")
    parser.add_argument("--evaluate", action="store_true",
                        help="no training: held-out bits/byte of the checkpoint at --out, and the test fixture")
    parser.add_argument("--corpus", help="a text file instead of the Debian KJV")
    parser.add_argument("--out", default=str(ASSET_DIR / CHECKPOINT_NAME))
    parser.add_argument("--steps", type=int, default=3000, help="at most this many optimizer steps")
    parser.add_argument("--budget-minutes", type=float, default=28.0,
                        help="training time after the first (compiling) step; 0: no limit")
    parser.add_argument("--no-compile", action="store_true", help="eager PyTorch (slower)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--min-lr", type=float, default=1e-4)
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-norm", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1611)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--log-every", type=int, default=25)
    args = parser.parse_args()
    if args.check:
        torch.set_num_threads(args.threads)
        sys.exit(0 if check_against_samebits(args.seed) else 1)
    if args.evaluate:
        return evaluate_shipped(args)
    train(args)


if __name__ == "__main__":
    main()
