"""Mamba3BlockInference over numpy (docs/api.md §6, §13, §14): upstream goldens (base and hashed, forward and
decode), decode == prefill, splits, rows, ragged padding, zero-copy writable state views, Input_States,
packed weights, thread and SIMD independence, and every refusal with its type and wording."""

import array

import numpy as np
import pytest

import samebits
from block_checks import decode, expect_ragged_equals_rows_alone, expect_rows_alone_and_prefix, refuses
from goldens import digest, lane_weights, slab
from samebits import lowbit

TENSORS = [
    ("block_norm.weight", (32,)),
    ("in_proj.weight", (419, 32)),
    ("dt_bias", (1,)),
    ("B_norm.weight", (128,)),
    ("C_norm.weight", (128,)),
    ("B_bias", (1, 128)),
    ("C_bias", (1, 128)),
    ("D", (1,)),
    ("out_proj.weight", (32, 64)),
]
NORMS = ("block_norm.weight", "B_norm.weight", "C_norm.weight")
PIECES = ("theta", "h", "buffer_qrot", "buffer_krot", "buffer_v", "buffer_dt", "buffer_sig", "buffer_adt",
          "pending_k", "pending_v")


def lane(kind):
    """docs/goldens.md §3: the mamba3 lane, 'ones' (all three norms ones) or 'near' (B/C norms near one)."""
    if kind == "ones":
        return lane_weights("mamba3", TENSORS, ones=NORMS)
    return lane_weights("mamba3", TENSORS, ones=("block_norm.weight",), near_one=NORMS[1:])


def model(kind="ones"):
    return samebits.Mamba3BlockInference(lane(kind))


def random_weights(d_model=32, seed=0):
    rng = np.random.default_rng(seed)
    di, h = 2 * d_model, 2 * d_model // 64
    dip = 2 * di + 256 + 3 * h + 32
    shapes = {
        "block_norm.weight": (d_model,), "in_proj.weight": (dip, d_model), "dt_bias": (h,),
        "B_norm.weight": (128,), "C_norm.weight": (128,), "B_bias": (h, 128), "C_bias": (h, 128),
        "D": (h,), "out_proj.weight": (d_model, di),
    }
    out = {name: (rng.standard_normal(shape) * 0.1).astype(np.float32) for name, shape in shapes.items()}
    for name in NORMS:
        out[name] += np.float32(1)
    return out


# ------------------------------------------------------------------ docs/goldens.md §4 and §4a

FORWARD_DIGESTS = {
    ("ones", "base"): "6d73873ffe222457",
    ("ones", "hashed"): "c1862ccad54884ed",
    ("near", "base"): "8fd7cc1c76855a20",
    ("near", "hashed"): "b1a7d4ee34f199ba",
}
STEP_DIGESTS = {
    ("ones", "base"): "a8f15324412ea8ac",
    ("ones", "hashed"): "0fae52bee974f5fa",
    ("near", "base"): "0cb70608adb9120b",
}


@pytest.mark.parametrize("kind,draw", sorted(FORWARD_DIGESTS))
def test_forward_and_decode_reproduce_recorded_digests(kind, draw):
    block = model(kind)
    x = slab(draw, 1)
    y = block.forward(x)
    assert y.dtype == np.float32 and y.shape == (2, 16, 32) and y.flags.c_contiguous
    assert digest(y) == FORWARD_DIGESTS[(kind, draw)]
    decoded, _ = decode(block, x)
    assert digest(decoded) == FORWARD_DIGESTS[(kind, draw)]
    assert digest(block._reference(x)) == FORWARD_DIGESTS[(kind, draw)]


def test_debug_words_of_the_near_lane():
    y = model("near").forward(slab("base", 1))
    assert [hex(v) for v in y[0, 0, :4].view(np.uint32)] == ["0x3e93e93d", "0x3f5ecb12", "0x3eb2f027", "0xbf9ec986"]


@pytest.mark.parametrize("kind,draw", sorted(STEP_DIGESTS))
def test_one_decode_step_after_a_prefill_reproduces_recorded_digests(kind, draw):
    block = model(kind)
    x = slab(draw, 0)
    state = block.allocate_state(2)
    block.forward(x, state)
    out = block.step(x[:, :1, :], state)
    assert out.shape == (2, 1, 32)
    assert digest(out) == STEP_DIGESTS[(kind, draw)]
    # decode == prefill: position 16 of one forward over the 17 tokens.
    full = block.forward(np.concatenate([x, x[:, :1]], axis=1))
    assert full[:, 16:17].tobytes() == out.tobytes()


