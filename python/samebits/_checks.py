"""Argument type checks shared by the Python classes: counts must be integers (numpy integers included),
never floats or bools, so `allocate_state(1.5, 8)` is a TypeError rather than a silent truncation."""

import operator

import numpy as np

from ._native import native


def count(value, what, name):
    """`value` as a Python int; TypeError naming `name` for anything that is not an integer."""
    if isinstance(value, bool):
        raise TypeError(f"{what}: {name} must be an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what}: {name} must be an int, got {type(value).__name__}") from None


def id_array(value):
    """Token ids given as a numpy array (as is), a buffer (without a copy) or a list or tuple, as a numpy
    array; None for anything else, so the caller words the TypeError. The dtype is the caller's check."""
    if type(value) is np.ndarray:  # what memoryview and asarray would give back (decoders call this per token)
        return value
    try:
        return np.asarray(memoryview(value))
    except TypeError:
        return np.asarray(value) if isinstance(value, (list, tuple)) else None


def real(value, what, name):
    """`value` as a Python float; TypeError for anything that is not a real number (bools included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"{what}: {name} must be a number, got {type(value).__name__}")
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what}: {name} must be a number, got {type(value).__name__}")
    return float(value)


# File kinds (include/samebits/file_kind.hpp, in its enum order) that are certainly another format than the
# checkpoint a reader wants: refused by name before the reader runs. Text, JSON, empty and binary files may
# be a damaged checkpoint of the wanted format, so they go to the reader, whose upstream sentences say what
# is wrong with them.
SAMBA_ARCHIVE, SAMBA_JSON, MLP, SAFETENSORS, GGUF, JSON, TEXT, EMPTY, BINARY = range(9)
NOT_SAMBA = (MLP, SAFETENSORS, GGUF)
NOT_MLP = (SAMBA_ARCHIVE, SAMBA_JSON, SAFETENSORS, GGUF)


def refuse_wrong_kind(path, what, foreign, wanted):
    """ValueError "<what>: PATH is a <kind>; from_checkpoint wants <wanted>" when the file's first bytes show
    a kind in `foreign`; an unreadable path is left to the reader (its sentence names the path)."""
    try:
        kind, description = native().file_kind(path, "checkpoint")
    except ValueError:
        return
    if kind in foreign:
        raise ValueError(f"{what}: {path} is {description}; from_checkpoint wants {wanted}")
