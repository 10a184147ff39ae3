"""samebits.lowbit: packing by rank, exact materialization, and every refusal (docs/api.md §10, docs/formats.md §5).

The oracles below are written over Python ints and fractions, not over the library's spelling: bf16
rounds by comparing the discarded half-word with 0x8000, int8 rounds the exact rational value with
Python's round-half-even, and dequantization multiplies exactly in double.
"""

import array
import hashlib
import math
import os
import shutil
import struct
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from samebits import lowbit

# ---------------------------------------------------------------------------------------- data


def _hash_words(count, seed):
    """`count` uint32 words from SHAKE-256 of a seed string: deterministic everywhere."""
    return np.frombuffer(hashlib.shake_256(f"samebits-lowbit-{seed}".encode()).digest(4 * count), dtype="<u4")


def hashed_uniform(shape, seed, lo=-0.125, hi=0.125):
    n = int(np.prod(shape))
    unit = _hash_words(n, seed).astype(np.float64) / 2.0**32
    return (lo + (hi - lo) * unit).astype(np.float32).reshape(shape)


def hashed_bit_patterns(shape, seed):
    """Raw float32 bit patterns: every class (NaN, infinities, subnormals, zeros) occurs."""
    return _hash_words(int(np.prod(shape)), seed).copy().view(np.float32).reshape(shape)