# ------------------------------------------------------------------ guarantees (docs/api.md §13, §14.1 items 11, 16)


def test_rows_alone_prefix_and_ragged_padding():
    block = model("near")
    x = np.random.default_rng(3).standard_normal((4, 16, 32)).astype(np.float32)
    expect_rows_alone_and_prefix(block, x, prefix=7)
    expect_ragged_equals_rows_alone(block.forward, x, [16, 7, 1, 12])  # the NaN padding never reaches a refusal


@pytest.mark.parametrize("length,lengths", [(70, [70, 9, 65]), (300, [300, 1, 65, 129, 257, 128])])
def test_ragged_rows_across_chunk_boundaries_equal_rows_alone(length, lengths):
    # docs/api.md §14.4 / §14.5: ragged batches whose rows end on both sides of the 64-row chunks.
    block = model("near")
    x = np.random.default_rng(12).standard_normal((len(lengths), length, 32)).astype(np.float32)
    expect_ragged_equals_rows_alone(block.forward, x, lengths, contiguous_rows=True)


def test_decode_equals_prefill_across_chunk_boundaries():
    block = samebits.Mamba3BlockInference(random_weights(64, 1))
    x = np.random.default_rng(2).standard_normal((2, 130, 64)).astype(np.float32)
    full = block.forward(x)
    reports_full = (block.h_last_, block.k_last_, block.v_last_, block.theta_last_)
    decoded, state = decode(block, x)
    for t in range(130):
        assert decoded[:, t].tobytes() == full[:, t].tobytes(), t
    for a, b in zip(reports_full, (block.h_last_, block.k_last_, block.v_last_, block.theta_last_)):
        assert a.tobytes() == b.tobytes()
    assert state.buffered_tokens == 2 and state.pending is False


@pytest.mark.parametrize("splits", [(5, 7), (64, 1, 5), (63, 2, 5), (1, 69), (65, 5)])
def test_split_prefill_equals_the_whole(splits):
    block = model("ones")
    x = np.random.default_rng(4).standard_normal((2, sum(splits), 32)).astype(np.float32)
    full = block.forward(x)
    state = block.allocate_state(2)
    parts, t0 = [], 0
    for n in splits:
        parts.append(block.forward(x[:, t0 : t0 + n], state))
        t0 += n
    assert np.concatenate(parts, axis=1).tobytes() == full.tobytes()


def test_step_accepts_a_two_dimensional_token_and_keeps_its_rank():
    block = model("ones")
    x = slab("base", 1)
    a, b = block.allocate_state(2), block.allocate_state(2)
    out2 = block.step(np.ascontiguousarray(x[:, 0]), a)
    out3 = block.step(x[:, :1], b)
    assert out2.shape == (2, 32) and out3.shape == (2, 1, 32)
    assert out2.tobytes() == out3.tobytes()


def test_bits_do_not_depend_on_threads_or_simd_target(targets_and_threads):
    block = samebits.Mamba3BlockInference(random_weights(64, 5))
    x = np.random.default_rng(6).standard_normal((3, 70, 64)).astype(np.float32)
    targets_and_threads.scalar_one_thread()
    want = block.forward(x).tobytes()
    assert block._reference(x).tobytes() == want
    for case in targets_and_threads:
        assert block.forward(x).tobytes() == want, case


def test_stateless_calls_are_repeatable_and_outputs_are_fresh():
    block = model("ones")
    x = slab("hashed", 1)
    before = x.copy()
    first = block.forward(x)
    first[...] = 0
    assert block.forward(x).tobytes() == block.forward(x).tobytes() != first.tobytes()
    assert x.tobytes() == before.tobytes()


def test_weights_are_copied():
    weights = lane("ones")
    block = samebits.Mamba3BlockInference(weights)
    x = slab("base", 1)
    want = block.forward(x).tobytes()
    weights["in_proj.weight"][...] = 0
    assert block.forward(x).tobytes() == want


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
def test_packed_weights_equal_their_materialized_weights(fmt):
    weights = random_weights(32, 7)
    packed = lowbit.pack(weights, fmt)
    materialized, got_fmt = lowbit.unpack(packed)
    assert got_fmt == fmt
    a = samebits.Mamba3BlockInference(packed)
    b = samebits.Mamba3BlockInference(materialized)
    assert a.weight_format == fmt and b.weight_format == "float32"
    x = slab("base", 1)
    assert a.forward(x).tobytes() == b.forward(x).tobytes()
    sa, sb = a.allocate_state(2), b.allocate_state(2)
    assert a.forward(x, sa).tobytes() == b.forward(x, sb).tobytes()
    assert a.step(x[:, :1], sa).tobytes() == b.step(x[:, :1], sb).tobytes()
    assert a.forward(x).tobytes() != samebits.Mamba3BlockInference(weights).forward(x).tobytes()


