"""MLPInference.from_checkpoint: every refusal class of docs/formats.md §4.3 raises ValueError with mojolearn's message,
and valid files give the same logits, bit for bit, as the constructor given the same weights."""
import numpy as np
import pytest

import samebits
from mlp_checkpoint_writer import (ARITHMETIC_PROFILE, NAMES, broken_variants, default_weights, valid_variants,
                                   write_valid)

BROKEN = broken_variants()
VALID = valid_variants()


def inputs(rows=256, seed=7):
    return np.random.default_rng(seed).standard_normal((rows, 8)).astype(np.float32)


def constructed(weights):
    return samebits.MLPInference(*(np.asarray(weights[name], dtype=np.float32) for name in NAMES))


@pytest.mark.parametrize("name,data,expected", BROKEN, ids=[name for name, _, _ in BROKEN])
def test_broken_checkpoint_is_refused_with_its_message(tmp_path, name, data, expected):
    path = tmp_path / (name + ".json")
    path.write_bytes(data)
    with pytest.raises(ValueError) as refused:
        samebits.MLPInference.from_checkpoint(str(path))
    assert expected in str(refused.value)


def test_refusal_table_is_complete():
    assert len(BROKEN) >= 15
    names = [name for name, _, _ in BROKEN]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name,data,weights", VALID, ids=[name for name, _, _ in VALID])
def test_valid_checkpoint_matches_constructor_bitwise(tmp_path, name, data, weights):
    path = tmp_path / (name + ".json")
    path.write_bytes(data)
    loaded = samebits.MLPInference.from_checkpoint(path)  # a Path works as well as a str
    assert isinstance(loaded, samebits.MLPInference)
    reference = constructed(weights)
    x = inputs()
    got = np.asarray(loaded.predict_logits(x))
    want = np.asarray(reference.predict_logits(x))
    assert got.dtype == np.float32 and got.shape == (256, 3)
    assert got.tobytes() == want.tobytes()
    # Single rows too: each row's logits depend on that row alone.
    for row in (0, 1, 255):
        assert np.asarray(loaded.predict_logits(x[row:row + 1])).tobytes() == want[row:row + 1].tobytes()


def test_loaded_weights_are_the_file_bits(tmp_path):
    rng = np.random.default_rng(11)
    weights = {name: rng.standard_normal(w.shape).astype(np.float32) for name, w in default_weights().items()}
    loaded = samebits.MLPInference.from_checkpoint(write_valid(tmp_path / "w.json", weights))
    got = loaded.weights_
    assert sorted(got) == sorted(NAMES)
    for name in NAMES:
        assert np.asarray(got[name]).tobytes() == weights[name].tobytes(), name


def test_arithmetic_profile_key_equal_to_engine_profile_loads(tmp_path):
    path = write_valid(tmp_path / "profile.json", arithmetic_profile=ARITHMETIC_PROFILE)
    assert path.read_bytes().startswith(b'{"arithmetic_profile":"mojolearn.neural-training.fp32.v1","payload":')
    loaded = samebits.MLPInference.from_checkpoint(path)
    x = inputs(16)
    assert (np.asarray(loaded.predict_logits(x)).tobytes()
            == np.asarray(constructed(default_weights()).predict_logits(x)).tobytes())


def test_missing_file_is_a_value_error_naming_the_path(tmp_path):
    path = tmp_path / "no-such-checkpoint.json"
    with pytest.raises(ValueError) as refused:
        samebits.MLPInference.from_checkpoint(str(path))
    assert str(path) in str(refused.value)


def test_refusal_does_not_depend_on_earlier_loads(tmp_path):
    # A refused file between two good loads leaves nothing behind: the same good file gives the same bits.
    good = write_valid(tmp_path / "good.json")
    x = inputs(32)
    first = np.asarray(samebits.MLPInference.from_checkpoint(good).predict_logits(x)).tobytes()
    bad = tmp_path / "bad.json"
    bad.write_bytes(BROKEN[0][1])
    with pytest.raises(ValueError):
        samebits.MLPInference.from_checkpoint(bad)
    assert np.asarray(samebits.MLPInference.from_checkpoint(good).predict_logits(x)).tobytes() == first
