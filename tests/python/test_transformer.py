"""TransformerBlockInference over numpy (docs/api.md §2, §3, §11-§14): upstream's checks (rows alone, prefix,
ragged, decode == prefill, one ULP in v_cache[7] moving exactly position 6), split and step guarantees
for windows 0 and 8 and n_kv_heads in {n_heads, n_heads/2, 1}, zero-copy writable state views, packed
weights, thread / SIMD independence, and every refusal with its type and wording."""

import array

import numpy as np
import pytest

import samebits
from samebits import lowbit

from block_checks import expect_ragged_equals_rows_alone, refuses
from block_weights import normal_x as tokens, transformer_weights as block_weights  # upstream's test fixture


def decode(blk, x, max_tokens=None):
    state = blk.allocate_state(x.shape[0], max_tokens or x.shape[1])
    out = np.concatenate([blk.step(np.ascontiguousarray(x[:, t : t + 1]), state) for t in range(x.shape[1])], axis=1)
    return out, state


# ------------------------------------------------------------------ upstream test_neural_inference.py


@pytest.mark.parametrize("window", [0, 8])
def test_rows_alone_prefix_and_ragged(window):
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1, window=window)
    x = tokens((4, 16, 32), 5)
    y = blk.forward(x)
    assert y.shape == (4, 16, 32) and y.dtype == np.float32
    for i in range(4):
        assert blk.forward(x[i : i + 1]).tobytes() == y[i : i + 1].tobytes(), i
    assert blk(np.ascontiguousarray(x[:, :7])).tobytes() == np.ascontiguousarray(y[:, :7]).tobytes()
    # The NaN padding junk is replaced before anything is judged.
    expect_ragged_equals_rows_alone(blk.forward, x, [16, 7, 1, 12], contiguous_rows=True)


@pytest.mark.parametrize("window", [0, 8])
def test_decode_equals_the_prefill(window):
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1, window=window)
    x = tokens((2, 12, 32), 23)
    steps, state = decode(blk, x)
    assert steps.tobytes() == blk.forward(x).tobytes()
    assert state.cached_tokens == 12


def test_one_ulp_in_v_cache_7_moves_exactly_position_6():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((2, 12, 32), 3)
    full = blk.forward(x)

    def first_moved(piece, cell):
        state = blk.allocate_state(2, 12)
        moved = None
        for t in range(12):
            if t == 6:
                bits = np.asarray(getattr(state, piece)).reshape(-1).view(np.uint32)
                before = int(bits[cell])
                bits[cell] = before + 1
                assert int(np.asarray(getattr(state, piece)).reshape(-1).view(np.uint32)[cell]) == before + 1
            one = blk.step(np.ascontiguousarray(x[:, t : t + 1]), state)
            if moved is None and np.ascontiguousarray(full[:, t : t + 1]).tobytes() != one.tobytes():
                moved = t
        return moved

    assert first_moved("v_cache", 7) == 6
    # measured upstream: k_cache absorbs a one-ULP bump at each of its first 32 cells
    assert [first_moved("k_cache", cell) for cell in range(32)] == [None] * 32


def test_backward_state_required_and_head_rule():
    tw = block_weights()
    blk = samebits.TransformerBlockInference(tw, n_heads=2, n_kv_heads=1)
    refuses(NotImplementedError, "inference is forward only",
            lambda: blk.backward(np.zeros((1, 2, 32), np.float32), np.zeros((1, 2, 32), np.float32)))
    refuses(ValueError,
            r"^samebits TransformerBlock\.step: state is required \(a decode step continues a sequence; "
            r"allocate_state\(B, max_tokens\) makes the fresh one\)$",
            lambda: blk.step(np.zeros((1, 1, 32), np.float32), None))
    refuses(ValueError, r"d_model must equal n_heads\*head_dim .* got d_model 32 vs n_heads 3 \* head_dim 10",
            lambda: samebits.TransformerBlockInference(tw, n_heads=3))


# ------------------------------------------------------------------ guarantees over shapes

SHAPES = [(4, 4, 0), (4, 2, 0), (4, 1, 0), (4, 4, 8), (4, 2, 8), (4, 1, 8)]  # (n_heads, n_kv_heads, window)