# ------------------------------------------------------------------ the state: views, rows, Input_States


def test_state_pieces_are_writable_zero_copy_views():
    block = model("near")
    state = block.allocate_state(2)
    shapes = {
        "theta": (2, 1, 32), "h": (2, 1, 64, 128), "buffer_qrot": (2, 64, 1, 128), "buffer_krot": (2, 64, 1, 128),
        "buffer_v": (2, 64, 1, 64), "buffer_dt": (2, 64, 1), "buffer_sig": (2, 64, 1), "buffer_adt": (2, 64, 1),
        "pending_k": (2, 1, 128), "pending_v": (2, 1, 64),
    }
    for name, shape in shapes.items():
        view = np.asarray(getattr(state, name))
        assert view.shape == shape and view.dtype == np.float32 and view.flags.writeable and view.flags.c_contiguous
        assert not view.any()
    assert state.buffered_tokens == 0 and state.pending is False
    x = slab("base", 1)
    block.forward(x[:, :5], state)
    assert state.buffered_tokens == 5
    theta = np.asarray(state.theta)
    assert theta.any()  # the view shows what the engine wrote
    # Changing one cell through the view changes the next call.
    other = state.copy()
    want = block.step(x[:, 5:6], other)
    np.asarray(state.h)[0, 0, 3, 7] = 0.5
    assert block.step(x[:, 5:6], state).tobytes() != want.tobytes()
    # A view outlives its state object and still reads the engine's memory.
    view = block.allocate_state(1).h
    assert view.shape == (1, 1, 64, 128) and not view.any()


def test_one_ulp_in_theta_moves_exactly_the_next_position():
    # tools/step_vs_full_check.py's sabotage arm: bump a carried cell by one ULP before step 8.
    block = model("near")
    x = np.random.default_rng(3).standard_normal((2, 16, 32)).astype(np.float32)
    full = block.forward(x)
    state = block.allocate_state(2)
    outs = []
    for t in range(16):
        if t == 8:
            bits = np.asarray(state.theta).view(np.uint32)
            bits[0, 0, 0] += 1
        outs.append(block.step(x[:, t : t + 1], state))
    decoded = np.concatenate(outs, axis=1)
    differs = [t for t in range(16) if decoded[:, t].tobytes() != full[:, t].tobytes()]
    assert differs and differs[0] == 8
    # h is all zeros inside the first chunk, so +1 there is a subnormal that the flush makes inert.
    state = block.allocate_state(2)
    for t in range(16):
        if t == 8:
            np.asarray(state.h).view(np.uint32)[0, 0, 0, 0] += 1
        outs[t] = block.step(x[:, t : t + 1], state)
    assert np.concatenate(outs, axis=1).tobytes() == full.tobytes()


def test_rows_sliced_out_of_a_state_continue_exactly():
    block = model("ones")
    x = np.random.default_rng(8).standard_normal((3, 70, 32)).astype(np.float32)
    state = block.allocate_state(3)
    block.forward(x[:, :66], state)
    pieces = [np.asarray(getattr(state, n))[1:2] for n in PIECES]
    row = samebits.Mamba3State(*pieces, buffered_tokens=state.buffered_tokens, pending=state.pending)
    together = block.forward(x[:, 66:], state)
    alone = block.forward(x[1:2, 66:], row)
    assert alone.tobytes() == together[1:2].tobytes()
    assert np.asarray(row.h).tobytes() == np.asarray(state.h)[1:2].tobytes()


def test_whole_pieces_can_be_assigned_and_are_checked():
    block = model("ones")
    state = block.allocate_state(2)
    state.h = np.full((2, 1, 64, 128), 0.25, np.float32)
    assert np.asarray(state.h).min() == 0.25
    with pytest.raises(TypeError, match="state buffer h has dtype float64, want float32"):
        state.h = np.zeros((2, 1, 64, 128))
    with pytest.raises(ValueError, match=r"state buffer theta has shape \(2, 1, 31\), want \(2, 1, 32\)"):
        state.theta = np.zeros((2, 1, 31), np.float32)