def tie_patterns(shape, seed):
    """Bit patterns whose discarded half-word is exactly 0x8000: every one a bf16 rounding tie."""
    words = (_hash_words(int(np.prod(shape)), seed) & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    return words.view(np.float32).reshape(shape)


def special_rows():
    """Finite rows that reach every branch: zeros with -0, a flushed subnormal, exact halves, a tiny
    row, a huge row, a plain row, and 65504 with 2^-15."""
    return np.array(
        [
            [0.0, -0.0, 0.0, 0.0],
            [1e-40, -1e-40, 1.0, -1.0],
            [0.5, 1.5, 2.5, -2.5],
            [1e-30, 2e-30, -3e-30, 4e-30],
            [3e38, -1e38, 1.0, 2.0],
            [0.1, -0.2, 0.3, -0.4],
            [65504.0, 2.0**-15, -(2.0**-15), 100.0],
        ],
        dtype=np.float32,
    )


def nonfinite_rows():
    nan, inf = float("nan"), float("inf")
    m = struct.unpack("<f", struct.pack("<I", 0x00800000))[0]  # FLT_MIN
    return np.array(
        [
            [nan, 1.0, -inf, 2.0],  # an infinity wins the absmax, NaN never does
            [nan, -nan, nan, nan],  # nothing but NaN: exponent 0
            [nan, 3.0, -0.5, 0.0],
            [m, -m, 0.0, -0.0],  # exponent -132: the scale 2^132 is the infinity
            [-127.5, 127.5, -64.0, 1.0],  # rounds to +-128, clamped to +-127
        ],
        dtype=np.float32,
    )


# ---------------------------------------------------------------------------------------- oracles


def _u32(x):
    return [int(v) for v in np.ascontiguousarray(x, dtype=np.float32).reshape(-1).view(np.uint32)]


def _flush_bits(u):
    return u & 0x80000000 if (u & 0x7F800000) == 0 else u


def _value(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def oracle_bf16(x):
    out = []
    for u in _u32(x):
        u = _flush_bits(u)
        if (u & 0x7F800000) == 0x7F800000 and (u & 0x007FFFFF) != 0:
            out.append((u >> 16) | 0x0040)
            continue
        top, low = u >> 16, u & 0xFFFF
        if low > 0x8000 or (low == 0x8000 and top & 1):
            top += 1  # a carry out of 0x7F7F lands on 0x7F80, the infinity
        out.append(top)
    return np.array(out, dtype=np.uint16).reshape(np.shape(x))


def oracle_widen(bits):
    words = [int(b) << 16 for b in np.ascontiguousarray(bits).reshape(-1)]
    return np.array(words, dtype=np.uint32).view(np.float32).reshape(np.shape(bits))


def _row_exponent(values):
    finite_or_inf = [abs(v) for v in values if v == v]
    absmax = max(finite_or_inf, default=0.0)
    if absmax == 0.0:
        return 0
    if math.isinf(absmax):
        return 128 - 6  # the infinity reads exponent field 255
    _, k = math.frexp(absmax)  # absmax = m * 2^k, m in [0.5, 1): floor(log2 absmax) = k - 1
    return (k - 1) - 6


def _code(v, e):
    if v != v:
        return 0
    if -e > 127:  # the scale 2^-e is the infinity: 0 * inf is NaN (code 0), anything else saturates
        return 0 if v == 0.0 else (127 if v > 0 else -127)
    if math.isinf(v):
        return 127 if v > 0 else -127
    r = round(Fraction(v) * Fraction(2) ** (-e))  # Fraction rounds half to even
    return max(-127, min(127, r))


def oracle_quantize(x):
    x = np.asarray(x, dtype=np.float32)
    rows, cols = x.shape
    codes = np.zeros((rows, cols), dtype=np.int8)
    exps = np.zeros((rows,), dtype=np.int32)
    for r in range(rows):
        values = [_value(_flush_bits(u)) for u in _u32(x[r])]
        e = _row_exponent(values)
        exps[r] = e
        codes[r] = [_code(v, e) for v in values]
    return codes, exps


def _dequant_value(code, e):
    if e > 127:
        return float("nan") if code == 0 else math.copysign(float("inf"), code)
    if e < -126:
        return -0.0 if code < 0 else 0.0
    v = code * 2.0**e  # exact in double
    if abs(v) >= 2.0**128:
        return math.copysign(float("inf"), v)
    return v  # exactly a float32: at most 8 significant bits, at least 2^-126 in magnitude


def oracle_dequantize(codes, exps):
    rows, cols = codes.shape
    out = [_dequant_value(int(codes[r, c]), int(exps[r])) for r in range(rows) for c in range(cols)]
    return np.array(out, dtype=np.float32).reshape(rows, cols)


def same_bits(a, b):
    """Bitwise equality of two float32 arrays, a NaN matching any NaN."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | (a.view(np.uint32) == b.view(np.uint32))))


ORACLE_BLOCKS = [
    ("hashed", lambda: hashed_uniform((40, 32), 7)),
    ("special", special_rows),
    ("wide", lambda: hashed_uniform((3, 5), 9, -1e3, 1e3)),
    ("nonfinite", nonfinite_rows),
    ("bit-patterns", lambda: hashed_bit_patterns((64, 48), 11)),
    ("bf16-ties", lambda: tie_patterns((32, 16), 13)),
]


# ---------------------------------------------------------------------------------------- oracle checks


@pytest.mark.parametrize("label,make", ORACLE_BLOCKS, ids=[b[0] for b in ORACLE_BLOCKS])
def test_bf16_packing_equals_oracle(label, make):
    w = make()
    packed = lowbit.pack_one(w, "bfloat16", label)
    assert isinstance(packed, lowbit.BF16Weight) and packed.format == "bfloat16"
    assert packed.bits.dtype == np.uint16 and packed.bits.shape == w.shape and packed.shape == w.shape
    assert packed.bits.flags["C_CONTIGUOUS"]
    assert np.array_equal(packed.bits, oracle_bf16(w))
    widened = lowbit.materialize_one(packed, label)
    assert widened.dtype == np.float32 and widened.shape == w.shape and widened.flags["C_CONTIGUOUS"]
    assert np.array_equal(widened.view(np.uint32), oracle_widen(packed.bits).view(np.uint32))


@pytest.mark.parametrize("label,make", ORACLE_BLOCKS, ids=[b[0] for b in ORACLE_BLOCKS])
def test_int8_packing_equals_oracle(label, make):
    w = make()
    packed = lowbit.pack_one(w, "int8", label)
    assert isinstance(packed, lowbit.Int8Weight) and packed.format == "int8"
    assert packed.codes.dtype == np.int8 and packed.codes.shape == w.shape
    assert packed.exponents.dtype == np.int32 and packed.exponents.shape == (w.shape[0],)
    codes, exps = oracle_quantize(w)
    assert np.array_equal(packed.exponents, exps)
    assert np.array_equal(packed.codes, codes)
    assert not np.any(packed.codes == -128)
    materialized = lowbit.materialize_one(packed, label)
    assert materialized.dtype == np.float32 and materialized.shape == w.shape
    assert same_bits(materialized, oracle_dequantize(codes, exps))


def test_special_rows_hand_checked():
    # Worked by hand from the float32 bit patterns: e = (exponent field of the row absmax) - 133.
    packed = lowbit.pack_one(special_rows(), "int8")
    assert packed.exponents.tolist() == [0, -6, -5, -104, 121, -8, 9]
    assert packed.codes[0].tolist() == [0, 0, 0, 0]
    assert packed.codes[1].tolist() == [0, 0, 64, -64]  # 1e-40 flushed; 1.0 * 2^6
    assert packed.codes[2].tolist() == [16, 48, 80, -80]  # halves times 32, exact
    assert packed.codes[3].tolist() == [20, 41, -61, 81]  # 20.28, 40.56, -60.85, 81.13
    assert packed.codes[4].tolist() == [113, -38, 0, 0]  # 3e38 = 1.76324 * 2^127 -> 112.85
    assert packed.codes[5].tolist() == [26, -51, 77, -102]  # times 256
    assert packed.codes[6].tolist() == [127, 0, 0, 0]  # 65504 / 512 = 127.94 -> 128, clamped
    bits = lowbit.pack_one(special_rows(), "bfloat16").bits
    assert bits[0].tolist() == [0x0000, 0x8000, 0x0000, 0x0000]
    assert bits[1].tolist() == [0x0000, 0x8000, 0x3F80, 0xBF80]  # subnormals flushed to signed zeros
    assert bits[4, 0] == 0x7F62  # 3e38 = 0x7F61B1E6 rounds up, still finite
    assert bits[6].tolist()[:3] == [0x4780, 0x3800, 0xB800]  # 65504 rounds to 65536; 2^-15 exact
    ties = np.array([[0x3F808000, 0x3F818000, 0x7F7F8000, 0x7FA12345]], dtype=np.uint32).view(np.float32)
    assert lowbit.pack_one(ties, "bfloat16").bits.tolist() == [[0x3F80, 0x3F82, 0x7F80, 0x7FE1]]


def test_int8_nonfinite_rows_hand_checked():
    packed = lowbit.pack_one(nonfinite_rows(), "int8")
    assert packed.exponents.tolist() == [122, 0, -5, -132, 0]
    assert packed.codes.tolist() == [
        [0, 0, -127, 0],
        [0, 0, 0, 0],
        [0, 96, -16, 0],
        [127, -127, 0, 0],
        [-127, 127, -64, 1],
    ]
    # Exponent -132 is below -126: the row materializes to signed zeros.
    m = lowbit.materialize_one(packed)
    assert m[3].view(np.uint32).tolist() == [0x00000000, 0x80000000, 0x00000000, 0x00000000]


def test_dequantize_out_of_range_exponents():
    codes = np.array([[1, -1, 0, 2], [5, -5, 0, 127], [1, 2, -127, 0]], dtype=np.int8)
    exps = np.array([128, -127, 127], dtype=np.int32)
    m = lowbit.materialize_one(lowbit.Int8Weight(codes, exps))
    assert m[0, :2].view(np.uint32).tolist() == [0x7F800000, 0xFF800000]
    assert np.isnan(m[0, 2])  # 0 * inf
    assert m[1].view(np.uint32).tolist() == [0, 0x80000000, 0, 0]
    assert m[2].view(np.uint32).tolist() == [0x7F000000, 0x7F800000, 0xFF800000, 0]
    assert same_bits(m, oracle_dequantize(codes, exps))


def test_every_code_and_exponent_dequantizes_like_the_oracle():
    codes = np.tile(np.arange(-128, 128, dtype=np.int16).astype(np.int8), (301, 1))
    exps = np.arange(-150, 151, dtype=np.int32)
    m = lowbit.materialize_one(lowbit.Int8Weight(codes, exps))
    assert same_bits(m, oracle_dequantize(codes, exps))


def test_widen_bf16_any_rank_is_the_shift():
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    for shape in [(65536,), (256, 256), (16, 64, 64)]:
        bits = every.reshape(shape)
        out = lowbit.widen_bf16(bits)
        assert out.dtype == np.float32 and out.shape == shape and out.flags["C_CONTIGUOUS"]
        assert np.array_equal(out.view(np.uint32), bits.astype(np.uint32) << 16)
    strided = every.reshape(256, 256)[:, ::2]
    assert np.array_equal(lowbit.widen_bf16(strided).view(np.uint32), strided.astype(np.uint32) << 16)
    assert lowbit.widen_bf16(array.array("H", [0x3F80, 0xC000])).tolist() == [1.0, -2.0]


def test_bf16_round_trip_of_every_pattern():
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).reshape(256, 256)
    back = lowbit.pack_one(lowbit.widen_bf16(every), "bfloat16").bits
    subnormal = ((every & 0x7F80) == 0) & ((every & 0x007F) != 0)
    nan = ((every & 0x7F80) == 0x7F80) & ((every & 0x007F) != 0)
    expected = np.where(subnormal, every & 0x8000, np.where(nan, every | 0x0040, every)).astype(np.uint16)
    assert np.array_equal(back, expected)


# ---------------------------------------------------------------------------------------- pack / unpack


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
def test_pack_by_rank_unpack_and_idempotent_repack(fmt):
    w = {"a": hashed_uniform((40, 32), 1), "n": hashed_uniform((32,), 2), "b": hashed_uniform((32, 24), 3)}
    w["t"] = hashed_uniform((4, 1, 3), 4)  # 3-D, like conv taps: never packed
    packed = lowbit.pack(w, fmt)
    assert packed is not w and list(packed) == ["a", "n", "b", "t"]
    assert lowbit.format_of(packed) == fmt
    assert lowbit.is_packed(packed["a"]) and lowbit.is_packed(packed["b"])
    assert not lowbit.is_packed(packed["n"]) and not lowbit.is_packed(packed["t"])
    assert packed["n"] is w["n"] and packed["t"] is w["t"]
    f32, got = lowbit.unpack(packed)
    assert got == fmt and f32["n"] is packed["n"] and f32["t"] is packed["t"]
    for k in ("a", "b"):
        assert f32[k].dtype == np.float32 and f32[k].shape == w[k].shape
    again = lowbit.pack(f32, fmt)
    for k in ("a", "b"):
        if fmt == "bfloat16":
            assert np.array_equal(again[k].bits, packed[k].bits)
            assert np.array_equal(packed[k].bits, oracle_bf16(w[k]))
            assert same_bits(f32[k], oracle_widen(packed[k].bits))
        else:
            assert np.array_equal(again[k].codes, packed[k].codes)
            assert np.array_equal(again[k].exponents, packed[k].exponents)
            codes, exps = oracle_quantize(w[k])
            assert np.array_equal(packed[k].codes, codes) and np.array_equal(packed[k].exponents, exps)
            assert same_bits(f32[k], oracle_dequantize(codes, exps))
    # unpack(pack(unpack(p))) is unpack(p)
    f32_again, _ = lowbit.unpack(again)
    assert all(same_bits(f32_again[k], f32[k]) for k in ("a", "b"))
    assert lowbit.materialize is lowbit.unpack


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
def test_repack_same_format_copies_bytes_without_materializing(monkeypatch, fmt):
    if fmt == "bfloat16":
        original = lowbit.BF16Weight(np.arange(24, dtype=np.uint16).reshape(6, 4))
    else:
        codes = np.arange(24, dtype=np.int8).reshape(6, 4)
        original = lowbit.Int8Weight(codes, np.arange(6, dtype=np.int32) - 3)

    def refuse(*args, **kwargs):
        pytest.fail("a same-format repack materialized")

    monkeypatch.setattr(lowbit, "materialize_one", refuse)
    copied = lowbit.pack({"w": original}, fmt)["w"]
    assert copied is not original and copied.format == fmt and copied.shape == (6, 4)
    if fmt == "bfloat16":
        assert np.array_equal(copied.bits, original.bits)
        assert not np.shares_memory(copied.bits, original.bits)
    else:
        assert np.array_equal(copied.codes, original.codes)
        assert np.array_equal(copied.exponents, original.exponents)
        assert not np.shares_memory(copied.codes, original.codes)
        assert not np.shares_memory(copied.exponents, original.exponents)


def test_repack_other_format_materializes_first():
    w = {"a": hashed_uniform((8, 6), 21, -3.0, 3.0)}
    as_bf16 = lowbit.pack(w, "bfloat16")
    as_int8 = lowbit.pack(as_bf16, "int8")["a"]
    direct = lowbit.pack_one(lowbit.materialize_one(as_bf16["a"]), "int8")
    assert np.array_equal(as_int8.codes, direct.codes) and np.array_equal(as_int8.exponents, direct.exponents)
    back = lowbit.pack(as_bf16, "float32")["a"]
    assert isinstance(back, np.ndarray) and same_bits(back, lowbit.materialize_one(as_bf16["a"]))


def test_pack_float32_passes_values_through():
    w = {"a": hashed_uniform((3, 2), 5), "n": hashed_uniform((2,), 6)}
    out = lowbit.pack(w, "float32")
    assert out is not w and out["a"] is w["a"] and out["n"] is w["n"]
    assert lowbit.format_of(out) == "float32"


def test_pack_turns_nested_lists_into_float32():
    out = lowbit.pack({"a": [[1.0, 2.0], [3.0, 4.5]], "n": [1.0, 2.0], "x": (0.5, 0.25)}, "bfloat16")
    assert isinstance(out["a"], lowbit.BF16Weight)
    assert out["a"].bits.tolist() == [[0x3F80, 0x4000], [0x4040, 0x4090]]
    for k in ("n", "x"):
        assert isinstance(out[k], np.ndarray) and out[k].dtype == np.float32 and out[k].ndim == 1
    assert out["n"].tolist() == [1.0, 2.0]


def test_pack_accepts_other_buffers_and_strided_arrays():
    base = hashed_uniform((6, 8), 31, -2.0, 2.0)
    strided = base[:, ::2]
    assert not strided.flags["C_CONTIGUOUS"]
    got = lowbit.pack_one(strided, "int8")
    want = lowbit.pack_one(np.ascontiguousarray(strided), "int8")
    assert np.array_equal(got.codes, want.codes) and np.array_equal(got.exponents, want.exponents)
    flat = array.array("f", base.reshape(-1).tolist())
    view2d = memoryview(flat).cast("B").cast("f", shape=[6, 8])
    assert np.array_equal(lowbit.pack_one(view2d, "bfloat16").bits, oracle_bf16(base))
    transposed = lowbit.pack({"w": base.T}, "bfloat16")["w"]
    assert np.array_equal(transposed.bits, oracle_bf16(np.ascontiguousarray(base.T)))


def test_pack_one_float32_returns_a_copy():
    w = hashed_uniform((3, 4), 41)
    out = lowbit.pack_one(w, "float32")
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.flags["C_CONTIGUOUS"]
    assert np.array_equal(out, w) and not np.shares_memory(out, w)


def test_zero_size_matrices():
    for shape in [(0, 5), (3, 0)]:
        w = np.zeros(shape, dtype=np.float32)
        b = lowbit.pack_one(w, "bfloat16")
        q = lowbit.pack_one(w, "int8")
        assert b.bits.shape == shape and q.codes.shape == shape and q.exponents.shape == (shape[0],)
        assert q.exponents.tolist() == [0] * shape[0]
        assert lowbit.materialize_one(b).shape == shape and lowbit.materialize_one(q).shape == shape


def test_packed_objects_are_independent_of_their_sources():
    bits = np.full((2, 3), 0x3F80, dtype=np.uint16)
    b = lowbit.BF16Weight(bits)
    bits[:] = 0
    assert b.bits.tolist() == [[0x3F80] * 3] * 2
    codes, exps = np.ones((2, 3), dtype=np.int8), np.zeros(2, dtype=np.int32)
    q = lowbit.Int8Weight(codes, exps)
    codes[:] = 5
    exps[:] = 7
    assert q.codes.tolist() == [[1] * 3] * 2 and q.exponents.tolist() == [0, 0]
    w = hashed_uniform((4, 4), 51)
    p = lowbit.pack_one(w, "int8")
    m1, m2 = lowbit.materialize_one(p), lowbit.materialize_one(p)
    assert not np.shares_memory(m1, m2) and not np.shares_memory(m1, p.codes)
    m1[:] = 0
    assert same_bits(lowbit.materialize_one(p), m2)
    w[:] = 0
    assert not np.all(p.codes == 0)


def test_constructors_accept_buffers_and_report_shape():
    b = lowbit.BF16Weight(memoryview(array.array("H", range(6))).cast("B").cast("H", shape=[2, 3]))
    assert b.shape == (2, 3) and b.bits.dtype == np.uint16 and b.bits.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert repr(b) == "BF16Weight(shape=(2, 3))"
    q = lowbit.Int8Weight(np.zeros((2, 3), np.int8), array.array("i", [1, -2]))
    assert q.shape == (2, 3) and q.exponents.dtype == np.int32 and q.exponents.tolist() == [1, -2]
    assert repr(q) == "Int8Weight(shape=(2, 3))"
    assert lowbit.BF16Weight.format == "bfloat16" and lowbit.Int8Weight.format == "int8"


# ---------------------------------------------------------------------------------------- format_of / unpack


def test_format_of_and_is_packed():
    b = lowbit.BF16Weight(np.zeros((1, 1), np.uint16))
    q = lowbit.Int8Weight(np.zeros((1, 1), np.int8), np.zeros(1, np.int32))
    f = np.zeros((1, 1), np.float32)
    assert lowbit.format_of({"a": f}) == "float32"
    assert lowbit.format_of({}) == "float32"
    assert lowbit.format_of({"a": f, "b": b}) == "bfloat16"
    assert lowbit.format_of([q, f, q]) == "int8"  # any iterable
    with pytest.raises(ValueError) as err:
        lowbit.format_of({"a": q, "b": b})
    mixed = "samebits.lowbit: weights mix formats ['bfloat16', 'int8']; store a model one way"
    assert str(err.value) == mixed
    with pytest.raises(ValueError, match="weights mix formats"):
        lowbit.unpack({"a": q, "b": b})
    assert lowbit.is_packed(b) and lowbit.is_packed(q)
    assert not lowbit.is_packed(f) and not lowbit.is_packed(None) and not lowbit.is_packed([[1.0]])
    assert lowbit.FORMATS == ("float32", "bfloat16", "int8")


def test_unpack_and_materialize_one_pass_unpacked_values_through():
    w = {"a": np.zeros((2, 2), np.float32), "n": [1.0, 2.0]}
    same, fmt = lowbit.unpack(w)
    assert same is w and fmt == "float32"
    not_a_dict = [np.zeros((2, 2), np.float32)]
    passed, fmt = lowbit.unpack(not_a_dict)
    assert passed is not_a_dict and fmt == "float32"
    for value in (w["a"], [1.0], "text", None, 3.0):
        assert lowbit.materialize_one(value, "v") is value
    packed = lowbit.pack({"a": hashed_uniform((2, 2), 61), "n": w["n"]}, "int8")
    f32, fmt = lowbit.unpack(packed, "weights")
    assert fmt == "int8" and f32 is not packed and isinstance(f32["a"], np.ndarray)


# ---------------------------------------------------------------------------------------- refusals


def _raises(exc_type, text, fn, *args):
    with pytest.raises(exc_type) as err:
        fn(*args)
    assert str(err.value) == text
    return err


def test_pack_one_refusals():
    no_buffer = "samebits.lowbit: w does not support the buffer protocol"
    _raises(TypeError, no_buffer, lowbit.pack_one, [[1.0]], "int8", "w")
    _raises(TypeError, no_buffer, lowbit.pack_one, object(), "int8", "w")
    _raises(TypeError, no_buffer.replace(" w ", " weight "), lowbit.pack_one, None, "int8")
    for dtype in ("float64", "float16", "int32", "uint16", "bool"):
        _raises(
            TypeError,
            f"samebits.lowbit: w has dtype {dtype}; pack takes float32",
            lowbit.pack_one,
            np.zeros((2, 2), dtype),
            "bfloat16",
            "w",
        )
    _raises(
        TypeError,
        "samebits.lowbit: w has dtype float64; pack takes float32",
        lowbit.pack_one,
        array.array("d", [1.0]),
        "int8",
        "w",
    )
    _raises(
        TypeError,
        "samebits.lowbit: w has dtype >f4; pack takes float32",
        lowbit.pack_one,
        np.zeros((2, 2), ">f4"),
        "int8",
        "w",
    )
    one_d = np.zeros(3, np.float32)
    _raises(ValueError, "samebits.lowbit: w must be 2-D to pack, got shape (3,)", lowbit.pack_one, one_d, "int8", "w")
    _raises(
        ValueError,
        "samebits.lowbit: w must be 2-D to pack, got shape (2, 1, 3)",
        lowbit.pack_one,
        np.zeros((2, 1, 3), np.float32),
        "float32",
        "w",
    )
    _raises(
        ValueError,
        "samebits.lowbit: unknown format 'float16'; one of ('float32', 'bfloat16', 'int8')",
        lowbit.pack_one,
        np.zeros((2, 2), np.float32),
        "float16",
    )
    # The format is checked before the value.
    int4 = "samebits.lowbit: unknown format 'int4'; one of ('float32', 'bfloat16', 'int8')"
    _raises(ValueError, int4, lowbit.pack_one, None, "int4")


def test_pack_refusals():
    _raises(
        ValueError,
        "samebits.lowbit: unknown format 'bf16'; one of ('float32', 'bfloat16', 'int8')",
        lowbit.pack,
        [1.0],  # the format is checked before the dict
        "bf16",
    )
    not_dict = "samebits.lowbit.pack: weights must be a dict keyed by name"
    _raises(TypeError, not_dict, lowbit.pack, [np.zeros((2, 2), np.float32)], "int8")
    _raises(
        TypeError,
        "samebits.lowbit: q_proj.weight has dtype float64; pack takes float32",
        lowbit.pack,
        {"q_proj.weight": np.zeros((2, 2))},
        "int8",
    )
    # Only 2-D values are judged: a float64 1-D value passes through untouched.
    n = np.zeros(3)
    assert lowbit.pack({"n": n}, "int8")["n"] is n


def test_constructor_refusals():
    bits_msg = "samebits.lowbit.BF16Weight: bits must be a 2-D uint16 array"
    bad_bits = [
        [[1, 2]],
        object(),
        np.zeros(3, np.uint16),
        np.zeros((2, 2), np.int16),
        np.zeros((2, 2), np.float32),
        np.zeros((1, 2, 2), np.uint16),
        np.zeros((2, 2), ">u2"),
    ]
    for bad in bad_bits:
        _raises(TypeError, bits_msg, lowbit.BF16Weight, bad)
    codes_msg = "samebits.lowbit.Int8Weight: codes must be a 2-D int8 array"
    exps_msg = "samebits.lowbit.Int8Weight: exponents must be int32 of shape (rows,)"
    good_exps = np.zeros(2, np.int32)
    for bad in ([[1]], np.zeros(2, np.int8), np.zeros((2, 2), np.uint8), np.zeros((2, 2), np.int16)):
        _raises(TypeError, codes_msg, lowbit.Int8Weight, bad, good_exps)
    codes = np.zeros((2, 3), np.int8)
    bad_exponents = [[0, 0], np.zeros(2, np.int64), np.zeros(3, np.int32), np.zeros((2, 1), np.int32)]
    for bad in bad_exponents + [np.zeros(2, np.uint32)]:
        _raises(TypeError, exps_msg, lowbit.Int8Weight, codes, bad)


def test_widen_bf16_refusals():
    no_buffer = "samebits.lowbit.widen_bf16: bits does not support the buffer protocol"
    _raises(TypeError, no_buffer, lowbit.widen_bf16, [1])
    _raises(
        TypeError,
        "samebits.lowbit.widen_bf16: bits must be a uint16 array, got dtype float32",
        lowbit.widen_bf16,
        np.zeros(2, np.float32),
    )


# ---------------------------------------------------------------------------------------- native layer


def test_native_helpers_validate_their_inputs():
    from samebits import _core

    f32 = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError):
        _core._lowbit_to_bf16(np.zeros((2, 3), np.float64))
    with pytest.raises(TypeError):
        _core._lowbit_to_bf16(np.zeros((2, 6), np.float32)[:, ::2])  # not C-contiguous
    with pytest.raises(TypeError):
        _core._lowbit_quantize_int8(np.zeros(3, np.float32))  # not 2-D
    with pytest.raises(TypeError):
        _core._lowbit_from_bf16(np.zeros(3, np.int16))
    with pytest.raises(ValueError, match="exponents"):
        _core._lowbit_dequantize_int8(np.zeros((2, 3), np.int8), np.zeros(3, np.int32))
    out = _core._lowbit_to_bf16(f32)
    assert out.dtype == np.uint16 and out.shape == (2, 3) and not np.shares_memory(out, f32)
    codes, exps = _core._lowbit_quantize_int8(f32)
    assert codes.dtype == np.int8 and exps.dtype == np.int32 and exps.shape == (2,)


def test_package_imports_without_the_native_library(tmp_path):
    """lowbit imports with no compiled module; the first conversion raises ImportError."""
    source = os.path.dirname(lowbit.__file__)
    pkg = tmp_path / "samebits"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(os.path.join(source, "lowbit.py"), pkg / "lowbit.py")
    shutil.copy(os.path.join(source, "_native.py"), pkg / "_native.py")
    script = (
        "import numpy as np\n"
        "from samebits import lowbit\n"
        "w = {'n': np.zeros(3, np.float32)}\n"
        "assert lowbit.pack(w, 'int8')['n'] is w['n']\n"
        "assert lowbit.format_of(w) == 'float32'\n"
        "try:\n"
        "    lowbit.pack_one(np.zeros((2, 2), np.float32), 'int8')\n"
        "except ImportError:\n"
        "    print('import-error')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "import-error"
