"""samebits.lowbit: weight storage as bf16 bits or int8 codes, materialized exactly to float32.

Only the storage is low-bit; all arithmetic stays float32 (docs/formats.md §5). A packed matrix is
materialized bit-exactly before an inference class runs its fp32 path, so a model built from packed
weights computes exactly what the fp32 model computes from ``unpack(packed)[0]``.

    packed = samebits.lowbit.pack(weights, "int8")     # every 2-D tensor packed, the rest kept
    f32, fmt = samebits.lowbit.unpack(packed)          # exact float32 dict and "int8"

The conversions run in the native module, imported on first use so that this module (and the
package) import without it; a missing native library is an ImportError at that first use.
"""

import numpy as np

FORMATS = ("float32", "bfloat16", "int8")

__all__ = [
    "FORMATS",
    "BF16Weight",
    "Int8Weight",
    "pack",
    "unpack",
    "materialize",
    "format_of",
    "is_packed",
    "pack_one",
    "materialize_one",
    "widen_bf16",
]


def _native():
    # Deferred so that importing samebits never needs the compiled module; ImportError on first use.
    from ._native import native

    return native()


# ------------------------------------------------------------------ buffer inspection


def _buffer_array(obj):
    """A zero-copy numpy view of ``obj``'s buffer, or None when ``obj`` exports no buffer."""
    if isinstance(obj, np.ndarray):
        return obj
    try:
        view = memoryview(obj)
    except TypeError:
        return None
    try:
        return np.asarray(view)
    except (TypeError, ValueError, NotImplementedError):
        return _UnreadableBuffer(view.format)


class _UnreadableBuffer:
    """A buffer whose element format numpy cannot read; only its format is known."""

    def __init__(self, fmt):
        self.format = fmt


def _dtype_name(obj, arr):
    """The dtype to name in a refusal: the object's own dtype name when it carries one (so a
    bfloat16 or float16 array is named as such), else what its buffer reads as."""
    name = getattr(getattr(obj, "dtype", None), "name", None)
    if isinstance(arr, _UnreadableBuffer):
        return name if isinstance(name, str) else repr(arr.format)
    if not arr.dtype.isnative:
        return arr.dtype.str  # e.g. '>f4': a byte-swapped float32 is not native float32
    return name if isinstance(name, str) else arr.dtype.name


def _is_native(arr, dtype):
    return not isinstance(arr, _UnreadableBuffer) and arr.dtype == np.dtype(dtype) and arr.dtype.isnative


# ------------------------------------------------------------------ containers


class BF16Weight:
    """A 2-D float32 weight stored as bf16 bits (``bits``: uint16, C order, an independent copy)."""

    format = "bfloat16"

    def __init__(self, bits):
        arr = _buffer_array(bits)
        if arr is None or not _is_native(arr, np.uint16) or arr.ndim != 2:
            raise TypeError("samebits.lowbit.BF16Weight: bits must be a 2-D uint16 array")
        self._set(np.array(arr, dtype=np.uint16, order="C", copy=True))

    @classmethod
    def _adopt(cls, bits):
        """Wrap a fresh C-order uint16 array this module just produced, without another copy."""
        weight = cls.__new__(cls)
        weight._set(bits)
        return weight

    def _set(self, bits):
        self.bits = bits
        self.shape = tuple(int(s) for s in bits.shape)

    def __repr__(self):
        return f"BF16Weight(shape={self.shape})"


class Int8Weight:
    """A 2-D float32 weight stored as int8 codes (rows, cols) with one int32 power-of-two exponent per
    row: element (r, c) is ``codes[r, c] * 2**exponents[r]``. Both arrays are independent copies."""

    format = "int8"

    def __init__(self, codes, exponents):
        q = _buffer_array(codes)
        if q is None or not _is_native(q, np.int8) or q.ndim != 2:
            raise TypeError("samebits.lowbit.Int8Weight: codes must be a 2-D int8 array")
        e = _buffer_array(exponents)
        if e is None or not _is_native(e, np.int32) or tuple(e.shape) != (q.shape[0],):
            raise TypeError("samebits.lowbit.Int8Weight: exponents must be int32 of shape (rows,)")
        self._set(np.array(q, dtype=np.int8, order="C", copy=True), np.array(e, dtype=np.int32, order="C", copy=True))

    @classmethod
    def _adopt(cls, codes, exponents):
        """Wrap fresh arrays this module just produced, without another copy."""
        weight = cls.__new__(cls)
        weight._set(codes, exponents)
        return weight

    def _set(self, codes, exponents):
        self.codes = codes
        self.exponents = exponents
        self.shape = tuple(int(s) for s in codes.shape)

    def __repr__(self):
        return f"Int8Weight(shape={self.shape})"


def is_packed(value):
    """True for a BF16Weight or an Int8Weight."""
    return isinstance(value, (BF16Weight, Int8Weight))