@pytest.mark.parametrize("nh,nkv,window", SHAPES)
def test_step_split_rows_prefix_and_twin(nh, nkv, window):
    blk = samebits.TransformerBlockInference(block_weights(nh=nh, nkv=nkv, seed=7), n_heads=nh, n_kv_heads=nkv, window=window)
    x = tokens((3, 12, 32), 11)
    whole = blk.forward(x)
    assert blk._forward_reference(x).tobytes() == whole.tobytes()
    steps, _ = decode(blk, x, max_tokens=20)
    assert steps.tobytes() == whole.tobytes()
    state = blk.allocate_state(3, 12)
    head = blk.forward(np.ascontiguousarray(x[:, :5]), state)
    tail = blk.forward(np.ascontiguousarray(x[:, 5:]), state)
    assert np.concatenate([head, tail], axis=1).tobytes() == whole.tobytes()
    fresh = blk.allocate_state(3, 12)
    assert blk.forward(x, fresh).tobytes() == whole.tobytes()
    for i in range(3):
        assert blk.forward(x[i : i + 1]).tobytes() == whole[i : i + 1].tobytes()
    for n in (1, 7, 11):
        assert blk.forward(np.ascontiguousarray(x[:, :n])).tobytes() == np.ascontiguousarray(whole[:, :n]).tobytes()
    # the carried twin updates the same state bytes as the fast path
    a, b = blk.allocate_state(3, 12), blk.allocate_state(3, 12)
    blk.forward(np.ascontiguousarray(x[:, :5]), a)
    blk._forward_reference(np.ascontiguousarray(x[:, :5]), b)
    assert a.k_cache.tobytes() == b.k_cache.tobytes() and a.v_cache.tobytes() == b.v_cache.tobytes()


@pytest.mark.parametrize("window", [0, 8])
def test_long_sequence_300(window):
    blk = samebits.TransformerBlockInference(block_weights(nh=4, nkv=2, seed=9), n_heads=4, n_kv_heads=2, window=window)
    x = tokens((2, 300, 32), 12)
    whole = blk.forward(x)
    state = blk.allocate_state(2, 300)
    first = blk.forward(np.ascontiguousarray(x[:, :129]), state)
    rest = [blk.step(x[:, t], state) for t in range(129, 300)]  # (B, d_model) steps
    assert all(r.shape == (2, 32) for r in rest)
    assert np.concatenate([first, np.stack(rest, axis=1)], axis=1).tobytes() == whole.tobytes()
    lengths = [300, 129]
    ragged = blk.forward(x, lengths=lengths)
    assert ragged[1:, :129].tobytes() == blk.forward(np.ascontiguousarray(x[1:, :129])).tobytes()
    assert (ragged[1, 129:].view(np.uint32) == 0).all()


def test_threads_and_simd_targets_agree(targets_and_threads):
    blk = samebits.TransformerBlockInference(block_weights(nh=4, nkv=2), n_heads=4, n_kv_heads=2, window=8)
    x = tokens((2, 40, 32), 13)
    want = blk._forward_reference(x).tobytes()
    for case in targets_and_threads:
        assert blk.forward(x).tobytes() == want, case
        steps, _ = decode(blk, x)
        assert steps.tobytes() == want, case


# ------------------------------------------------------------------ state object


@pytest.mark.parametrize("window", [0, 4])
def test_state_views_are_the_engines_memory(window):
    blk = samebits.TransformerBlockInference(block_weights(nh=4, nkv=2), n_heads=4, n_kv_heads=2, window=window)
    state = blk.allocate_state(2, 9)
    cap = window or 9
    for piece in (state.k_cache, state.v_cache):
        assert isinstance(piece, np.ndarray) and piece.dtype == np.float32 and piece.shape == (2 * 2 * cap * 8,)
        assert piece.flags.writeable and piece.flags.c_contiguous and not piece.any()
    assert (state.batch_size, state.n_kv_heads, state.head_dim, state.max_tokens, state.window) == (2, 2, 8, 9, window)
    assert state.capacity == cap and state.cached_tokens == 0
    x = tokens((2, 6, 32), 4)
    view = state.k_cache
    blk.forward(x, state)
    assert view.any() and np.shares_memory(view, state.k_cache)  # written in place
    keys = state.keys()
    held = min(6, window) if window else 6
    assert keys.shape == (2, 2, held, 8) and state.values().shape == keys.shape
    if not window:
        assert keys.tobytes() == state.k_cache[: 2 * 2 * 6 * 8].tobytes()
        assert not state.k_cache[2 * 2 * 6 * 8 :].any()  # the capacity past the packed region stays zeros
    # one changed cell through the view changes the next call (and a restored one restores it)
    y1 = blk.step(x[:, 0], state)
    state.cached_tokens -= 1
    state.v_cache[0] += np.float32(0.5)
    y2 = blk.step(x[:, 0], state)
    assert y1.tobytes() != y2.tobytes()


