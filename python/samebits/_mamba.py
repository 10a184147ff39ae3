"""Mamba1BlockInference / Mamba2BlockInference and their states: forward-only Mamba-1 and Mamba-2 (SSD)
blocks on the CPU, bit-exact with mojolearn's identical fp32 profiles."""

import numpy as np

from . import _checks
from ._blocks import (MAMBA_DTYPE_SENTENCE as _DTYPE_SENTENCE, PACKAGE, NativeState, check_state_type,
    float32_strict, forwarded_property, ordered_weights, ragged_forward, state_piece)
from ._native import native

_CONV, _M1_STATE = 4, 16
_CHUNK, _HEAD_DIM, _M2_STATE = 256, 64, 128


def _piece_property(name, shape_of, what):
    def getter(self):
        return getattr(self._native, name)

    def setter(self, value):
        np.copyto(getattr(self._native, name), state_piece(value, what, name, shape_of(self)), casting="no")

    return property(getter, setter, doc=f"The {name} piece: a writable view of the engine's memory.")


def _batch_size(block, batch_size):
    b = _checks.count(batch_size, f"{PACKAGE} {block}.allocate_state", "batch_size")
    if b < 1:
        raise ValueError(f"{PACKAGE} {block}: batch_size must be positive, got {batch_size!r}")
    return b


class _MambaInference:
    """Shared surface of the two block classes: forward / __call__ / step / backward around an engine."""

    _BLOCK = ""
    _STATE = None

    def forward(self, x, state=None, *, lengths=None):
        """(B, L, d_model) float32 in, the block output (B, L, d_model) float32 out (residual included).

        `state=None` runs from a zero state and discards it. A state from `allocate_state(B)` is read and
        updated in place, so a later `forward` or `step` continues the sequence with the same bits as one
        forward over the whole of it. `lengths` runs a ragged right-padded batch (stateless only): real
        positions equal each row run alone, padding positions are +0.0."""
        if lengths is not None:
            what = f"{type(self).__name__}.forward"
            x = float32_strict(x, what, "x", _DTYPE_SENTENCE)
            self._engine.check_tokens(list(x.shape), False, what)
            return ragged_forward(lambda padded: self._call(padded, None, False), x, state, lengths, what)
        return self._call(x, state, False)

    __call__ = forward

    def step(self, x, state):
        """One decode token per batch row: x (B, 1, d_model) or (B, d_model), the output has x's shape.
        The state is required (the native step refuses None) and updated in place."""
        return self._call(x, state, True)

    def backward(self, x, grad_output):
        """Always refused: inference is forward only."""
        self._engine.backward()

    def _checked(self, x, state, step):
        what = f"{self._BLOCK}.step" if step else f"{self._BLOCK}.forward"
        x = float32_strict(x, what, "x", _DTYPE_SENTENCE)
        self._engine.check_tokens(list(x.shape), step, what)
        check_state_type(state, self._STATE, what)
        return x, (None if state is None else state._native)

    def _reference(self, x, state=None, step=False):
        """The scalar twin's output for the same call (tests and cross-checks)."""
        x, engine_state = self._checked(x, state, step)
        call = self._engine.step if step else self._engine.forward
        return call(x, engine_state, True)


class Mamba1State(NativeState):
    """The carried Mamba-1 state in the engine's memory: `conv_window` (B, d_inner, 4), the last four
    pre-conv inputs per channel, oldest first; `h` (B, d_inner, 16), the SSM state. Zeros before the
    first token.

    Each piece is a writable zero-copy numpy view of the memory the engine reads and writes: editing a
    cell through it changes the next call. Assigning a whole piece copies the given bits in.
    `allocate_state(B)` makes a zero state; `Mamba1State(conv_window, h)` builds one from arrays (e.g.
    rows sliced out of other states), copying them."""

    def __init__(self, conv_window, h):
        what = "Mamba1State"
        window = state_piece(conv_window, what, "conv_window", None)
        if window.ndim != 3 or window.shape[2] != _CONV or min(window.shape) < 1:
            raise ValueError(f"{PACKAGE} {what}: conv_window must be (B, d_inner, 4), got shape {window.shape}")
        batch, d_inner = int(window.shape[0]), int(window.shape[1])
        h_array = state_piece(h, what, "h", (batch, d_inner, _M1_STATE))
        self._native = native().Mamba1StateEngine(batch, d_inner)
        np.copyto(self._native.conv_window, window, casting="no")
        np.copyto(self._native.h, h_array, casting="no")

    def __repr__(self):
        return f"Mamba1State(batch_size={self.batch_size}, d_inner={self._native.d_inner})"