def format_of(weights):
    """The one packed format among ``weights`` (a dict's values, or any iterable), or "float32" when
    nothing is packed. Two packed formats together are refused: a model is stored one way."""
    values = weights.values() if hasattr(weights, "values") else weights
    found = {v.format for v in values if is_packed(v)}
    if not found:
        return "float32"
    if len(found) > 1:
        raise ValueError(f"samebits.lowbit: weights mix formats {sorted(found)}; store a model one way")
    return found.pop()


# ------------------------------------------------------------------ packing and materializing


def _check_format(fmt):
    if fmt not in FORMATS:
        raise ValueError(f"samebits.lowbit: unknown format {fmt!r}; one of {FORMATS}")


def _float32_c(value, name):
    """``value`` as a C-contiguous native float32 array (zero-copy when it already is one)."""
    arr = _buffer_array(value)
    if arr is None:
        raise TypeError(f"samebits.lowbit: {name} does not support the buffer protocol")
    if not _is_native(arr, np.float32):
        raise TypeError(f"samebits.lowbit: {name} has dtype {_dtype_name(value, arr)}; pack takes float32")
    return np.ascontiguousarray(arr)


def pack_one(value, fmt, name="weight"):
    """One 2-D float32 tensor in ``fmt``: a BF16Weight, an Int8Weight, or for "float32" a copy."""
    _check_format(fmt)
    a = _float32_c(value, name)
    if a.ndim != 2:
        raise ValueError(f"samebits.lowbit: {name} must be 2-D to pack, got shape {tuple(a.shape)}")
    if fmt == "float32":
        return a.copy()
    core = _native()
    if fmt == "bfloat16":
        return BF16Weight._adopt(core._lowbit_to_bf16(a))
    codes, exponents = core._lowbit_quantize_int8(a)
    return Int8Weight._adopt(codes, exponents)


def materialize_one(value, name="weight"):
    """A packed tensor as its exact float32 (rows, cols) array; anything else is returned unchanged."""
    if isinstance(value, BF16Weight):
        return _native()._lowbit_from_bf16(np.ascontiguousarray(value.bits))
    if isinstance(value, Int8Weight):
        return _native()._lowbit_dequantize_int8(
            np.ascontiguousarray(value.codes), np.ascontiguousarray(value.exponents)
        )
    return value


def widen_bf16(bits):
    """bf16 bits (uint16) of any rank to float32 of the same shape, exact (a 16-bit shift)."""
    arr = _buffer_array(bits)
    if arr is None:
        raise TypeError("samebits.lowbit.widen_bf16: bits does not support the buffer protocol")
    if not _is_native(arr, np.uint16):
        raise TypeError(
            f"samebits.lowbit.widen_bf16: bits must be a uint16 array, got dtype {_dtype_name(bits, arr)}"
        )
    return _native()._lowbit_from_bf16(np.ascontiguousarray(arr))


def _as_given(value):
    """``(value, ndim)`` for a value with a buffer, as given; a (nested) list or tuple becomes a
    float32 array; any other object passes through untouched with ndim None."""
    arr = _buffer_array(value)
    if arr is not None:
        return value, (None if isinstance(arr, _UnreadableBuffer) else arr.ndim)
    if isinstance(value, (list, tuple)):
        converted = np.array(value, dtype=np.float32)
        return converted, converted.ndim
    return value, None


def pack(weights, fmt):
    """A new dict: every 2-D tensor of ``weights`` packed in ``fmt``, every other value as given.

    Selection is by rank, not by name. An already packed tensor in ``fmt`` is copied as it is (never
    materialized); one in another format is materialized first. With "float32" nothing is packed
    and packed tensors come back materialized."""
    _check_format(fmt)
    if not hasattr(weights, "keys"):
        raise TypeError("samebits.lowbit.pack: weights must be a dict keyed by name")
    out = {}
    for name, value in weights.items():
        if is_packed(value):
            if value.format == fmt:
                # Fresh buffers with the same bytes: no float32 expansion and no second rounding.
                if isinstance(value, BF16Weight):
                    out[name] = BF16Weight(value.bits)
                else:
                    out[name] = Int8Weight(value.codes, value.exponents)
                continue
            value = materialize_one(value, name)
        given, ndim = _as_given(value)
        if fmt != "float32" and ndim == 2:
            out[name] = pack_one(given, fmt, name)
        else:
            out[name] = given
    return out


def unpack(weights, what="weights"):
    """``(weights with every packed tensor materialized, format name)``; the hook the inference classes
    call. A dict with nothing packed comes back as the same object; a non-dict as ``(weights,
    "float32")``. ``what`` names the weights for callers and does not change the result."""
    if not hasattr(weights, "keys"):
        return weights, "float32"
    fmt = format_of(weights)
    if fmt == "float32":
        return weights, fmt
    return {name: materialize_one(v, name) for name, v in weights.items()}, fmt


materialize = unpack
