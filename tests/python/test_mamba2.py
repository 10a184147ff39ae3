"""Mamba2BlockInference over numpy (docs/api.md §5, upstream checks 14.1 items 9, 10, 14, 15, 14.3, 14.4): the
recorded digests of docs/goldens.md (base, hashed, dt_limit (0.01, 0.1), the decode step), decode == prefill
across chunk boundaries, the open chunk's buffer and h_last_, initial_states, writable state views, ragged
batches across a chunk, row surgery on states, and the refusals."""

import numpy as np
import pytest

import samebits
from samebits import lowbit
from block_checks import expect_ragged_equals_rows_alone, expect_rows_alone_and_prefix
from block_weights import MAMBA2_SHAPES, mamba2_weights, normal_x as x_normal
from goldens import digest, lane_weights, slab



def golden_weights():
    return lane_weights("mamba2", MAMBA2_SHAPES, ones=("block_norm.weight", "norm.weight"))


def normal_weights(seed=21, scale=0.1):
    out = mamba2_weights(seed, scale)
    out["A_log"] = np.array([-1.0], np.float32)  # A about -0.37: decays stay visible across a chunk
    out["dt_bias"] = np.array([-2.5], np.float32)
    return out


@pytest.mark.parametrize("kind,want", [("base", "b0084ee171c0720f"), ("hashed", "fa5cdfa7a8028ea4")])
def test_held_out_forward_digest_stateless_twin_and_decoded(kind, want):
    block = samebits.Mamba2BlockInference(golden_weights())
    x = slab(kind, 1)
    y = block.forward(x)
    assert y.shape == (2, 16, 32) and y.dtype == np.float32 and y.flags.c_contiguous
    assert digest(y) == want
    assert digest(block._reference(x)) == want
    state = block.allocate_state(2)
    decoded = np.concatenate([block.step(x[:, t : t + 1], state) for t in range(16)], axis=1)
    assert decoded.tobytes() == y.tobytes()
    assert state.buffered_tokens == 16


def test_base_debug_words_and_dt_limit_golden():
    block = samebits.Mamba2BlockInference(golden_weights())
    y = block.forward(slab("base", 1))
    assert [int(v) for v in y.view(np.uint32)[0, 0, :4]] == [0x3EAE4FDB, 0x3F5170B9, 0x3EA873F3, 0xBFA7D829]
    clamped = samebits.Mamba2BlockInference(golden_weights(), dt_limit=(0.01, 0.1))
    assert clamped.dt_limit == (0.01, 0.1)
    x8 = slab("base", 1, (2, 8, 32))
    assert digest(clamped.forward(x8)) == "34916b8fa0b239a9"
    assert digest(clamped._reference(x8)) == "34916b8fa0b239a9"


@pytest.mark.parametrize("kind,want", [("base", "3fa40f29231409be"), ("hashed", "795c0526eb99905f")])
def test_decode_step_digest_after_prefill(kind, want):
    block = samebits.Mamba2BlockInference(golden_weights())
    x = slab(kind, 0)
    state = block.allocate_state(2)
    block.forward(x, state)
    out = block.step(x[:, :1, :], state)
    assert digest(out) == want
    assert state.buffered_tokens == 17


@pytest.mark.parametrize("dt_limit", [(0.0, float("inf")), (0.01, 0.1)])
def test_rows_prefix_ragged_and_decode_equals_prefill(dt_limit):
    block = samebits.Mamba2BlockInference(normal_weights(), dt_limit=dt_limit)
    x = x_normal((4, 16, 32), seed=9)
    full = expect_rows_alone_and_prefix(block, x, prefix=7)
    expect_ragged_equals_rows_alone(block.forward, x, [16, 7, 1, 12])
    with pytest.raises(NotImplementedError, match="Mamba2BlockInference.backward: inference is forward only"):
        block.backward(x, x)
    with pytest.raises(ValueError, match="Mamba2Block.step: state is required"):
        block.step(x[:, :1], None)
    state = block.allocate_state(4)
    decoded = np.concatenate([block.step(x[:, t : t + 1], state) for t in range(16)], axis=1)
    assert decoded.tobytes() == full.tobytes()


