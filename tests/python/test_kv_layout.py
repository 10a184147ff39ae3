"""A TransformerState made by allocate_state keeps its cache in the engine's private layout while no view of
it is alive, and decodes there with the bits of a state kept in the caller's own buffers (always packed).
Whatever is read (k_cache, v_cache, a view held across calls, keys(), cached_tokens, copy()) shows the
packed layout of docs/blocks.md §4.2, and whatever is written through a view is read (or refused) by the next
call, as for a packed state."""

import gc

import numpy as np
import pytest

import samebits
from test_transformer import block_weights, tokens


def _block(window=0):
    return samebits.TransformerBlockInference(block_weights(nh=4, nkv=2), n_heads=4, n_kv_heads=2, window=window)


def _caller_state(state):
    """A state over fresh caller buffers with the same contents: never private, so always packed."""
    return samebits.TransformerState(state.batch_size, state.n_kv_heads, state.head_dim, state.max_tokens,
                                     np.array(state.k_cache), np.array(state.v_cache), state.cached_tokens,
                                     state.window)


def _same(a, b):
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_a_private_state_decodes_with_the_bits_of_caller_buffers():
    blk = _block()
    x = tokens((2, 30, 32), 1)
    private = blk.allocate_state(2, 40)
    blk.forward(x[:, :4], private)
    caller = _caller_state(private)
    for t in range(4, 30):
        token = np.ascontiguousarray(x[:, t])
        assert _same(blk.step(token, private), blk.step(token, caller)), t
    assert private._native.spread  # the private layout is the one under test
    assert private.cached_tokens == caller.cached_tokens == 30
    assert _same(private.keys(), caller.keys()) and _same(private.values(), caller.values())
    assert _same(private.k_cache, caller.k_cache) and _same(private.v_cache, caller.v_cache)
    assert not private.k_cache[2 * 2 * 30 * 8 :].any()  # the capacity the engine used reads zeros again


def test_a_view_held_across_calls_always_sees_the_packed_cache():
    blk = _block()
    x = tokens((2, 12, 32), 2)
    private = blk.allocate_state(2, 16)
    caller = _caller_state(private)
    held = private.k_cache[3:]  # any array derived from a handed-out view keeps it alive
    gc.collect()
    for t in range(12):
        token = np.ascontiguousarray(x[:, t])
        assert _same(blk.step(token, private), blk.step(token, caller)), t
        assert not private._native.spread
        assert _same(held, caller.k_cache[3:]), t
    keys = private.keys()
    del held
    gc.collect()
    token = np.ascontiguousarray(x[:, 0])
    assert _same(blk.step(token, private), blk.step(token, caller))
    assert not private._native.spread and _same(keys.reshape(-1), caller.k_cache[: keys.size])  # keys(): a view too
    del keys
    gc.collect()
    assert _same(blk.step(token, private), blk.step(token, caller))
    assert _same(blk.step(token, private), blk.step(token, caller))
    assert private._native.spread  # no view left: private again
    assert _same(private.v_cache, caller.v_cache)


def test_edits_through_views_and_cached_tokens_reach_the_next_call():
    blk = _block()
    x = tokens((2, 10, 32), 3)
    private = blk.allocate_state(2, 12)
    blk.forward(x[:, :6], private)
    blk.forward(x[:, 6:8], private)
    assert private._native.spread
    caller = _caller_state(private)
    for state in (private, caller):
        state.cached_tokens = 5  # forget the last three positions
        state.v_cache[7] += np.float32(0.25)
    for t in (8, 9):
        token = np.ascontiguousarray(x[:, t])
        assert _same(blk.step(token, private), blk.step(token, caller)), t
    # (The capacity is not state: the old positions 5-7 the packed one left there are not compared.)
    assert _same(private.keys(), caller.keys()) and _same(private.values(), caller.values())
    # Raising cached_tokens reads the packed buffer at the new stride, whatever the layout was.
    blk.step(np.ascontiguousarray(x[:, 2]), private)
    blk.step(np.ascontiguousarray(x[:, 2]), caller)
    blk.step(np.ascontiguousarray(x[:, 3]), private)
    blk.step(np.ascontiguousarray(x[:, 3]), caller)
    assert private._native.spread
    for state in (private, caller):
        state.cached_tokens += 2
    token = np.ascontiguousarray(x[:, 4])
    assert _same(blk.step(token, private), blk.step(token, caller))
    # A non-finite value written through a view is refused by name, after the view is gone too.
    private.k_cache[21] = np.float32(np.nan)
    gc.collect()
    with pytest.raises(ValueError, match="NaN in k_cache at flat index 21"):
        blk.step(np.ascontiguousarray(x[:, 0]), private)


