"""Mamba3BlockInference and Mamba3State: the forward-only Mamba-3 (SISO) block on the CPU, bit-exact.

The reports after a call (h_last_, k_last_, v_last_, theta_last_) are a pure function of the state the call
left behind. A block therefore computes them when they are first read, from that state, as long as nothing
could have changed it since: anything that might (a piece view handed out, a piece or scalar assigned,
Input_States, the next call on the state) first makes every block with reports pending on that state
compute them. A call made while views of its state are alive computes its reports at once.
"""

import weakref

import numpy as np

from . import _checks
from ._blocks import (MAMBA_DTYPE_SENTENCE as _DTYPE_SENTENCE, PACKAGE, NativeState, check_state_type,
    float32_strict, forwarded_property, ordered_weights, ragged_forward, state_piece)
from ._native import native

_BLOCK = "Mamba3Block"
_PIECES = (
    "theta", "h", "buffer_qrot", "buffer_krot", "buffer_v",
    "buffer_dt", "buffer_sig", "buffer_adt", "pending_k", "pending_v",
)
_CHUNK, _STATE_DIM, _HEAD_DIM, _ANGLES = 64, 128, 64, 32


def _piece_shapes(batch, heads):
    b, h, q = batch, heads, _CHUNK
    return {
        "theta": (b, h, _ANGLES),
        "h": (b, h, _HEAD_DIM, _STATE_DIM),
        "buffer_qrot": (b, q, h, _STATE_DIM),
        "buffer_krot": (b, q, h, _STATE_DIM),
        "buffer_v": (b, q, h, _HEAD_DIM),
        "buffer_dt": (b, q, h),
        "buffer_sig": (b, q, h),
        "buffer_adt": (b, q, h),
        "pending_k": (b, h, _STATE_DIM),
        "pending_v": (b, h, _HEAD_DIM),
    }


class Mamba3State(NativeState):
    """The carried Mamba-3 state (ten float32 pieces, `buffered_tokens`, `pending`), in the engine's memory.

    With H = 2 * d_model / 64 heads: `theta` (B, H, 32) the angles; `h` (B, H, 64, 128) the sealed
    chunk-boundary state (entering the last working chunk); the open chunk's rows `buffer_qrot`,
    `buffer_krot` (B, 64, H, 128), `buffer_v` (B, 64, H, 64), `buffer_dt`, `buffer_sig`, `buffer_adt`
    (B, 64, H); the Input_States pair `pending_k` (B, H, 128) and `pending_v` (B, H, 64);
    `buffered_tokens` in [1, 64] after any call (0 only before the first token) and `pending`.

    Every piece is a writable zero-copy numpy view of the memory the engine reads and writes: editing
    a cell through it changes the next call. Assigning a whole piece copies the given bits in.
    `allocate_state(B)` makes a zero state; `Mamba3State(theta, h, ..., pending_v, buffered_tokens,
    pending)` builds one from arrays (e.g. rows sliced out of other states)."""

    def __init__(self, theta, h, buffer_qrot, buffer_krot, buffer_v, buffer_dt, buffer_sig, buffer_adt,
                 pending_k, pending_v, buffered_tokens=0, pending=False):
        what = "Mamba3State"
        theta_array = state_piece(theta, what, "theta", np.shape(theta))
        if theta_array.ndim != 3 or theta_array.shape[2] != _ANGLES or min(theta_array.shape) < 1:
            raise ValueError(f"{PACKAGE} {what}: theta must be (B, H, {_ANGLES}), got shape {theta_array.shape}")
        batch, heads = int(theta_array.shape[0]), int(theta_array.shape[1])
        values = (theta, h, buffer_qrot, buffer_krot, buffer_v, buffer_dt, buffer_sig, buffer_adt, pending_k,
                  pending_v)
        shapes = _piece_shapes(batch, heads)
        arrays = [state_piece(v, what, n, shapes[n]) for v, n in zip(values, _PIECES)]
        self._native = native().Mamba3StateEngine(batch, heads)
        self._adopted()
        for index, array in enumerate(arrays):
            np.copyto(self._native.piece(index), array, casting="no")
        self.buffered_tokens = buffered_tokens
        self.pending = pending

    def _adopted(self):
        self._readers = weakref.WeakSet()  # blocks whose reports are still to be computed from this state

    def _before_change(self, caller=None):
        """Something may change the state: blocks reading their reports from it compute them now. A block
        about to call on this state (`caller`) is skipped: the call replaces its reports (and a refused call
        changes nothing, so its pending reports stay valid)."""
        if not self._readers:  # the common case, checked without iterating the weak set
            return
        for block in list(self._readers):
            if block is not caller:
                block._settle_reports()
                self._readers.discard(block)

    def _piece_view(self, index):
        self._before_change()  # the view may be written at any time from now on (it pins the engine state)
        return self._native.piece(index)

    nheads = forwarded_property("_native", "heads", "Heads H = 2 * d_model / 64.")
    buffered_tokens = forwarded_property(
        "_native", "buffered_tokens",
        "Valid rows of the open-chunk buffer (the native layer refuses a value outside [0, 64]).",
        int)
    pending = forwarded_property(
        "_native", "pending", "True while theta / h / pending_k / pending_v hold an Input_States continuation.",
        bool)

    def set_input_states(self, theta, h, k, v):
        """Upstream's four-piece Input_States continuation: copies the given float32 bits into theta, h,
        pending_k and pending_v and marks them pending. Only a fresh state may carry it; the next call
        refuses a mid-sequence state (as upstream's native layer does)."""
        what = "Mamba3State.set_input_states"
        shapes = _piece_shapes(self.batch_size, self.nheads)
        arrays = []
        for name, value, piece in (("theta", theta, "theta"), ("h", h, "h"), ("k", k, "pending_k"),
                                   ("v", v, "pending_v")):
            array = float32_strict(value, what, name, _DTYPE_SENTENCE)
            if tuple(array.shape) != shapes[piece]:
                raise ValueError(f"{PACKAGE} {what}: {name} has shape {tuple(array.shape)}, want {shapes[piece]}")
            arrays.append(array)
        self._before_change()
        self._native.set_input_states(*arrays)

    def __repr__(self):
        return (f"Mamba3State(batch_size={self.batch_size}, nheads={self.nheads}, "
                f"buffered_tokens={self.buffered_tokens}, pending={self.pending})")