def test_decode_across_chunk_boundaries_equals_forward_twin_and_h_last():
    block = samebits.Mamba2BlockInference(normal_weights(seed=4), dt_limit=(0.001, 2.0))
    L = 530
    x = x_normal((2, L, 32), seed=5)
    full = block.forward(x)
    assert block._reference(x).tobytes() == full.tobytes()
    state = block.allocate_state(2)
    for t in range(L):
        y = block.step(x[:, t : t + 1], state)
        assert y.tobytes() == full[:, t : t + 1].tobytes(), t
        assert state.buffered_tokens == (t + 1) % 256
        if t in (254, 255, 256, 511, 512, 513):
            # The next step from copies of this state: the twin re-runs the open chunk from the buffer,
            # the fast path extends its kept rows; same output, same state, same h_last_.
            nxt = x[:, t + 1 : t + 2]
            twin_state, fast_state = state.copy(), state.copy()
            y_twin = block._reference(nxt, twin_state, step=True)
            h_twin = block.h_last_.copy()
            y_fast = block.step(nxt, fast_state)
            assert y_fast.tobytes() == y_twin.tobytes(), t
            assert block.h_last_.shape == (2, 1, 64, 128)
            assert block.h_last_.tobytes() == h_twin.tobytes(), t
            for piece in ("conv_window", "h"):
                assert getattr(fast_state, piece).tobytes() == getattr(twin_state, piece).tobytes(), (t, piece)
            q = fast_state.buffered_tokens
            assert q == twin_state.buffered_tokens
            assert fast_state.buffer_xbc[:, :q].tobytes() == twin_state.buffer_xbc[:, :q].tobytes()
            assert fast_state.buffer_dtraw[:, :q].tobytes() == twin_state.buffer_dtraw[:, :q].tobytes()


def test_h_last_is_not_the_resumption_state_and_h_is_the_last_completed_boundary():
    block = samebits.Mamba2BlockInference(normal_weights(seed=6))
    x = x_normal((1, 300, 32), seed=7)
    state = block.allocate_state(1)
    block.forward(x[:, :100], state)
    assert not state.h.any()  # no chunk completed yet
    assert block.h_last_.any()
    block.forward(x[:, 100:256], state)
    assert state.buffered_tokens == 0
    assert block.h_last_.tobytes() == state.h.tobytes()  # the final chunk completed: report == boundary
    boundary, window = state.h.copy(), state.conv_window.copy()
    block.forward(x[:, 256:], state)
    assert state.h.tobytes() == boundary.tobytes() and state.buffered_tokens == 44
    assert block.h_last_.tobytes() != boundary.tobytes()
    # On a chunk boundary the state is just (window, h): a fresh state carrying them resumes exactly.
    fresh = block.allocate_state(1)
    fresh.h = boundary
    fresh.conv_window = window
    assert block.forward(x[:, 256:], fresh).tobytes() == block.forward(x)[:, 256:].tobytes()


def test_initial_states_on_a_fresh_state():
    block = samebits.Mamba2BlockInference(normal_weights(seed=8))
    x = x_normal((2, 20, 32), seed=9)
    state = block.allocate_state(2)
    state.h[...] = x_normal((2, 1, 64, 128), seed=10) * 0.1
    twin = state.copy()
    assert block.forward(x, state).tobytes() == block._reference(x, twin).tobytes()
    assert block.forward(x, state.copy()).tobytes() != block.forward(x).tobytes()


def test_state_views_edits_and_inert_bump_inside_the_first_chunk():
    block = samebits.Mamba2BlockInference(normal_weights(seed=11))
    x = x_normal((2, 16, 32), seed=12)
    full = block.forward(x)
    at = 8

    def run(edit):
        state = block.allocate_state(2)
        outs = []
        for t in range(16):
            if t == at:
                edit(state)
            outs.append(block.step(x[:, t : t + 1], state))
        got = np.concatenate(outs, axis=1).view(np.uint32)
        differ = np.nonzero((got != full.view(np.uint32)).any(axis=(0, 2)))[0]
        return int(differ[0]) if differ.size else None

    def bump_h(state):
        view = state.h
        assert view.flags.writeable and np.shares_memory(view, state.h)
        view.reshape(-1).view(np.uint32)[7] += 1  # +0.0 becomes the smallest subnormal

    # h is all zeros inside the first chunk: +1 ULP there is a subnormal, flushed back to zero on read.
    assert run(bump_h) is None

    def edit_buffer(state):
        state.buffer_xbc[0, 3, 5] += 1.0  # a buffered x row of the open chunk

    def edit_dtraw(state):
        state.buffer_dtraw[1, 2, 0] += 1.0

    assert run(edit_buffer) == at
    assert run(edit_dtraw) == at

    def rewind(state):
        state.buffered_tokens = 300

    with pytest.raises(ValueError, match=r"buf_len must be in \[0, 256\)"):
        run(rewind)