Mamba1State.conv_window = _piece_property(
    "conv_window", lambda s: (s.batch_size, s._native.d_inner, _CONV), "Mamba1State")
Mamba1State.h = _piece_property("h", lambda s: (s.batch_size, s._native.d_inner, _M1_STATE), "Mamba1State")


class Mamba1BlockInference(_MambaInference):
    """Forward-only Mamba-1 block (profile mojolearn.identical.mamba1.fp32.v1) on the CPU.

    Takes the ten named weights of `Mamba1Block` (norm.weight, in_proj.weight, conv1d.weight,
    conv1d.bias, x_proj.weight, dt_proj.weight, dt_proj.bias, A_log, D, out_proj.weight); any d_model >= 1,
    d_inner = 2 * d_model, dt_rank = ceil(d_model / 16), d_state 16. Weights may be packed by
    `samebits.lowbit`; they are materialized exactly to float32, copied, and `weight_format` records the
    format given. `forward(x, lengths=None)` runs from a zero state; `allocate_state(B)`,
    `forward(x, state)` and `step(x, state)` carry a `Mamba1State`, and decoding one token at a time gives
    the same bits as one forward pass over the whole sequence. `backward` is refused."""

    _BLOCK = "Mamba1Block"
    _STATE = Mamba1State

    def __init__(self, weights):
        engine_type = native().Mamba1Engine
        names, arrays, weight_format = ordered_weights(engine_type, self._BLOCK, weights, _DTYPE_SENTENCE)
        self._engine = engine_type(names, arrays, weight_format)
        self.weight_format = weight_format
        self.d_model = self._engine.d_model
        self.d_inner = self._engine.d_inner
        self.dt_rank = self._engine.dt_rank

    def allocate_state(self, batch_size):
        """A zero `Mamba1State` for `batch_size` rows."""
        return Mamba1State._adopt(self._engine.allocate_state(_batch_size(self._BLOCK, batch_size)))

    def _call(self, x, state, step):
        x, engine_state = self._checked(x, state, step)
        return (self._engine.step if step else self._engine.forward)(x, engine_state)

    def __repr__(self):
        return f"Mamba1BlockInference(d_model={self.d_model}, weight_format={self.weight_format!r})"


class Mamba2State(NativeState):
    """The carried Mamba-2 state in the engine's memory. With H = 2 * d_model / 64 heads and
    CD = 2 * d_model + 256 conv channels: `conv_window` (B, CD, 4), the last four pre-conv xBC inputs,
    oldest first; `h` (B, H, 64, 128), the SSM state at the last COMPLETED chunk boundary (a non-zero h
    on a fresh state is upstream's initial_states); the open chunk's rows `buffer_xbc` (B, 256, CD),
    post-conv/SiLU, and `buffer_dtraw` (B, 256, H), raw dt; `buffered_tokens` in [0, 256), the rows of
    the open chunk. Zeros (and 0) before the first token.

    Each array is a writable zero-copy numpy view of the memory the engine reads and writes; assigning a
    whole piece copies the given bits in. `Mamba2State(conv_window, h, buffer_xbc, buffer_dtraw,
    buffered_tokens)` builds one from arrays, copying them."""

    def __init__(self, conv_window, h, buffer_xbc, buffer_dtraw, buffered_tokens=0):
        what = "Mamba2State"
        window = state_piece(conv_window, what, "conv_window", None)
        cd = int(window.shape[1]) if window.ndim == 3 else 0
        if window.ndim != 3 or window.shape[2] != _CONV or window.shape[0] < 1 or cd < 320 or (cd - 256) % 64:
            raise ValueError(
                f"{PACKAGE} {what}: conv_window must be (B, 2*d_model + 256, 4) with d_model a multiple of 32, "
                f"got shape {window.shape}"
            )
        batch, d_model = int(window.shape[0]), (cd - 256) // 2
        self._native = native().Mamba2StateEngine(batch, d_model)
        for name, value in (("conv_window", window), ("h", h), ("buffer_xbc", buffer_xbc),
                            ("buffer_dtraw", buffer_dtraw)):
            target = getattr(self._native, name)
            np.copyto(target, state_piece(value, what, name, target.shape), casting="no")
        self.buffered_tokens = buffered_tokens

    buffered_tokens = forwarded_property(
        "_native", "buffered_tokens", "Rows of the open chunk (the native layer refuses a value outside [0, 256)).",
        int)

    def __repr__(self):
        return (f"Mamba2State(batch_size={self.batch_size}, nheads={self._native.nheads}, "
                f"buffered_tokens={self.buffered_tokens})")