def test_input_states_continuation():
    block = model("near")
    x = slab("base", 1)
    rng = np.random.default_rng(9)
    theta = rng.uniform(0, 6, (2, 1, 32)).astype(np.float32)
    h = (rng.standard_normal((2, 1, 64, 128)) * 0.1).astype(np.float32)
    k = rng.standard_normal((2, 1, 128)).astype(np.float32)
    v = rng.standard_normal((2, 1, 64)).astype(np.float32)
    a, b = block.allocate_state(2), block.allocate_state(2)
    a.set_input_states(theta, h, k, v)
    assert a.pending and np.asarray(a.pending_k).tobytes() == k.tobytes()
    b.set_input_states(theta, h, k, v)
    y = block.forward(x, a)
    assert not a.pending and not np.asarray(a.pending_k).any() and not np.asarray(a.pending_v).any()
    assert y.tobytes() == block._reference(x, b).tobytes()
    assert np.asarray(a.h).tobytes() == np.asarray(b.h).tobytes()
    # Only a fresh state may carry Input_States; the next call refuses, and nothing moves.
    a.set_input_states(theta, h, k, v)
    before = np.asarray(a.buffer_v).copy()
    with pytest.raises(ValueError, match=r"the state is mid-sequence \(buf_len = 16\); Input_States only has"):
        block.step(x[:, :1], a)
    assert a.pending and np.asarray(a.buffer_v).tobytes() == before.tobytes()
    with pytest.raises(TypeError, match="set_input_states: theta has dtype float64"):
        a.set_input_states(theta.astype(np.float64), h, k, v)
    with pytest.raises(ValueError, match=r"set_input_states: k has shape \(2, 128\), want \(2, 1, 128\)"):
        a.set_input_states(theta, h, k[:, 0], v)


def test_buffered_tokens_out_of_range_is_refused_natively():
    block = model("ones")
    state = block.allocate_state(2)
    state.buffered_tokens = 65
    with pytest.raises(ValueError, match=r"mamba3: buf_len must be in \[0, 64\]"):
        block.step(slab("base", 1)[:, :1], state)


# ------------------------------------------------------------------ refusals (docs/api.md §2, §6, §11, §12)


def test_backward_and_missing_state_are_refused_by_name():
    block = model("ones")
    x = slab("base", 1)
    with pytest.raises(NotImplementedError, match="Mamba3BlockInference.backward: inference is forward only"):
        block.backward(x, x)
    with pytest.raises(ValueError, match=r"samebits Mamba3Block.step: state is required \(a decode step"):
        block.step(x[:, :1], None)


def test_weight_refusals():
    good = lane("ones")
    with pytest.raises(TypeError, match="weights must be a dict"):
        samebits.Mamba3BlockInference([1, 2])
    bad = dict(good)
    del bad["D"]
    bad["d"] = good["D"]
    with pytest.raises(ValueError, match=r"weight dict mismatch; missing \['D'\]; unknown \['d'\]\. The exact key set"):
        samebits.Mamba3BlockInference(bad)
    bad = dict(good, **{"in_proj.weight": good["in_proj.weight"].astype(np.float64)})
    with pytest.raises(TypeError, match="in_proj.weight has dtype float64; this surface is float32 ONLY"):
        samebits.Mamba3BlockInference(bad)
    bad = dict(good, **{"D": [0.5]})
    with pytest.raises(TypeError, match="D is a list, which does not support the buffer protocol"):
        samebits.Mamba3BlockInference(bad)
    bad = dict(good, **{"in_proj.weight": good["in_proj.weight"].T.copy()})
    with pytest.raises(ValueError, match=r"in_proj.weight has shape \(32, 419\), want \(419, 32\)"):
        samebits.Mamba3BlockInference(bad)
    bad = dict(good, **{"block_norm.weight": np.ones((2, 16), np.float32)})
    with pytest.raises(ValueError, match=r"block_norm.weight must be 1-D \(d_model,\), got shape \(2, 16\)"):
        samebits.Mamba3BlockInference(bad)
    bad = dict(good, **{"block_norm.weight": np.ones(48, np.float32)})
    with pytest.raises(ValueError, match="d_model must be a multiple of 32 so that nheads = 2\\*d_model/64 is whole"):
        samebits.Mamba3BlockInference(bad)
    # Non-finite weights are judged per call, natively, by name and flat index.
    bad = dict(good, **{"C_bias": good["C_bias"].copy()})
    bad["C_bias"][0, 3] = np.inf
    block = samebits.Mamba3BlockInference(bad)
    with pytest.raises(ValueError, match="mamba3_forward_fresh: infinity in C_bias at flat index 3 REFUSED"):
        block.forward(slab("base", 1))


