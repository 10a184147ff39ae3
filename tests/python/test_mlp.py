"""MLPInference over numpy (docs/api.md §1, upstream checks 14.1 items 3-5): shapes, row independence,
thread-count independence, packed weights, copies, and every refusal with its type and wording."""

import array

import numpy as np
import pytest

import samebits
from samebits import lowbit


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "weight1": (rng.standard_normal((16, 8)) * 0.5).astype(np.float32),
        "bias1": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "weight2": (rng.standard_normal((3, 16)) * 0.5).astype(np.float32),
        "bias2": (rng.standard_normal(3) * 0.1).astype(np.float32),
    }


def _model(weights):
    return samebits.MLPInference(weights["weight1"], weights["bias1"], weights["weight2"], weights["bias2"])


def _x(rows, seed=1):
    return np.random.default_rng(seed).standard_normal((rows, 8)).astype(np.float32)


def test_logits_shape_dtype_and_row_independence():
    model = _model(_weights())
    x = _x(64)
    out = np.asarray(model.predict_logits(x))
    assert out.shape == (64, 3) and out.dtype == np.float32 and out.flags.c_contiguous
    for row in (0, 1, 7, 63):
        assert model.predict_logits(x[row : row + 1]).tobytes() == out[row : row + 1].tobytes()
    assert model.predict_logits(x[1:8]).tobytes() == out[1:8].tobytes()
    assert sorted(model.weights_) == ["bias1", "bias2", "weight1", "weight2"]


def test_every_batch_size_and_split_agree():
    model = _model(_weights(3))
    x = _x(256, seed=4)
    whole = model.predict_logits(x).tobytes()
    parts = [model.predict_logits(x[a:b]) for a, b in ((0, 1), (1, 8), (8, 100), (100, 256))]
    assert np.concatenate(parts).tobytes() == whole


def test_bits_do_not_depend_on_threads_or_simd_target(targets_and_threads):
    model = _model(_weights(5))
    x = _x(200, seed=6)
    targets_and_threads.scalar_one_thread()
    want = model.predict_logits(x).tobytes()
    for case in targets_and_threads:
        assert model.predict_logits(x).tobytes() == want, case


def test_output_is_fresh_and_calls_repeat():
    model = _model(_weights())
    x = _x(5)
    first = model.predict_logits(x)
    second = model.predict_logits(x)
    assert first.tobytes() == second.tobytes()
    first[...] = 0
    assert model.predict_logits(x).tobytes() == second.tobytes()


def test_weights_are_copied_both_ways():
    weights = _weights()
    model = _model(weights)
    x = _x(3)
    before = model.predict_logits(x).tobytes()
    weights["weight1"][0, 0] += 1
    weights["bias2"][:] = 9
    assert model.predict_logits(x).tobytes() == before
    copy = model.weights_
    copy["weight1"][...] = 0
    assert model.predict_logits(x).tobytes() == before
    assert model.weights_["weight1"].tobytes() == _weights()["weight1"].tobytes()


def test_buffer_protocol_inputs_and_non_contiguous_views():
    weights = _weights()
    model = _model(weights)
    x = _x(4)
    want = model.predict_logits(x).tobytes()
    assert model.predict_logits(memoryview(x)).tobytes() == want
    wide = np.zeros((4, 16), np.float32)
    wide[:, ::2] = x
    assert model.predict_logits(wide[:, ::2]).tobytes() == want
    as_arrays = samebits.MLPInference(
        memoryview(weights["weight1"]), array.array("f", weights["bias1"]), weights["weight2"], weights["bias2"]
    )
    assert as_arrays.predict_logits(x).tobytes() == want


def test_repr_and_weight_format():
    model = _model(_weights())
    assert repr(model) == "MLPInference(architecture=[8, 16, 3])"
    assert model.weight_format == "float32"


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
def test_packed_weights_equal_their_materialized_float32(fmt):
    weights = _weights(7)
    packed = lowbit.pack(weights, fmt)
    model = samebits.MLPInference(packed["weight1"], packed["bias1"], packed["weight2"], packed["bias2"])
    assert model.weight_format == fmt
    materialized, got_fmt = lowbit.unpack(packed)
    assert got_fmt == fmt
    reference = _model(materialized)
    x = _x(256, seed=8)
    assert model.predict_logits(x).tobytes() == reference.predict_logits(x).tobytes()
    assert model.predict_logits(x).tobytes() != _model(weights).predict_logits(x).tobytes()