def test_copy_is_independent_and_keeps_the_bits():
    blk = _block()
    x = tokens((1, 9, 32), 4)
    state = blk.allocate_state(1, 12)
    blk.forward(x[:, :5], state)
    blk.step(np.ascontiguousarray(x[:, 5]), state)
    copy = state.copy()
    for t in (6, 7, 8):
        token = np.ascontiguousarray(x[:, t])
        assert _same(blk.step(token, state), blk.step(token, copy)), t
    assert _same(state.k_cache, copy.k_cache)
    copy.k_cache[0] += np.float32(1.0)
    assert not _same(state.k_cache, copy.k_cache)


def test_samba_layers_decode_privately_with_the_same_bits():
    config = samebits.SambaConfig(256, 32, ["attention", "mamba3", "attention"], n_heads=2, intermediate=64)
    rng = np.random.default_rng(7)
    weights = {
        name: np.ones(shape, np.float32) if "norm" in name else (rng.standard_normal(shape) * 0.05).astype(np.float32)
        for name, shape in config.registry()
    }
    model = samebits.SambaInference(config, weights)
    ids = rng.integers(0, 256, (2, 20))
    private = model.allocate_state(2, 24)
    model.forward(ids[:, :3], private)
    caller = samebits.SambaState(2, 24, [layer.copy() if isinstance(layer, samebits.Mamba3State)
                                         else _caller_state(layer) for layer in private.layers])
    for t in range(3, 20):
        assert _same(model.step(ids[:, t], private), model.step(ids[:, t], caller)), t
    assert private.layers[0]._native.spread and private.layers[2]._native.spread
    for mine, theirs in zip(private.layers, caller.layers):
        if isinstance(mine, samebits.TransformerState):
            assert _same(mine.k_cache, theirs.k_cache) and _same(mine.v_cache, theirs.v_cache)
    private.layers[2].v_cache[9] = np.float32(np.inf)
    gc.collect()
    with pytest.raises(ValueError, match="infinity in v_cache at flat index 9"):
        model.step(ids[:, 0], private)
    assert private.layers[0].cached_tokens == 20  # the refusal moved no layer


def test_big_caches_live_in_engine_memory_on_huge_page_boundaries():
    # A decode step streams the whole cache: buffers of 2 MiB or more start on a 2 MiB boundary (and are
    # advised as huge pages), for allocate_state and copy() alike, in the block and in the Samba stack.
    config = samebits.SambaConfig(256, 32, ["attention"], n_heads=2, intermediate=64)
    weights = {name: np.ones(shape, np.float32) for name, shape in config.registry()}
    samba = samebits.SambaInference(config, weights).allocate_state(1, 1 << 15)  # 2 heads x 16 x 2^15 x 4 B
    block = _block().allocate_state(2, 1 << 14)  # 2 x 2 x 8 x 2^14 x 4 B
    for state in (samba.layers[0], block):
        for made in (state, state.copy()):
            for buffer in (made.k_cache, made.v_cache):
                assert buffer.nbytes >= 2 << 20
                assert np.asarray(buffer).__array_interface__["data"][0] % (2 << 20) == 0