def test_input_refusals():
    block = model("ones")
    x = slab("base", 1)
    with pytest.raises(TypeError, match="Mamba3Block.forward: x has dtype float64; this surface is float32 ONLY"):
        block.forward(x.astype(np.float64))
    with pytest.raises(TypeError, match="x has dtype float16"):
        block.forward(x.astype(np.float16))
    with pytest.raises(ValueError, match=r"Mamba3Block.forward: x must be \(B, L, d_model\), got 2-D shape \(2, 32\)"):
        block.forward(x[:, 0])
    with pytest.raises(ValueError, match=r"-- or \(B, d_model\) for a step --, got 1-D shape \(32,\)"):
        block.step(x[0, 0], block.allocate_state(1))
    with pytest.raises(ValueError, match="x has d_model 16, the weights have 32"):
        block.forward(np.ascontiguousarray(x[:, :, :16]))
    with pytest.raises(ValueError, match="a decode step takes exactly one token per batch row, got L = 4; use forward"):
        block.step(x[:, :4], block.allocate_state(2))
    bad = x.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="mamba3_forward_fresh: NaN in x at flat index 579 REFUSED"):
        block.forward(bad)
    state = block.allocate_state(2)
    np.asarray(state.buffer_adt)[0, 5, 0] = np.inf
    with pytest.raises(ValueError, match="mamba3_forward: infinity in state.buffer_adt at flat index 5 REFUSED"):
        block.forward(x, state)
    with pytest.raises(ValueError, match="B and L must be positive"):
        block.forward(np.zeros((2, 0, 32), np.float32))
    # array.array float32 is accepted.
    flat = array.array("f", x[:1, :1].ravel().tolist())
    with pytest.raises(ValueError, match="x must be"):
        block.forward(flat)


def test_state_refusals():
    block = model("ones")
    x = slab("base", 1)
    refuses(ValueError, r"state buffer theta has shape \(3, 1, 32\), want \(2, 1, 32\)",
            lambda: block.forward(x, block.allocate_state(3)))
    refuses(TypeError, "state must be a Mamba3State", lambda: block.forward(x, object()))
    refuses(ValueError, "batch_size must be positive, got 0", lambda: block.allocate_state(0))
    refuses(ValueError, "cannot carry a state", lambda: block.forward(x, block.allocate_state(2), lengths=[16, 3]))
    refuses(ValueError, r"lengths\[1\] = 17 is outside \[1, L = 16\]", lambda: block.forward(x, lengths=[16, 17]))


# ------------------------------------------------------------------ reports (computed when first read)


def test_reports_before_any_call_do_not_exist():
    with pytest.raises(AttributeError, match="h_last_"):
        model("ones").h_last_


def test_reports_read_late_are_the_reports_of_the_call():
    block, eager = model("near"), model("near")
    x = np.random.default_rng(11).standard_normal((2, 70, 32)).astype(np.float32)
    state, twin = block.allocate_state(2), eager.allocate_state(2)
    held = twin.h  # a live view: the twin's block computes its reports at once
    for t in range(70):
        block.step(x[:, t : t + 1], state)
        eager.step(x[:, t : t + 1], twin)
        if t % 9 == 0 or t in (62, 63, 64, 65):
            want = (eager.h_last_, eager.k_last_, eager.v_last_, eager.theta_last_)
            got = (block.h_last_, block.k_last_, block.v_last_, block.theta_last_)
            assert all(a.tobytes() == b.tobytes() for a, b in zip(want, got)), t
    assert held is not None
    # Everything that may change the state first settles the reports of the call that left it.
    block.step(x[:, :1], state)
    want = eager.step(x[:, :1], twin)
    expected = tuple(r.copy() for r in (eager.h_last_, eager.k_last_, eager.v_last_, eager.theta_last_))
    np.asarray(state.h)[...] = 7.0
    state.buffered_tokens = 3
    assert block.h_last_.tobytes() == expected[0].tobytes()
    assert block.k_last_.tobytes() == expected[1].tobytes()
    assert block.theta_last_.tobytes() == expected[3].tobytes()
    # A second block stepping the same state leaves the first block's reports alone.
    other = model("near")
    s2, t2 = block.allocate_state(2), eager.allocate_state(2)
    block.forward(x[:, :10], s2)
    eager.forward(x[:, :10], t2)
    other.step(x[:, 10:11], s2)
    assert block.h_last_.tobytes() == eager.h_last_.tobytes()
    assert want.shape == (2, 1, 32)
