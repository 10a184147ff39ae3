"""Independent check of Mamba3BlockInference against float64 fixtures computed from the per-token
trapezoidal recurrence by tools/make_mamba3_fixtures.py (PyTorch, float64; no torch needed here).

Tolerance: samebits runs the chunked float32 profile, the fixture the exact recurrence in float64, so
they differ by float32 rounding only. Each output cell is a handful of float32 chains (in_proj over
d_model = 32 terms, q.k over 128, the 64-row chunk products, out_proj over 64) of O(1) terms, and the
decays exp(dl - dacs) take differences of running sums of at most ~64 |A dt| (about 50 here), whose
float32 ulp is ~4e-6; relative errors of a few 1e-6 are therefore expected, and were measured at
1.6e-6 (y), 3.4e-6 (h_last) and 3.3e-6 (theta) when the fixture was made. The bounds below leave about
10x margin and are still ~100x tighter than any real arithmetic mistake would produce (a wrong rounding
seam, chunk boundary or trapezoid weight moves outputs by >= 1e-3)."""

import os

import numpy as np

import samebits

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mamba3", "recurrence_d32.npz")


def load():
    data = np.load(FIXTURE)
    weights = {name[2:]: data[name] for name in data.files if name.startswith("w:")}
    return weights, data


def test_forward_matches_the_float64_recurrence():
    weights, data = load()
    block = samebits.Mamba3BlockInference(weights)
    y = block.forward(data["x"])
    ref = data["y"].astype(np.float64)
    assert np.max(np.abs(y - ref) / (1 + np.abs(ref))) < 2e-5
    h_ref = data["h_last"].astype(np.float64)
    assert np.max(np.abs(block.h_last_ - h_ref) / (1 + np.abs(h_ref))) < 5e-5
    gap = np.abs(block.theta_last_ - data["theta_last"].astype(np.float64))
    assert np.max(np.minimum(gap, 2 * np.pi - gap)) < 5e-5


def test_decoding_matches_the_float64_recurrence_at_every_position():
    weights, data = load()
    block = samebits.Mamba3BlockInference(weights)
    x, ref = data["x"], data["y"].astype(np.float64)
    state = block.allocate_state(x.shape[0])
    for t in range(x.shape[1]):
        out = block.step(x[:, t : t + 1], state)
        assert np.max(np.abs(out[:, 0] - ref[:, t]) / (1 + np.abs(ref[:, t]))) < 2e-5, t


def test_the_tolerance_can_fail():
    # A one-token shift of the sequence (a wrong chunk or trapezoid alignment) is far outside the bound.
    weights, data = load()
    block = samebits.Mamba3BlockInference(weights)
    y = block.forward(np.ascontiguousarray(data["x"][:, 1:]))
    ref = data["y"][:, 1:].astype(np.float64)
    assert np.max(np.abs(y - ref) / (1 + np.abs(ref))) > 1e-3