def _piece_property(index, name):
    def getter(self):
        return self._piece_view(index)

    def setter(self, value):
        shape = _piece_shapes(self.batch_size, self.nheads)[name]
        array = state_piece(value, "Mamba3State", name, shape)
        self._before_change()
        np.copyto(self._native.piece(index), array, casting="no")

    return property(getter, setter, doc=f"The {name} piece: a writable view of the engine's memory.")


for _index, _name in enumerate(_PIECES):
    setattr(Mamba3State, _name, _piece_property(_index, _name))
del _index, _name


class Mamba3BlockInference:
    """Forward-only Mamba-3 (SISO) block (profile mojolearn.identical.mamba3.siso.fp32.v1) on the CPU.

    Takes the nine named weights of `Mamba3Block` (block_norm.weight, in_proj.weight, dt_bias,
    B_norm.weight, C_norm.weight, B_bias, C_bias, D, out_proj.weight); d_model must be a multiple of 32.
    Weights may be packed by `samebits.lowbit`; they are materialized exactly to float32, copied, and
    `weight_format` records the format given. `forward(x, lengths=None)` runs from a zero state;
    `allocate_state(B)`, `forward(x, state)` and `step(x, state)` carry a `Mamba3State`, and decoding one
    token at a time gives the same bits as one forward pass over the whole sequence. After every call
    `h_last_`, `k_last_`, `v_last_` and `theta_last_` hold the reports. `backward` is refused."""

    def __init__(self, weights):
        engine_type = native().Mamba3Engine
        names, arrays, weight_format = ordered_weights(engine_type, _BLOCK, weights, _DTYPE_SENTENCE)
        self._engine = engine_type(names, arrays, weight_format)
        self.weight_format = weight_format
        self.d_model = self._engine.d_model
        self.d_inner = self._engine.d_inner
        self.nheads = self._engine.nheads
        self.d_in_proj = self._engine.d_in_proj

    def allocate_state(self, batch_size):
        """A zero `Mamba3State` for `batch_size` rows; `set_input_states` on it starts from Input_States."""
        b = _checks.count(batch_size, f"{PACKAGE} Mamba3BlockInference.allocate_state", "batch_size")
        return Mamba3State._adopt(self._engine.allocate_state(b))

    def forward(self, x, state=None, *, lengths=None):
        """(B, L, d_model) float32 in, the block output (B, L, d_model) out. `state=None` runs from zeros
        and discards the final state; a `Mamba3State` is read and updated in place. `lengths` runs a
        ragged right-padded batch (stateless only)."""
        what = f"{_BLOCK}.forward"
        x = float32_strict(x, what, "x", _DTYPE_SENTENCE)
        self._engine.check_tokens(list(x.shape), False)
        if lengths is not None:
            return ragged_forward(lambda padded: self._call(padded, None, False), x, state, lengths, what)
        return self._call(x, state, False)

    __call__ = forward

    def step(self, x, state):
        """One decode token per batch row: x (B, 1, d_model) or (B, d_model); the output has x's shape."""
        x = float32_strict(x, f"{_BLOCK}.step", "x", _DTYPE_SENTENCE)
        self._engine.check_tokens(list(x.shape), True)
        return self._call(x, state, True)

    def backward(self, x, grad_output):
        self._engine.backward()

    @staticmethod
    def _check_state_type(state, step):
        check_state_type(state, Mamba3State, f"{_BLOCK}.step" if step else f"{_BLOCK}.forward")

    def _call(self, x, state, step):
        self._check_state_type(state, step)
        call = self._engine.step if step else self._engine.forward
        if state is None:  # the zero state is discarded, so its reports are taken now
            y, reports = call(x, None)
            self._set_reports(reports)
            return y
        state._before_change(caller=self)
        now = state._native.pinned  # a live view could change the state before the reports are read
        y, reports = call(x, state._native, reports=now)
        if self._pending_on() is not None:
            self._pending_on()._readers.discard(self)
        if now:
            self._set_reports(reports)
        else:
            self._set_reports(None)
            self._reports_from = state
            state._readers.add(self)
        return y

    def _pending_on(self):
        return getattr(self, "_reports_from", None)

    def _set_reports(self, reports):
        self._reports = reports
        self._reports_from = None

    def _settle_reports(self):
        """Computes the pending reports from the state the last call left (still unchanged)."""
        if getattr(self, "_reports_from", None) is not None:
            self._set_reports(self._engine.reports(self._reports_from._native))

    def _report(self, index, name):
        self._settle_reports()
        reports = getattr(self, "_reports", None)
        if reports is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' (no call has run yet)")
        return reports[index]

    def _reference(self, x, state=None, step=False):
        """The scalar twin's output for the same call (tests and cross-checks): the same refusals."""
        x = float32_strict(x, f"{_BLOCK}.step" if step else f"{_BLOCK}.forward", "x", _DTYPE_SENTENCE)
        self._check_state_type(state, step)
        engine_state = None if state is None else state._native
        call = self._engine.step if step else self._engine.forward
        if state is not None:
            state._before_change()
        y, _ = call(x, engine_state, True, False)
        return y

    def __repr__(self):
        return f"Mamba3BlockInference(d_model={self.d_model}, nheads={self.nheads}, weight_format={self.weight_format!r})"


# The reports, in the order the engine returns them.
_REPORTS = (
    ("h_last_", "(B, H, 64, 128): h after the final working chunk of the last call."),
    ("k_last_", "(B, H, 128): the rotated, pre-scale k of the last call's last working row."),
    ("v_last_", "(B, H, 64): the raw v of the last call's last working row."),
    ("theta_last_", "(B, H, 32): the angles after the last call's last token."),
)


def _report_property(index, name, doc):
    return property(lambda self: self._report(index, name), doc=doc)


for _index, (_name, _doc) in enumerate(_REPORTS):
    setattr(Mamba3BlockInference, _name, _report_property(_index, _name, _doc))
del _index, _name, _doc
