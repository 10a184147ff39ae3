"""Reading caller arrays through the buffer protocol: dtype judged from the buffer, never converted."""

import numpy as np

_FLOAT32_FORMATS = ("f", "<f", "=f", "@f")


def probe(value):
    """A memoryview of `value`; TypeError (from memoryview) when it exports no buffer."""
    return memoryview(value)


def is_float32(view):
    """True when a memoryview holds native little-endian float32 items."""
    return view.format in _FLOAT32_FORMATS and view.itemsize == 4


def owned_float32(value):
    """An owned C-contiguous float32 numpy copy of a float32 buffer."""
    return np.array(value, dtype=np.float32, order="C", copy=True)


def contiguous_float32(value):
    """A C-contiguous float32 numpy array over a float32 buffer (no copy when already contiguous)."""
    # asarray(order="C") rather than ascontiguousarray, which turns a 0-d array into shape (1,) and so
    # would make a refusal name a shape the caller never passed.
    return np.asarray(value, dtype=np.float32, order="C")
