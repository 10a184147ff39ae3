"""Mamba-2 against an independent float64 reference (tools/make_mamba_fixtures.py: the per-token
recurrence h_t = exp(dt A) h + B (x dt) written in PyTorch from the math, with no chunking at all),
over 300 tokens so that the profile's 256-row chunk schedule is crossed, plus a dt_limit (0.01, 0.1)
case started from a non-zero initial h.

Tolerance, absolute, 2e-5 on outputs of magnitude <= 4 (same budget as the Mamba-1 fixture): the final
residual add may round by 0.5 ulp(4) = 2.4e-7; the mixer path chains at most a few hundred float32
roundings per element (norms over 32 and 64, in_proj k = 32, conv, the chunk's k = 128 and k = 256
contractions and segment sums over <= 256 rows, out_proj k = 64), <= ~2e-5 relative of |out| <= ~1.
Measured worst error ~6e-7. A wrong chunk boundary, a missing decay, a dropped clamp or a gate/norm
order swap each move outputs by far more."""

import os

import numpy as np

import samebits

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mamba2", "recurrence_f64.npz")
ATOL = 2e-5


def _load():
    data = np.load(FIXTURE)
    return data, {k[2:]: data[k] for k in data.files if k.startswith("w:")}


def test_forward_across_a_chunk_matches_the_float64_recurrence():
    data, weights = _load()
    block = samebits.Mamba2BlockInference(weights)
    x, want = data["x"], data["y64"]
    y = block.forward(x)
    assert np.abs(y.astype(np.float64) - want).max() <= ATOL
    state = block.allocate_state(1)
    parts = [block.forward(x[:, :255], state)] + [block.step(x[:, t : t + 1], state) for t in range(255, 300)]
    assert np.concatenate(parts, axis=1).tobytes() == y.tobytes()


def test_clamped_dt_from_initial_states_matches_the_float64_recurrence():
    data, weights = _load()
    block = samebits.Mamba2BlockInference(weights, dt_limit=(0.01, 0.1))
    state = block.allocate_state(1)
    state.h = data["h0"]
    y = block.forward(data["x"][:, :80], state)
    assert np.abs(y.astype(np.float64) - data["y64_clamped_h0"]).max() <= ATOL