def test_caller_buffers_are_updated_in_place():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((1, 5, 32), 6)
    state = blk.allocate_state(1, 5)
    n = state.k_cache.size
    state.k_cache = array.array("f", bytes(4 * n))  # any writable float32 buffer
    state.v_cache = np.zeros(n, np.float32)
    out = blk.forward(x, state)
    assert out.tobytes() == blk.forward(x).tobytes()
    ref = blk.allocate_state(1, 5)
    blk.forward(x, ref)
    assert bytes(state.k_cache) == ref.k_cache.tobytes() and state.v_cache.tobytes() == ref.v_cache.tobytes()


def test_state_buffer_and_state_refusals():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((2, 3, 32), 8)
    state = blk.allocate_state(2, 4)
    n = state.k_cache.size
    what = "samebits TransformerBlock.forward"
    state.k_cache = np.zeros(n + 1, np.float32)
    with pytest.raises(ValueError, match=rf"^{what}: state buffer k_cache has shape \({n + 1},\), want \({n},\)$"):
        blk.forward(x, state)
    state.k_cache = np.zeros(n, np.float64)
    with pytest.raises(TypeError, match=rf"{what}: state buffer k_cache has dtype float64, want float32"):
        blk.forward(x, state)
    state.k_cache = [0.0] * n
    with pytest.raises(TypeError, match="state buffer k_cache must be a numpy ndarray"):
        blk.forward(x, state)
    ro = np.zeros(n, np.float32)
    ro.flags.writeable = False
    state.k_cache = ro
    with pytest.raises(ValueError, match="must be C-contiguous and writable; it is updated IN PLACE"):
        blk.forward(x, state)
    state.k_cache = np.zeros(2 * n, np.float32)[::2]
    with pytest.raises(ValueError, match="must be C-contiguous and writable"):
        blk.forward(x, state)
    state = blk.allocate_state(3, 4)
    with pytest.raises(
        ValueError,
        match=rf"^{what}: the state was allocated for batch_size 3 but x has B = 2 "
        r"\(allocate_state\(B, max_tokens\) makes a matching one\)$",
    ):
        blk.forward(x, state)
    other = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1, window=8)
    with pytest.raises(ValueError, match=r"the state was allocated for window 8 but this block has window 0"):
        blk.forward(x, other.allocate_state(2, 4))
    state = blk.allocate_state(2, 4)
    blk.forward(x, state)
    with pytest.raises(ValueError, match=rf"^{what}: this call would use 6 KV slots and the cache holds 4 REFUSED$"):
        blk.forward(x, state)
    state.cached_tokens = 7
    with pytest.raises(ValueError, match=r"cached_tokens must be in \[0, 4\]"):
        blk.forward(x, state)
    with pytest.raises(TypeError, match=r"state must be a TransformerState"):
        blk.forward(x, state=object())
    with pytest.raises(ValueError, match=r"^samebits TransformerBlock: batch_size must be positive, got 0$"):
        blk.allocate_state(0, 4)
    with pytest.raises(ValueError, match=r"^samebits TransformerBlock: max_tokens must be positive, got 0$"):
        blk.allocate_state(1, 0)
    big = blk.allocate_state(1, 8193)
    with pytest.raises(ValueError, match=r"a rotary table of 8193 positions .* exceeds max_positions 8192"):
        blk.step(x[:1, 0], big)
    edge = blk.allocate_state(1, 8192)
    assert blk.step(x[:1, 0], edge).shape == (1, 32)
    with pytest.raises(ValueError, match="exceeds max_positions 8192"):
        blk.forward(np.zeros((1, 8193, 32), np.float32))


