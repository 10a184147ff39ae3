"""Surface pieces every block inference class shares: strict float32 inputs, ragged batches, refusals.

Each block module passes its own class path ("TransformerBlock.forward") and, for dtype refusals, its
own profile sentence, so messages keep upstream's per-block wording while the logic lives here once.
"""

import numpy as np

from . import _buffers
from . import lowbit as _lowbit
from ._state_file import SavedState

PACKAGE = "samebits"

# What follows "<name> has dtype <d>; " in the three Mamba blocks' dtype refusals (upstream wording).
MAMBA_DTYPE_SENTENCE = (
    "this surface is float32 ONLY (the fp32 Mamba profiles). bfloat16 and float16 are refused BY NAME: "
    "a reduced-precision run mixes cast boundaries and is a different profile; float64 is refused rather "
    "than downcast, so the bits that ran are bits you made. Convert yourself and pass float32."
)


def float32_strict(value, what, name, dtype_sentence):
    """`value` as a C-contiguous float32 numpy array (no copy when it already is one).

    Refuses, by type, anything without a buffer and any dtype but float32; `dtype_sentence` is the
    block's explanation that follows "<name> has dtype <d>; " (upstream wording, per block)."""
    try:
        view = _buffers.probe(value)
    except TypeError:
        raise TypeError(
            f"{PACKAGE} {what}: {name} is a {type(value).__name__}, which does not support the buffer "
            "protocol; this surface is float32 ONLY and takes a float32 array (a numpy array, an "
            "array.array('f') or a memoryview). Convert yourself and pass float32."
        ) from None
    if not _buffers.is_float32(view):
        try:
            dtype = np.asarray(value).dtype
            dtype = dtype.name if dtype.isnative else dtype.str  # '>f4' is not "float32" to this surface
        except (TypeError, ValueError):  # a buffer numpy cannot read: name its format
            dtype = f"format {view.format!r}"
        raise TypeError(f"{PACKAGE} {what}: {name} has dtype {dtype}; {dtype_sentence}")
    return _buffers.contiguous_float32(value)


def lengths_for(lengths, batch, length, what):
    """`lengths` as a tuple of `batch` ints, each in [1, length]; refused by name otherwise."""
    try:
        values = list(lengths)
    except TypeError:
        raise TypeError(f"{PACKAGE} {what}: lengths must be a sequence of {batch} integers") from None
    if len(values) != batch:
        raise ValueError(f"{PACKAGE} {what}: lengths has {len(values)} entries but the batch has B = {batch}")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{PACKAGE} {what}: lengths[{i}] is a bool, not an integer")
        try:
            n = v.__index__()
        except AttributeError:
            raise TypeError(f"{PACKAGE} {what}: lengths[{i}] = {v!r} is not an integer") from None
        if n < 1 or n > length:
            raise ValueError(
                f"{PACKAGE} {what}: lengths[{i}] = {n} is outside [1, L = {length}] "
                "(right padding: a row has at least one real position and at most L)"
            )
        out.append(int(n))
    return tuple(out)


def refuse_state_with_lengths(state, what):
    if state is not None:
        raise ValueError(
            f"{PACKAGE} {what}: lengths= (a ragged, right-padded batch) cannot carry a state; a decode "
            "continuation of a ragged batch would need a position per row, which no state here has. "
            "Run the ragged prefill with state=None, or continue each sequence as its own batch"
        )


def ragged_forward(run, x, state, lengths, what):
    """The one ragged spelling (docs/blocks.md §6): refuse a carried state, check `lengths` against x's
    (B, L), run `run` on a copy of x whose padding positions are +0.0 (ids: 0), then overwrite the
    padding positions of its (B, L, ...) output with +0.0. x is C-contiguous and already checked."""
    refuse_state_with_lengths(state, what)
    batch, length = int(x.shape[0]), int(x.shape[1])
    lens = lengths_for(lengths, batch, length, what)
    padded = np.zeros_like(x)
    for i, n in enumerate(lens):
        padded[i, :n] = x[i, :n]
    out = np.asarray(run(padded))
    for i, n in enumerate(lens):
        out[i, n:] = 0
    return out


