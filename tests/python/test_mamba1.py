"""Mamba1BlockInference over numpy (docs/api.md §4, upstream checks 14.1 items 8 and 13, 14.2, 14.3): the recorded
digests of docs/goldens.md (base and hashed, stateless and token by token, the 4a state layout), decode ==
prefill, rows, prefixes, ragged batches with +0.0 padding bits, writable zero-copy state views, packed
weights, thread and SIMD independence, and every refusal with its type and wording."""

import array

import numpy as np
import pytest

import samebits
from samebits import lowbit
from block_checks import decode, expect_ragged_equals_rows_alone, expect_rows_alone_and_prefix, refuses
from block_weights import MAMBA1_SHAPES, mamba1_weights, normal_x as x_normal
from goldens import digest, lane_weights, slab

D_MODEL = 32


def golden_block():
    return samebits.Mamba1BlockInference(lane_weights("mamba1", MAMBA1_SHAPES, ones=("norm.weight",)))


def normal_weights(seed=21, scale=0.1):
    """step_vs_full_check style weights: normal * 0.1, norms ones."""
    return mamba1_weights(seed, scale)


@pytest.mark.parametrize("kind,want", [("base", "97e86b9db80719a7"), ("hashed", "b2e6c1006bf3a5ce")])
def test_held_out_forward_digest_stateless_and_decoded(kind, want):
    block = golden_block()
    x = slab(kind, 1)
    y = block.forward(x)
    assert y.shape == (2, 16, 32) and y.dtype == np.float32 and y.flags.c_contiguous
    assert digest(y) == want
    assert digest(block._reference(x)) == want
    decoded, _ = decode(block, x)
    assert decoded.tobytes() == y.tobytes()


def test_base_debug_words():
    y = golden_block().forward(slab("base", 1))
    assert [int(v) for v in y.view(np.uint32)[0, 0, :4]] == [0x3EB0F4DD, 0x3F526816, 0x3EA9053A, 0xBFA6C8B7]


@pytest.mark.parametrize("kind,want", [("base", "50c8fffaf8c010a2"), ("hashed", "b0304f6d0a3d4432")])
def test_decode_step_digest_after_prefill(kind, want):
    block = golden_block()
    x = slab(kind, 0)
    state = block.allocate_state(2)
    block.forward(x, state)
    out = block.step(x[:, :1, :], state)
    assert out.shape == (2, 1, 32)
    assert digest(out) == want
    # decode == prefill: position 16 of a fresh forward over the slab followed by its token 0.
    full = block.forward(np.concatenate([x, x[:, :1]], axis=1))
    assert full[:, 16:17].tobytes() == out.tobytes()


def test_state_layout_digest_goldens_4a():
    block = golden_block()
    x = slab("base", 0)
    state = block.allocate_state(2)
    outs = [block.step(x[:, t : t + 1, :], state) for t in range(16)]
    assert digest(*outs) == "bfe92dd1b46862d2"
    assert state.conv_window.shape == (2, 64, 4) and state.h.shape == (2, 64, 16)
    assert digest(state.conv_window.ravel(), state.h.ravel()) == "0800dac84123170c"


def test_rows_prefix_ragged_backward_and_state_required():
    block = samebits.Mamba1BlockInference(normal_weights())
    x = x_normal((4, 16, 32), seed=9)
    expect_rows_alone_and_prefix(block, x, prefix=7)
    expect_ragged_equals_rows_alone(block.forward, x, [16, 7, 1, 12])  # the NaN padding is replaced before any refusal
    with pytest.raises(NotImplementedError, match="inference is forward only"):
        block.backward(x, x)
    with pytest.raises(ValueError, match="state is required"):
        block.step(x[:, :1], None)


def test_decode_equals_prefill_and_splits():
    block = samebits.Mamba1BlockInference(normal_weights())
    x = x_normal((2, 12, 32))
    full = block.forward(x)
    decoded, state = decode(block, x)
    assert decoded.tobytes() == full.tobytes()
    split = block.allocate_state(2)
    parts = [block.forward(x[:, :5], split), block.forward(x[:, 5:], split)]
    assert np.concatenate(parts, axis=1).tobytes() == full.tobytes()
    assert split.h.tobytes() == state.h.tobytes() and split.conv_window.tobytes() == state.conv_window.tobytes()
    # A (B, d_model) step returns (B, d_model).
    again = block.allocate_state(2)
    block.forward(x[:, :11], again)
    assert block.step(x[:, 11], again).tobytes() == full[:, 11].tobytes()