def test_non_finite_refusals_name_the_array_and_index():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((2, 3, 32), 8)
    bad = x.copy()
    bad[1, 2, 5] = np.inf
    with pytest.raises(ValueError, match=r"^samebits TransformerBlock\.forward: infinity in x at flat index 165 REFUSED$"):
        blk.forward(bad)
    state = blk.allocate_state(2, 8)
    blk.forward(x, state)
    kept = state.v_cache[10]
    state.v_cache[10] = np.nan
    with pytest.raises(ValueError, match=r"^samebits TransformerBlock\.step: NaN in v_cache at flat index 10 REFUSED$"):
        blk.step(x[:, :1], state)
    assert state.cached_tokens == 3  # a refused call changes nothing
    state.v_cache[10] = kept
    clean = blk.allocate_state(2, 8)
    blk.forward(x, clean)
    state.k_cache[-1] = np.nan  # past the packed region: not state, never read, never refused
    assert blk.step(x[:, :1], state).tobytes() == blk.step(x[:, :1], clean).tobytes()
    assert np.isnan(state.k_cache[-1]) and not state.k_cache[2 * 4 * 16 : -1].any()  # and left alone
    w = block_weights()
    w["o_proj.weight"][3, 4] = np.nan
    with pytest.raises(ValueError, match=r"^samebits TransformerBlock: NaN in o_proj\.weight at flat index 100 REFUSED$"):
        samebits.TransformerBlockInference(w, n_heads=2, n_kv_heads=1)


def test_input_refusals():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1)
    what = "samebits TransformerBlock.forward"
    refuses(TypeError, rf"^{what}: x has dtype float64; this surface is float32 ONLY",
            lambda: blk.forward(np.zeros((1, 2, 32))))
    refuses(TypeError, "bfloat16 and float16 are refused BY NAME",
            lambda: blk.forward(np.zeros((1, 2, 32), np.float16)))
    refuses(TypeError, rf"^{what}: x is a list, which does not support the buffer protocol",
            lambda: blk.forward([[0.0] * 32]))
    refuses(ValueError, rf"^{what}: x must be \(B, L, d_model\), got 2-D shape \(2, 32\)$",
            lambda: blk.forward(np.zeros((2, 32), np.float32)))
    refuses(ValueError, rf"^{what}: x has d_model 16, the weights have 32$",
            lambda: blk.forward(np.zeros((1, 2, 16), np.float32)))
    refuses(ValueError, r"B and L must be positive", lambda: blk.forward(np.zeros((0, 2, 32), np.float32)))
    state = blk.allocate_state(1, 4)
    refuses(ValueError,
            r"^samebits TransformerBlock\.step: a decode step takes exactly one token per batch row, got L = 2; "
            r"use forward\(\) for prefill$",
            lambda: blk.step(np.zeros((1, 2, 32), np.float32), state))
    refuses(ValueError, r"-- or \(B, d_model\) for a step --, got 1-D shape \(32,\)",
            lambda: blk.step(np.zeros(32, np.float32), state))
    buffer = memoryview(array.array("f", [0.25] * 64)).cast("B").cast("f", (1, 2, 32))  # any float32 buffer
    assert blk.forward(buffer).tobytes() == blk.forward(np.full((1, 2, 32), 0.25, np.float32)).tobytes()


def test_step_output_rank_follows_the_input():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((2, 2, 32), 14)
    a, b = blk.allocate_state(2, 2), blk.allocate_state(2, 2)
    y3 = blk.step(np.ascontiguousarray(x[:, :1]), a)
    y2 = blk.step(np.ascontiguousarray(x[:, 0]), b)
    assert y3.shape == (2, 1, 32) and y2.shape == (2, 32) and y3.tobytes() == y2.tobytes()


