"""Mamba-1 against an independent float64 reference (tools/make_mamba_fixtures.py: the plain per-token
recurrence written in PyTorch from the math, not the profile's rounding schedule).

Tolerance, absolute, 2e-5 on outputs of magnitude <= 4: the output is x + out_proj(...), whose final add
alone may round by 0.5 ulp(4) = 2.4e-7; the mixer path (|out| <= ~1) chains at most ~200 float32
roundings per element (RMSNorm sum over 32, in_proj k = 32, 4-tap conv, x_proj k = 64, 40 scan steps of
a few roundings, out_proj k = 64), each <= 2^-24 relative, so <= ~1.2e-5 of it. 2e-5 covers that bound;
the measured worst error is ~1.2e-7 (a few ulps), and any arithmetic mistake (a missing gate, D, flush of
a normal value, wrong tap order) moves outputs by far more than 2e-5."""

import os

import numpy as np

import samebits

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mamba1", "recurrence_f64.npz")
ATOL = 2e-5


def test_forward_and_decode_match_the_float64_recurrence():
    data = np.load(FIXTURE)
    weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
    block = samebits.Mamba1BlockInference(weights)
    x, want = data["x"], data["y64"]
    y = block.forward(x)
    assert np.abs(y.astype(np.float64) - want).max() <= ATOL
    state = block.allocate_state(x.shape[0])
    stepped = np.concatenate([block.step(x[:, t : t + 1], state) for t in range(x.shape[1])], axis=1)
    assert stepped.tobytes() == y.tobytes()