def test_state_views_are_writable_zero_copy_and_one_ulp_moves_the_expected_position():
    block = samebits.Mamba1BlockInference(normal_weights())
    x = x_normal()
    full = block.forward(x)
    at = 8

    def run(piece, cell, edit):
        state = block.allocate_state(2)
        outs = []
        for t in range(16):
            if t == at:
                view = np.asarray(getattr(state, piece))
                assert view.flags.writeable and np.shares_memory(view, getattr(state, piece))
                before = view.reshape(-1).copy()
                edit(view.reshape(-1), cell)
                assert getattr(state, piece).reshape(-1)[cell].tobytes() != before[cell].tobytes()
            outs.append(block.step(x[:, t : t + 1], state))
        got = np.concatenate(outs, axis=1).view(np.uint32)
        differ = np.nonzero((got != full.view(np.uint32)).any(axis=(0, 2)))[0]
        return int(differ[0]) if differ.size else None

    def one_ulp(flat, cell):
        flat.view(np.uint32)[cell] += 1

    def plus_one(flat, cell):
        flat[cell] += 1.0

    # An edit through the view is what the next step reads: a large one moves exactly position `at`.
    assert run("conv_window", 3, plus_one) == at
    assert run("h", 5, plus_one) == at
    # Window index 0 is never read again (it falls out next), so no bump there can land anywhere.
    for cell in range(0, 64, 4):
        assert run("conv_window", cell, one_ulp) is None
    # One ULP elsewhere may be absorbed by a rounding (upstream measured the same: its step_vs_full
    # sabotage fires on a conv_window cell while others absorb), but it never moves a position before
    # `at`, and the arm fires.
    fired = [run("conv_window", c, one_ulp) for c in range(1, 24)] + [run("h", c, one_ulp) for c in range(8)]
    fired = [p for p in fired if p is not None]
    assert fired and min(fired) >= at


def test_state_from_arrays_copy_and_row_surgery():
    block = samebits.Mamba1BlockInference(normal_weights())
    x = x_normal((3, 10, 32), seed=4)
    full = block.forward(x)
    state = block.allocate_state(3)
    block.forward(x[:, :6], state)
    # Continue rows 2 and 0 as their own batch, from states sliced out of the whole one.
    sub = samebits.Mamba1State(state.conv_window[[2, 0]], state.h[[2, 0]])
    assert block.forward(x[[2, 0], 6:], sub).tobytes() == full[[2, 0], 6:].tobytes()
    twin = state.copy()
    assert block.forward(x[:, 6:], state).tobytes() == block.forward(x[:, 6:], twin).tobytes()
    # Assigning a piece copies bits into the engine's memory.
    fresh = block.allocate_state(3)
    fresh.h = np.zeros((3, 64, 16), np.float32)
    with pytest.raises(ValueError, match=r"state buffer h has shape \(2, 64, 16\), want \(3, 64, 16\)"):
        fresh.h = np.zeros((2, 64, 16), np.float32)
    with pytest.raises(TypeError, match="state buffer h has dtype float64, want float32"):
        fresh.h = np.zeros((3, 64, 16))


def test_packed_weights_equal_materialized_fp32():
    weights = normal_weights(seed=5)
    x = x_normal((2, 6, 32), seed=6)
    for fmt in ("bfloat16", "int8"):
        packed = lowbit.pack(weights, fmt)
        block = samebits.Mamba1BlockInference(packed)
        assert block.weight_format == fmt
        materialized = samebits.Mamba1BlockInference(lowbit.unpack(packed)[0])
        assert materialized.weight_format == "float32"
        assert block.forward(x).tobytes() == materialized.forward(x).tobytes()
        s1, s2 = block.allocate_state(2), materialized.allocate_state(2)
        assert block.forward(x, s1).tobytes() == materialized.forward(x, s2).tobytes()
        assert block.step(x[:, :1], s1).tobytes() == materialized.step(x[:, :1], s2).tobytes()
        assert block.forward(x).tobytes() != samebits.Mamba1BlockInference(weights).forward(x).tobytes()


def test_bits_do_not_depend_on_threads_or_simd_target(targets_and_threads):
    block = samebits.Mamba1BlockInference(normal_weights(seed=7))
    x = x_normal((3, 21, 32), seed=8)
    want = block._reference(x).tobytes()
    for case in targets_and_threads:
        assert block.forward(x).tobytes() == want, case


def test_weights_are_copied():
    weights = normal_weights()
    block = samebits.Mamba1BlockInference(weights)
    x = x_normal((1, 4, 32))
    before = block.forward(x).tobytes()
    for value in weights.values():
        value[...] = 0
    assert block.forward(x).tobytes() == before