def test_ragged_refusals():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((2, 4, 32), 15)
    what = "samebits TransformerBlock.forward"
    refuses(ValueError, rf"^{what}: lengths= \(a ragged, right-padded batch\) cannot carry a state",
            lambda: blk.forward(x, blk.allocate_state(2, 4), lengths=[4, 2]))
    refuses(ValueError, rf"^{what}: lengths has 3 entries but the batch has B = 2$",
            lambda: blk.forward(x, lengths=[4, 2, 1]))
    refuses(TypeError, r"lengths\[1\] is a bool, not an integer", lambda: blk.forward(x, lengths=[4, True]))
    refuses(TypeError, r"lengths\[0\] = 2.0 is not an integer", lambda: blk.forward(x, lengths=[2.0, 1]))
    refuses(ValueError, r"lengths\[1\] = 5 is outside \[1, L = 4\]", lambda: blk.forward(x, lengths=[4, 5]))
    refuses(TypeError, "lengths must be a sequence of 2 integers", lambda: blk.forward(x, lengths=3))


def test_construction_refusals_and_options():
    w = block_weights()
    with pytest.raises(TypeError, match="weights must be a dict"):
        samebits.TransformerBlockInference([1, 2], n_heads=2)
    bad = dict(w)
    bad["post_norm.weight"] = bad.pop("post_attention_layernorm.weight")
    with pytest.raises(
        ValueError,
        match=r"^samebits TransformerBlock: weight dict mismatch; missing \['post_attention_layernorm\.weight'\]; "
        r"unknown \['post_norm\.weight'\]\. The exact key set is \['input_layernorm\.weight', ",
    ):
        samebits.TransformerBlockInference(bad, n_heads=2, n_kv_heads=1)
    bad = dict(w, **{"q_proj.weight": w["q_proj.weight"].T.copy()[:16]})
    with pytest.raises(ValueError, match=r"q_proj\.weight has shape \(16, 32\), want \(32, 32\)"):
        samebits.TransformerBlockInference(bad, n_heads=2, n_kv_heads=1)
    bad = dict(w, **{"k_proj.weight": w["k_proj.weight"].astype(np.float64)})
    with pytest.raises(TypeError, match=r"k_proj\.weight has dtype float64; this surface is float32 ONLY"):
        samebits.TransformerBlockInference(bad, n_heads=2, n_kv_heads=1)
    with pytest.raises(ValueError, match=r"window must be 0 \(full causal\) or a positive sliding-window width, got -2"):
        samebits.TransformerBlockInference(w, n_heads=2, n_kv_heads=1, window=-2)
    with pytest.raises(ValueError, match="n_heads must be positive, got 0"):
        samebits.TransformerBlockInference(w, n_heads=0)
    with pytest.raises(ValueError, match=r"gate_proj\.weight must be \(intermediate, d_model=32\)"):
        samebits.TransformerBlockInference(dict(w, **{"gate_proj.weight": w["up_proj.weight"].T.copy()}), n_heads=2, n_kv_heads=1)
    w4 = block_weights(nh=4, nkv=2)
    w4["k_proj.weight"] = np.zeros((24, 32), np.float32)
    w4["v_proj.weight"] = np.zeros((24, 32), np.float32)
    with pytest.raises(ValueError, match="n_heads 4 not divisible by n_kv_heads 3"):
        samebits.TransformerBlockInference(w4, n_heads=4, n_kv_heads=3)
    # Every block option is served (tests/python/test_transformer_options.py); bad values and their tensors
    # are refused in upstream's wording.
    for name, value, text in [("rope_theta", -1.0, "rope_theta must be a finite positive float, got -1.0"),
                              ("rope_scaling", {"type": "linear"}, "rope_scaling 'linear' needs 'factor'"),
                              ("rope_dim", 7, r"rope_dim must be an even integer in \(0, head_dim=16\], got 7"),
                              ("max_positions", 0, "max_positions must be positive, got 0"),
                              ("qkv_bias", True, r"q_proj\.bias is required by the options passed"),
                              ("norm", "batchnorm", "norm='batchnorm' is not supported"),
                              ("norm_eps", 0.0, "norm_eps must be a finite positive float, got 0.0"),
                              ("mlp", "gelu", r"gate_proj\.weight is present but mlp='gelu' is ungated"),
                              ("qk_norm", True, r"q_norm\.weight is required by the options passed"),
                              ("attn_softcap", 0.0, r"attn_softcap must be a finite positive float, got 0\.0")]:
        with pytest.raises(ValueError, match=rf"^samebits TransformerBlock: {text}"):
            samebits.TransformerBlockInference(w, n_heads=2, n_kv_heads=1, **{name: value})
    same = samebits.TransformerBlockInference(w, n_heads=2, n_kv_heads=1, rope_theta=10000, rope_dim=16,
                                              norm_eps=1e-6, max_positions=8192, numeric_mode="identical")
    x = tokens((1, 3, 32), 2)
    assert same.forward(x).tobytes() == samebits.TransformerBlockInference(w, n_heads=2, n_kv_heads=1).forward(x).tobytes()
    with pytest.raises(ValueError, match="numeric_mode='fast' is not served"):
        samebits.TransformerBlockInference(w, n_heads=2, n_kv_heads=1, numeric_mode="fast")


