"""samebits._gguf: GGUF files as samebits reads them (docs/gguf.md): every container check on open, the
metadata and tensor table as Python values, and each tensor's exact float32 values.

    info = samebits._gguf.read("model.gguf")          # dict: version, alignment, metadata, tensors, ...
    w = samebits._gguf.tensor("model.gguf", "blk.0.attn_q.weight")   # float32, row-major shape
    y = samebits._gguf.dequantize("Q4_K", raw_uint8_blocks, count)    # float32 (count,)

The model loader built on this reader comes later; this module is the inspection and testing surface.
"""

import os

import numpy as np

__all__ = ["TYPES", "read", "tensor", "dequantize", "type_name"]

# The ggml type ids samebits decodes (docs/gguf.md §5).
TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11,
         "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "BF16": 30}


def _native():
    from ._native import native

    return native()


def _path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("samebits._gguf: path must be a str or os.PathLike, not %s" % type(path).__name__)
    return os.fspath(path)


def read(path):
    """The container of a GGUF file after every check: a dict with version, file_bytes, alignment,
    data_offset, metadata (a list of (key, type, element type or None, value) in file order) and tensors
    (dicts of name, ne, type, type_name, offset, nbytes). A refusal is a ValueError naming file, field and
    value; a missing file a FileNotFoundError."""
    return _native()._gguf_open(_path(path))


def tensor(path, name):
    """The exact float32 values of tensor `name`, in its row-major shape (GGUF's ne reversed). A non-finite
    value or scale is a ValueError naming the block; an unknown name a KeyError."""
    if not isinstance(name, str):
        raise TypeError("samebits._gguf: name must be a str, not %s" % type(name).__name__)
    return _native()._gguf_tensor(_path(path), name)


def type_name(type_id):
    """The name of a ggml type id ("Q4_K", "IQ2_XXS", "removed", "unknown")."""
    return _native()._gguf_type_name(int(type_id))


def dequantize(qtype, data, count):
    """The exact float32 values of `count` elements stored as ggml type `qtype` (a name of TYPES or an id) in
    the bytes `data` (bytes or a uint8 array): a 1-D float32 array. Any other type is a ValueError naming it,
    as is a non-finite value or scale (naming the block) or a size that is not whole blocks."""
    if isinstance(qtype, str):
        if qtype not in TYPES:
            raise ValueError("samebits._gguf: ggml type %r is refused by name; samebits decodes %s"
                             % (qtype, ", ".join(TYPES)))
        qtype = TYPES[qtype]
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = np.frombuffer(data, dtype=np.uint8)
    data = np.ascontiguousarray(data)
    if data.dtype != np.uint8:
        raise TypeError("samebits._gguf: data must be bytes or a uint8 array, not %s" % data.dtype)
    if int(count) < 0:
        raise ValueError("samebits._gguf: count must be non-negative, got %d" % int(count))
    return _native()._gguf_dequantize(int(qtype), data.reshape(-1), int(count))