def test_mixed_packed_formats_are_refused():
    weights = _weights()
    w1 = lowbit.pack_one(weights["weight1"], "int8", "weight1")
    w2 = lowbit.pack_one(weights["weight2"], "bfloat16", "weight2")
    with pytest.raises(ValueError, match="weights mix formats"):
        samebits.MLPInference(w1, weights["bias1"], w2, weights["bias2"])


def test_weight_refusals():
    w = _weights()
    with pytest.raises(ValueError, match=r"SmallMLPTrainer weight1 must have shape \(16, 8\)"):
        samebits.MLPInference(np.ascontiguousarray(w["weight1"].T), w["bias1"], w["weight2"], w["bias2"])
    bad = w["bias1"].copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="SmallMLPTrainer bias1 must be finite"):
        samebits.MLPInference(w["weight1"], bad, w["weight2"], w["bias2"])
    inf = w["weight2"].copy()
    inf[2, 2] = -np.inf
    with pytest.raises(ValueError, match="SmallMLPTrainer weight2 must be finite"):
        samebits.MLPInference(w["weight1"], w["bias1"], inf, w["bias2"])
    with pytest.raises(TypeError, match="SmallMLPTrainer weight1 must be a float32 array"):
        samebits.MLPInference(w["weight1"].astype(np.float64), w["bias1"], w["weight2"], w["bias2"])
    with pytest.raises(TypeError, match="SmallMLPTrainer bias2 must be a float32 array"):
        samebits.MLPInference(w["weight1"], w["bias1"], w["weight2"], [0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="SmallMLPTrainer bias1 must be a float32 array"):
        samebits.MLPInference(w["weight1"], w["bias1"].astype(np.float16), w["weight2"], w["bias2"])


def test_batch_refusals():
    model = _model(_weights())
    with pytest.raises(ValueError, match=r"shape \(batch, 8\)"):
        model.predict_logits(np.zeros((4, 7), np.float32))
    with pytest.raises(ValueError, match=r"shape \(batch, 8\)"):
        model.predict_logits(np.zeros(8, np.float32))
    with pytest.raises(ValueError, match=r"\[1, 256\]"):
        model.predict_logits(np.zeros((257, 8), np.float32))
    with pytest.raises(ValueError, match=r"\[1, 256\]"):
        model.predict_logits(np.zeros((0, 8), np.float32))
    with pytest.raises(TypeError, match=r"got list"):
        model.predict_logits([[0.0] * 8])
    with pytest.raises(TypeError, match="SmallMLPTrainer X must be a float32 array"):
        model.predict_logits(np.zeros((2, 8), np.float64))
    x = np.zeros((2, 8), np.float32)
    x[1, 5] = np.nan
    with pytest.raises(ValueError, match="SmallMLPTrainer X must be finite"):
        model.predict_logits(x)
    # Shape is judged before dtype, as upstream does.
    with pytest.raises(ValueError, match=r"shape \(batch, 8\)"):
        model.predict_logits(np.zeros((2, 7), np.float64))


def test_overflow_is_an_invalid_result():
    big = {
        "weight1": np.full((16, 8), 3e38, np.float32),
        "bias1": np.zeros(16, np.float32),
        "weight2": np.full((3, 16), 3e38, np.float32),
        "bias2": np.zeros(3, np.float32),
    }
    with pytest.raises(RuntimeError, match="MLPInference returned an invalid result"):
        _model(big).predict_logits(np.full((1, 8), 1e30, np.float32))


def test_set_num_threads_validates():
    with pytest.raises(ValueError, match="positive"):
        samebits.set_num_threads(0)
    with pytest.raises(TypeError):
        samebits.set_num_threads(1.5)
    with pytest.raises(TypeError):
        samebits.set_num_threads(True)
