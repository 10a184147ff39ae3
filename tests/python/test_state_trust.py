"""A Mamba-2 or Mamba-3 state skips its per-call non-finite scan only while no view of it can write it:
every value written through a view, at any time, is still refused by the next call once the view is gone,
and a state kept in views is scanned on every call (docs/blocks.md §2.3 and §3.3 step 1 are never skipped where
they could find something)."""

import gc

import numpy as np
import pytest

import samebits
from test_mamba2 import normal_weights as mamba2_weights
from test_mamba3 import random_weights

D_MODEL = 64


def _block():
    return samebits.Mamba3BlockInference(random_weights(D_MODEL, seed=3))


def _x(length=1, seed=0):
    return np.random.default_rng(seed).standard_normal((1, length, D_MODEL)).astype(np.float32)


def _samba():
    config = samebits.SambaConfig(256, D_MODEL, ["mamba3", "attention"], n_heads=2, intermediate=64)
    rng = np.random.default_rng(5)
    weights = {
        name: np.ones(shape, np.float32) if "norm" in name else (rng.standard_normal(shape) * 0.05).astype(np.float32)
        for name, shape in config.registry()
    }
    return samebits.SambaInference(config, weights)


def test_only_a_state_no_view_can_write_is_trusted():
    block = _block()
    state = block.allocate_state(1)
    assert state._native.trusted  # zeros, written by the engine
    block.step(_x(), state)
    assert state._native.trusted
    view = state.h
    assert not state._native.trusted
    block.step(_x(seed=1), state)
    assert not state._native.trusted  # the view is alive: scanned on every call
    del view
    gc.collect()
    block.step(_x(seed=2), state)  # scanned once more, then trusted again
    assert state._native.trusted
    assert state.copy()._native.trusted


@pytest.mark.parametrize("piece", ["theta", "h", "buffer_krot", "buffer_adt"])
def test_a_value_written_through_a_view_is_refused_after_the_view_is_gone(piece):
    block = _block()
    state = block.allocate_state(1)
    block.step(_x(), state)
    view = getattr(state, piece)
    block.step(_x(seed=1), state)  # clean when scanned
    view.reshape(-1)[3] = np.inf  # written after that call, while the view lives
    del view
    gc.collect()
    with pytest.raises(ValueError, match=f"infinity in state.{piece} at flat index 3 REFUSED"):
        block.step(_x(seed=2), state)


def test_a_samba_layer_state_written_through_a_view_is_refused():
    model = _samba()
    state = model.allocate_state(1, 16)
    for t in range(3):
        model.step(np.array([t + 1]), state)
    assert state.layers[0]._native.trusted
    view = state.layers[0].buffer_v
    model.step(np.array([9]), state)
    view.reshape(-1)[5] = np.nan
    del view
    gc.collect()
    with pytest.raises(ValueError, match="NaN in state.buffer_v at flat index 5 REFUSED"):
        model.step(np.array([4]), state)


def test_trusted_decode_keeps_the_bits():
    """Skipping the scan changes nothing else: a trusted decode equals one scanned on every call."""
    block = _block()
    x = _x(length=70, seed=4)
    trusted = block.allocate_state(1)
    scanned = block.allocate_state(1)
    keep = scanned.h  # a live view keeps this state scanned on every call
    for t in range(70):
        a = block.step(x[:, t : t + 1], trusted)
        b = block.step(x[:, t : t + 1], scanned)
        assert a.tobytes() == b.tobytes(), t
    assert trusted._native.trusted and not scanned._native.trusted
    assert trusted.h.tobytes() == keep.tobytes()


@pytest.mark.parametrize("piece", ["conv_window", "h", "buffer_xbc", "buffer_dtraw"])
def test_a_mamba2_value_written_through_a_view_is_refused_after_the_view_is_gone(piece):
    block = samebits.Mamba2BlockInference(mamba2_weights())
    x = np.random.default_rng(1).standard_normal((1, 3, 32)).astype(np.float32)
    state = block.allocate_state(1)
    block.step(x[:, 0:1], state)
    assert state._native.trusted
    view = getattr(state, piece)
    assert not state._native.trusted
    block.step(x[:, 1:2], state)  # clean when scanned
    view.reshape(-1)[6] = np.nan
    del view
    gc.collect()
    with pytest.raises(ValueError, match=f"NaN in {piece} at flat index 6 REFUSED"):
        block.step(x[:, 2:3], state)
    getattr(state, piece).reshape(-1)[6] = 0.0
    gc.collect()
    block.step(x[:, 2:3], state)  # scanned once more, then trusted again
    assert state._native.trusted and state.copy()._native.trusted