Mamba2State.conv_window = _piece_property(
    "conv_window", lambda s: (s.batch_size, s._native.conv_dim, _CONV), "Mamba2State")
Mamba2State.h = _piece_property(
    "h", lambda s: (s.batch_size, s._native.nheads, _HEAD_DIM, _M2_STATE), "Mamba2State")
Mamba2State.buffer_xbc = _piece_property(
    "buffer_xbc", lambda s: (s.batch_size, _CHUNK, s._native.conv_dim), "Mamba2State")
Mamba2State.buffer_dtraw = _piece_property(
    "buffer_dtraw", lambda s: (s.batch_size, _CHUNK, s._native.nheads), "Mamba2State")


class Mamba2BlockInference(_MambaInference):
    """Forward-only Mamba-2 (SSD) block (profile mojolearn.identical.mamba2.fp32.v1) on the CPU.

    Takes the nine named weights of `Mamba2Block` (block_norm.weight, in_proj.weight, conv1d.weight,
    conv1d.bias, dt_bias, A_log, D, norm.weight, out_proj.weight) and `dt_limit` (lo, hi), default
    (0.0, inf), converted to float32 unjudged. d_model must be a multiple of 32 (H = d_model / 32 heads of
    64, d_state 128, chunk 256). Weights may be packed by `samebits.lowbit`. `forward(x, lengths=None)`
    runs from a zero state; `allocate_state(B)`, `forward(x, state)` and `step(x, state)` carry a
    `Mamba2State`; decoding one token at a time gives the same bits as one forward pass, at a cost per
    step that does not grow with the open chunk's square. After every call `h_last_` holds the state
    after the final (padded) chunk, which is not the resumption state kept in `state.h`; it is evaluated
    when first read (or before the state is next used or viewed). `backward` is refused."""

    _BLOCK = "Mamba2Block"
    _STATE = Mamba2State

    def __init__(self, weights, *, dt_limit=(0.0, float("inf"))):
        engine_type = native().Mamba2Engine
        names, arrays, weight_format = ordered_weights(engine_type, self._BLOCK, weights, _DTYPE_SENTENCE)
        lo, hi = dt_limit
        self.dt_limit = (float(lo), float(hi))
        self._engine = engine_type(names, arrays, self.dt_limit[0], self.dt_limit[1], weight_format)
        self.weight_format = weight_format
        self.d_model = self._engine.d_model
        self.d_inner = self._engine.d_inner
        self.nheads = self._engine.nheads
        self.conv_dim = self._engine.conv_dim
        self._report = None
        self._h_last = None

    def allocate_state(self, batch_size):
        """A zero `Mamba2State` for `batch_size` rows; set `.h` before the first call for initial_states."""
        return Mamba2State._adopt(self._engine.allocate_state(_batch_size(self._BLOCK, batch_size)))

    def _call(self, x, state, step):
        x, engine_state = self._checked(x, state, step)
        # The previous report is dropped once this call succeeds; unread, it is never evaluated.
        superseded = self._report if self._h_last is None else None
        y, report = (self._engine.step if step else self._engine.forward)(x, engine_state, False, superseded)
        self._report, self._h_last = report, None
        return y

    def _reference(self, x, state=None, step=False):
        y, report = super()._reference(x, state, step)
        self._report, self._h_last = report, None
        return y

    @property
    def h_last_(self):
        """(B, H, 64, 128) float32: the SSM state after the final (padded) chunk of the last call."""
        if self._report is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute 'h_last_' (no call yet)")
        if self._h_last is None:
            self._h_last = self._report.h_last()
        return self._h_last

    def __repr__(self):
        return (f"Mamba2BlockInference(d_model={self.d_model}, nheads={self.nheads}, dt_limit={self.dt_limit}, "
                f"weight_format={self.weight_format!r})")
