"""samebits against an independent float64 reference of the block's mathematics.

tests/fixtures/transformer/*.npz come from tools/make_transformer_fixtures.py (PyTorch in float64 on the
same float32 weights and inputs; torch is not needed here). The comparison cannot be bitwise: samebits
rounds every step to float32. Tolerance, and why: each output element is the end of chains of at most
max(d_model, intermediate, L) <= 150 float32 roundings over O(1) terms (inputs ~N(0, 1), weights scaled
by 1/sqrt(fan_in), norms near 1), so one stage's error is below n * 2^-24 ~ 9e-6 of the magnitudes
involved; six stages (norm, projections, attention, output projection, norm, MLP) with gains of order
one give a bound of a few 1e-5. We require |y - y64| <= 3e-5 * max(1, |y64|); measured errors are about
1.5e-6, while a wrong rounding-free choice (rotate pairs instead of halves, a missing scale, an
off-by-one window, a wrong kv head) moves outputs by 1e-2 or more.
"""

import pathlib

import numpy as np
import pytest

import samebits

FIXTURES = sorted((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "transformer").glob("*.npz"))
TOLERANCE = 3e-5


def load(path):
    data = np.load(path)
    n_heads, n_kv_heads, window = (int(v) for v in data["config"])
    weights = {key[2:]: data[key] for key in data.files if key.startswith("w:")}
    block = samebits.TransformerBlockInference(weights, n_heads=n_heads, n_kv_heads=n_kv_heads, window=window)
    return block, data["x"], data["y64"]


def assert_close(y, y64, label):
    err = np.abs(y.astype(np.float64) - y64) / np.maximum(1.0, np.abs(y64))
    assert err.max() <= TOLERANCE, (label, float(err.max()))


def test_fixtures_exist():
    assert len(FIXTURES) >= 4


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_forward_matches_float64_reference(path):
    block, x, y64 = load(path)
    assert_close(block.forward(x), y64, path.stem)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_carried_decode_matches_float64_reference(path):
    block, x, y64 = load(path)
    batch, length = x.shape[:2]
    state = block.allocate_state(batch, length)
    head = block.forward(np.ascontiguousarray(x[:, : length // 2]), state)
    tail = [block.step(np.ascontiguousarray(x[:, t : t + 1]), state) for t in range(length // 2, length)]
    assert_close(np.concatenate([head] + tail, axis=1), y64, path.stem)


def test_tolerance_can_fail():
    # The same fixture judged against a reference with the window switched off must fail: the check
    # resolves the model's structure, not just its scale.
    path = next(p for p in FIXTURES if "window" in p.stem)
    data = np.load(path)
    n_heads, n_kv_heads, _ = (int(v) for v in data["config"])
    weights = {key[2:]: data[key] for key in data.files if key.startswith("w:")}
    full = samebits.TransformerBlockInference(weights, n_heads=n_heads, n_kv_heads=n_kv_heads, window=0)
    with pytest.raises(AssertionError):
        assert_close(full.forward(data["x"]), data["y64"], "window switched off")