def ordered_weights(engine_type, block, weights, dtype_sentence):
    """(names, float32 arrays, weight_format) of a Mamba-style block's weight dict, refused in upstream's
    order: packed matrices materialized, then the key set, then per tensor its dtype and its shape (the norm
    weight first, which fixes d_model). `engine_type` is the native class with the static checks."""
    weights, weight_format = _lowbit.unpack(weights, "weights")
    names = engine_type.weight_names()
    if not hasattr(weights, "keys"):
        raise TypeError(
            f"{PACKAGE} {block}: weights must be a dict of float32 arrays keyed by the upstream parameter "
            f"names {names}"
        )
    engine_type.check_keys([k if isinstance(k, str) else repr(k) for k in weights.keys()])
    arrays = []
    d_model = None
    for name in names:
        array = float32_strict(weights[name], block, name, dtype_sentence)
        if d_model is None:
            d_model = engine_type.check_norm_weight(list(array.shape))
        else:
            engine_type.check_weight(name, list(array.shape), d_model)
        arrays.append(array)
    return names, arrays, weight_format


def state_piece(value, what, name, shape):
    """`value` checked as one state piece (float32; of exactly `shape` unless that is None) for a copy into
    the engine's memory: a C-contiguous float32 array."""
    try:
        view = _buffers.probe(value)
    except TypeError:
        raise TypeError(
            f"{PACKAGE} {what}: state buffer {name} must be a float32 array, got {type(value).__name__}"
        ) from None
    if not _buffers.is_float32(view):
        raise TypeError(
            f"{PACKAGE} {what}: state buffer {name} has dtype {np.asarray(value).dtype.name}, want float32 "
            "(the state is part of the fp32 profile and round-trips byte for byte)"
        )
    array = _buffers.contiguous_float32(value)
    if shape is not None and tuple(array.shape) != tuple(shape):
        raise ValueError(f"{PACKAGE} {what}: state buffer {name} has shape {tuple(array.shape)}, want {tuple(shape)}")
    return array


class NativeState(SavedState):
    """What the Python faces of the engine's own states share: `_native` is the C++ state object, which owns
    the buffers and their layout; this class only names it (and inherits save / load)."""

    @classmethod
    def _adopt(cls, engine_state):
        """The Python face of an engine-owned state."""
        state = cls.__new__(cls)
        state._native = engine_state
        state._adopted()
        return state

    def _adopted(self):
        """Per-class bookkeeping once `_native` is set (none by default)."""

    def _before_change(self, caller=None):
        """Called before anything edits the state (nothing to settle by default)."""

    @property
    def batch_size(self):
        return self._native.batch_size

    def copy(self):
        """An independent state with the same bits."""
        return type(self)._adopt(self._native.clone())


def forwarded_property(holder, name, doc=None, convert=None):
    """A property reading `name` off the native object held in the attribute `holder` (`_engine` of a model,
    tokenizer or CausalLM state, `_native` of a block state); with `convert`, also writing it (converted,
    after the state's `_before_change`), the native layer judging the value."""

    def getter(self):
        return getattr(getattr(self, holder), name)

    if convert is None:
        return property(getter, doc=doc)

    def setter(self, value):
        self._before_change()
        setattr(getattr(self, holder), name, convert(value))

    return property(getter, setter, doc=doc)


def require_state(block, state, allocate):
    """A decode step refuses a missing state by name; `allocate` is the call that makes a fresh one. For the
    blocks whose native step takes no missing state (the transformer); the Mamba blocks' native step refuses
    None itself with these words."""
    if state is None:
        raise ValueError(
            f"{PACKAGE} {block}.step: state is required (a decode step continues a sequence; "
            f"{allocate} makes the fresh one)"
        )


def check_state_type(state, state_type, what):
    """A state of the wrong class is refused by type, naming the class that is wanted."""
    if state is not None and not isinstance(state, state_type):
        raise TypeError(
            f"{PACKAGE} {what}: state must be a {state_type.__name__} (allocate_state(B) makes one), "
            f"got {type(state).__name__}"
        )