def test_state_from_arrays_copy_and_row_surgery():
    block = samebits.Mamba2BlockInference(normal_weights(seed=13))
    x = x_normal((3, 280, 32), seed=14)
    full = block.forward(x)
    state = block.allocate_state(3)
    block.forward(x[:, :270], state)
    sub = samebits.Mamba2State(state.conv_window[[2, 0]], state.h[[2, 0]], state.buffer_xbc[[2, 0]],
                               state.buffer_dtraw[[2, 0]], state.buffered_tokens)
    assert block.forward(x[[2, 0], 270:], sub).tobytes() == full[[2, 0], 270:].tobytes()
    twin = state.copy()
    assert block.forward(x[:, 270:], state).tobytes() == block.forward(x[:, 270:], twin).tobytes()
    with pytest.raises(ValueError, match=r"state buffer h has shape \(2, 1, 64, 128\), want \(3, 1, 64, 128\)"):
        state.h = np.zeros((2, 1, 64, 128), np.float32)


def test_ragged_across_a_chunk_with_junk_padding():
    block = samebits.Mamba2BlockInference(normal_weights(seed=15))
    x = x_normal((4, 300, 32), seed=16)
    expect_ragged_equals_rows_alone(block.forward, x, [300, 1, 65, 257])


def test_packed_weights_and_threads(targets_and_threads):
    weights = normal_weights(seed=17)
    x = x_normal((2, 40, 32), seed=18)
    packed = lowbit.pack(weights, "bfloat16")
    block = samebits.Mamba2BlockInference(packed)
    assert block.weight_format == "bfloat16"
    assert block.forward(x).tobytes() == samebits.Mamba2BlockInference(lowbit.unpack(packed)[0]).forward(x).tobytes()
    want = block._reference(x).tobytes()
    for case in targets_and_threads:
        assert block.forward(x).tobytes() == want, case


def test_refusals():
    weights = normal_weights()
    with pytest.raises(ValueError, match="d_model must be a multiple of 32 .*; got 48"):
        samebits.Mamba2BlockInference(dict(weights, **{"block_norm.weight": np.ones(48, np.float32)}))
    with pytest.raises(ValueError, match=r"weight dict mismatch; missing \['dt_bias'\]"):
        samebits.Mamba2BlockInference({k: v for k, v in weights.items() if k != "dt_bias"})
    with pytest.raises(ValueError, match=r"conv1d.weight has shape \(320, 4, 1\), want \(320, 1, 4\) \(or \(320, 4\)\)"):
        samebits.Mamba2BlockInference(dict(weights, **{"conv1d.weight": np.zeros((320, 4, 1), np.float32)}))
    with pytest.raises((TypeError, ValueError)):
        samebits.Mamba2BlockInference(weights, dt_limit=("low", 1.0))
    block = samebits.Mamba2BlockInference(weights)
    with pytest.raises(AttributeError):
        block.h_last_
    x = x_normal((2, 4, 32))
    with pytest.raises(TypeError, match="x has dtype float64"):
        block.forward(x.astype(np.float64))
    with pytest.raises(ValueError, match=r"state buffer conv_window has shape \(1, 320, 4\), want \(2, 320, 4\)"):
        block.forward(x, block.allocate_state(1))
    state = block.allocate_state(2)
    state.buffer_dtraw[0, 200, 0] = np.inf  # a stale row still counts: the whole buffer is refused
    with pytest.raises(ValueError, match="infinity in buffer_dtraw at flat index 200 REFUSED"):
        block.forward(x, state)
    with pytest.raises(TypeError, match="state must be a Mamba2State"):
        block.forward(x, object())
