"""Trains the 8-16-3 MLP on a small synthetic task with numpy and writes assets/mlp-demo.ckpt.

The task: 8 features drawn around three class centres; the label is the nearest centre. Training is
plain full-batch AdamW in float32 with the SmallMLPTrainer defaults (lr 1e-3 is slow, so this script
uses lr 0.02 and records it in the file's config). The file is written by the project's test-only
checkpoint writer (tests/python/mlp_checkpoint_writer.py), so it follows docs/formats.md §4 exactly.

Regenerate with:  python3 tools/make_demo_mlp.py [--out assets/mlp-demo.ckpt]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import mlp_checkpoint_writer as writer  # noqa: E402

STEPS = 300
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 0.02, 0.9, 0.999, 1e-8, 0.01


def make_data(rng, rows):
    centres = rng.standard_normal((3, 8)).astype(np.float32) * 1.5
    labels = rng.integers(0, 3, rows)
    x = (centres[labels] + rng.standard_normal((rows, 8)).astype(np.float32)).astype(np.float32)
    labels = np.argmin(((x[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
    return x, labels


def forward(params, x):
    w1, b1, w2, b2 = params
    pre = x @ w1.T + b1
    h = np.maximum(pre, 0)
    return pre, h, h @ w2.T + b2


def train(seed=2026):
    rng = np.random.default_rng(seed)
    x, y = make_data(rng, 512)
    params = [
        (rng.standard_normal((16, 8)) / np.sqrt(8)).astype(np.float32),
        np.zeros(16, np.float32),
        (rng.standard_normal((3, 16)) / np.sqrt(16)).astype(np.float32),
        np.zeros(3, np.float32),
    ]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    onehot = np.eye(3, dtype=np.float32)[y]
    for step in range(1, STEPS + 1):
        pre, h, logits = forward(params, x)
        z = logits - logits.max(1, keepdims=True)
        prob = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        g_logits = (prob - onehot) / len(x)
        g_h = g_logits @ params[2]
        g_pre = g_h * (pre > 0)
        grads = [g_pre.T @ x, g_pre.sum(0), g_logits.T @ h, g_logits.sum(0)]
        for i, (p, g) in enumerate(zip(params, grads)):
            p *= np.float32(1 - LR * WEIGHT_DECAY)
            m[i] = BETA1 * m[i] + (1 - BETA1) * g
            v[i] = BETA2 * v[i] + (1 - BETA2) * g * g
            m_hat = m[i] / (1 - BETA1**step)
            v_hat = v[i] / (1 - BETA2**step)
            params[i] = (p - LR * m_hat / (np.sqrt(v_hat) + EPS)).astype(np.float32)
    accuracy = float((forward(params, x)[2].argmax(1) == y).mean())
    flat_m = np.concatenate([a.reshape(-1) for a in m]).astype(np.float32)
    flat_v = np.concatenate([a.reshape(-1) for a in v]).astype(np.float32)
    return params, flat_m, flat_v, accuracy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "assets" / "mlp-demo.ckpt"))
    args = parser.parse_args()
    params, m, v, accuracy = train()
    weights = dict(zip(writer.NAMES, params))
    config = {k: writer.round_f32(val) for k, val in
              (("lr", LR), ("beta1", BETA1), ("beta2", BETA2), ("eps", EPS), ("weight_decay", WEIGHT_DECAY))}
    schedule = {"dataset": "samebits-demo-blobs", "rows": 512, "seed": 2026, "batch": "full"}
    writer.write_valid(args.out, weights, step=STEPS, config=config, data_schedule=schedule, m=m, v=v,
                       flags=np.ones(4, np.int32))
    print(f"wrote {args.out}: {STEPS} AdamW steps, training accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