def test_weights_are_copied_and_packed_weights_are_materialized():
    w = block_weights()
    x = tokens((2, 5, 32), 16)
    blk = samebits.TransformerBlockInference(w, n_heads=2, n_kv_heads=1)
    y = blk.forward(x)
    w["q_proj.weight"][:] = 0  # the caller's arrays are not the block's
    assert blk.forward(x).tobytes() == y.tobytes()
    assert blk.weight_format == "float32"
    w = block_weights()
    for fmt in ("bfloat16", "int8"):
        packed = lowbit.pack(w, fmt)
        materialized, got_fmt = lowbit.unpack(packed)
        assert got_fmt == fmt
        a = samebits.TransformerBlockInference(packed, n_heads=2, n_kv_heads=1)
        b = samebits.TransformerBlockInference(materialized, n_heads=2, n_kv_heads=1)
        assert a.weight_format == fmt
        assert a.forward(x).tobytes() == b.forward(x).tobytes()
        assert a.forward(x).tobytes() != y.tobytes()
        sa, sb = a.allocate_state(2, 16), b.allocate_state(2, 16)
        assert a.forward(x, sa).tobytes() == b.forward(x, sb).tobytes()
        assert a.step(x[:, 0], sa).tobytes() == b.step(x[:, 0], sb).tobytes()


def test_stateless_calls_change_nothing():
    blk = samebits.TransformerBlockInference(block_weights(), n_heads=2, n_kv_heads=1, window=8)
    x = tokens((2, 9, 32), 17)
    keep = x.copy()
    a = blk.forward(x)
    b = blk.forward(x)
    assert a.tobytes() == b.tobytes() and x.tobytes() == keep.tobytes()
    assert a.base is None or not np.shares_memory(a, b)  # fresh arrays
    assert "TransformerBlockInference(d_model=32, n_heads=2, n_kv_heads=1, head_dim=16" in repr(blk)


@pytest.mark.parametrize("window", [0, 4])
def test_state_rows_slice_and_concatenate(window):
    """Continuous batching by hand (tools/identity_break.py rlpair): state rows cut out of a batch, or
    batches glued together at the same position, continue each row exactly."""
    blk = samebits.TransformerBlockInference(block_weights(nh=4, nkv=2), n_heads=4, n_kv_heads=2, window=window)
    x = tokens((3, 10, 32), 18)
    whole = blk.forward(x)
    state = blk.allocate_state(3, 10)
    blk.forward(np.ascontiguousarray(x[:, :6]), state)
    kv, hd, cap = state.n_kv_heads, state.head_dim, state.capacity
    held = state.cached_tokens if window == 0 else cap

    def rows(buffer, picks, capacity):
        # full causal: [rows, KV, S, HD] packed at stride S, then zeros; a window: the rows' rings
        used = np.asarray(buffer)[: 3 * kv * held * hd].reshape(3, kv, held, hd)[picks].reshape(-1)
        out = np.zeros(len(picks) * kv * capacity * hd, np.float32)
        out[: used.size] = used
        return out

    for picks in ([1], [2, 0]):
        part = samebits.TransformerState(len(picks), kv, hd, 10, rows(state.k_cache, picks, cap),
                                         rows(state.v_cache, picks, cap), state.cached_tokens, window)
        rest = [blk.step(np.ascontiguousarray(x[picks, t : t + 1]), part) for t in range(6, 10)]
        assert np.concatenate(rest, axis=1).tobytes() == np.ascontiguousarray(whole[picks, 6:]).tobytes(), picks