def test_refusals():
    weights = normal_weights()
    block = samebits.Mamba1BlockInference(weights)
    x = x_normal((2, 4, 32))
    refuses(TypeError, "x has dtype float64; this surface is float32 ONLY", lambda: block.forward(x.astype(np.float64)))
    refuses(TypeError, "float16", lambda: block.forward(x.astype(np.float16)))
    refuses(TypeError, "x is a list, which does not support the buffer protocol", lambda: block.forward(x.tolist()))
    refuses(ValueError, r"Mamba1Block.forward: x must be \(B, L, d_model\), got 2-D shape \(8, 32\)",
            lambda: block.forward(x.reshape(8, 32)))
    refuses(ValueError, "x has d_model 16, the weights have 32", lambda: block.forward(x[:, :, :16]))
    state = block.allocate_state(2)
    refuses(ValueError, "a decode step takes exactly one token per batch row, got L = 4", lambda: block.step(x, state))
    refuses(ValueError, r"state buffer conv_window has shape \(3, 64, 4\), want \(2, 64, 4\)",
            lambda: block.forward(x, block.allocate_state(3)))
    refuses(TypeError, "state must be a Mamba1State", lambda: block.forward(x, object()))
    refuses(ValueError, "batch_size must be positive, got 0", lambda: block.allocate_state(0))
    refuses(ValueError, "B and L must be positive", lambda: block.forward(np.zeros((2, 0, 32), np.float32)))
    bad = x.copy()
    bad[1, 2, 3] = np.inf
    refuses(ValueError, r"infinity in x at flat index 195 REFUSED", lambda: block.forward(bad))
    state.h[0, 1, 2] = np.nan
    refuses(ValueError, r"NaN in h at flat index 18 REFUSED", lambda: block.forward(x, state))
    refuses(ValueError, "lengths= .* cannot carry a state",
            lambda: block.forward(x, block.allocate_state(2), lengths=[4, 4]))
    refuses(ValueError, "lengths has 3 entries but the batch has B = 2", lambda: block.forward(x, lengths=[1, 2, 3]))
    refuses(TypeError, r"lengths\[1\] is a bool", lambda: block.forward(x, lengths=[1, True]))
    refuses(TypeError, r"lengths\[0\] = 1.5 is not an integer", lambda: block.forward(x, lengths=[1.5, 2]))
    refuses(ValueError, r"Mamba1BlockInference.forward: lengths\[1\] = 5 is outside \[1, L = 4\]",
            lambda: block.forward(x, lengths=[1, 5]))
    # Construction.
    missing = dict(weights)
    del missing["D"]
    missing["Dee"] = weights["D"]
    refuses(ValueError, r"weight dict mismatch; missing \['D'\]; unknown \['Dee'\]",
            lambda: samebits.Mamba1BlockInference(missing))
    wrong = dict(weights, **{"in_proj.weight": weights["in_proj.weight"].T})
    refuses(ValueError, r"in_proj.weight has shape \(32, 128\), want \(128, 32\)",
            lambda: samebits.Mamba1BlockInference(wrong))
    squeezed = dict(weights, **{"conv1d.weight": weights["conv1d.weight"].reshape(64, 4)})
    assert samebits.Mamba1BlockInference(squeezed).forward(x).tobytes() == block.forward(x).tobytes()
    refuses(ValueError, r"norm.weight must be 1-D \(d_model,\), got shape \(4, 8\)",
            lambda: samebits.Mamba1BlockInference(dict(weights, **{"norm.weight": np.ones((4, 8), np.float32)})))
    refuses(TypeError, "A_log has dtype float64",
            lambda: samebits.Mamba1BlockInference(dict(weights, A_log=weights["A_log"].astype(np.float64))))
    refuses(TypeError, "weights must be a dict", lambda: samebits.Mamba1BlockInference([1, 2]))
    nan_weights = dict(weights, D=np.full(64, np.nan, np.float32))
    nan_block = samebits.Mamba1BlockInference(nan_weights)  # refused at the first call, as upstream
    refuses(ValueError, "NaN in D at flat index 0 REFUSED", lambda: nan_block.forward(x))


def test_array_array_input_is_accepted():
    block = samebits.Mamba1BlockInference(normal_weights())
    x = x_normal((1, 3, 32))
    buf = array.array("f", x.ravel().tolist())
    assert block.forward(np.frombuffer(buf, np.float32).reshape(1, 3, 32)).tobytes() == block.forward(x).tobytes()
