"""State safety (issue 8.5): every refusal that can happen once a state is passed leaves that state as it was,
byte for byte (every buffer, every scalar, the very objects it holds), and the state still works: the next
valid call gives the bits, and leaves the state, that a clone never shown the refused call gives.

One case per refusal and call path, on TransformerBlockInference / TransformerState, Mamba1/2/3 and their
states, and SambaInference / SambaState. The C++ twin of this file is tests/cpp/test_state_safety.cpp.
"""

import math
import re
from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional

import numpy as np
import pytest

import samebits
from samebits._mamba import Mamba1State, Mamba2State
from samebits._mamba3 import Mamba3State
from samebits._samba import SambaInference, SambaState
from samebits._transformer import TransformerState

from block_weights import TRANSFORMER_NAMES, normal_weights

# --------------------------------------------------------------------------------------------- snapshots


def _array(value):
    """Everything a buffer is: its type, dtype, shape, strides, flags and bytes (or the repr of a non-array)."""
    if not isinstance(value, np.ndarray):
        return ("object", type(value).__name__, repr(value))
    return ("array", value.dtype.str, value.shape, value.strides, value.flags.writeable, value.tobytes())


def content(state):
    """The state's values (no identities): what a clone must equal after the same calls."""
    if isinstance(state, TransformerState):
        return (state.batch_size, state.n_kv_heads, state.head_dim, state.max_tokens, state.window,
                state.cached_tokens, _array(state.k_cache), _array(state.v_cache))
    if isinstance(state, Mamba1State):
        return tuple(_array(np.array(getattr(state._native, n))) for n in ("conv_window", "h"))
    if isinstance(state, Mamba2State):
        pieces = tuple(_array(np.array(getattr(state._native, n)))
                       for n in ("conv_window", "h", "buffer_xbc", "buffer_dtraw"))
        return pieces + (state._native.buffered_tokens,)
    if isinstance(state, Mamba3State):
        pieces = tuple(_array(np.array(state._native.piece(i))) for i in range(10))
        return pieces + (state._native.buffered_tokens, state._native.pending)
    if isinstance(state, SambaState):
        return (state.batch_size, state.max_tokens, tuple(content(layer) for layer in state.layers))
    return ("object", repr(state))


def buffer_address(array):
    return np.asarray(array).__array_interface__["data"][0]


def snapshot(state):
    """content() plus the identities of the objects the state holds (a refusal must not swap them). A
    TransformerState hands out a fresh view of each buffer per access: the buffer is named by its memory."""
    if isinstance(state, TransformerState):
        return content(state), buffer_address(state.k_cache), buffer_address(state.v_cache)
    if isinstance(state, SambaState):
        return content(state), id(state.layers), tuple(id(layer) for layer in state.layers), tuple(
            snapshot(layer) for layer in state.layers)
    if isinstance(state, (Mamba1State, Mamba2State, Mamba3State)):
        return content(state), id(state._native)
    return content(state)


def clone(state):
    if isinstance(state, TransformerState):
        return TransformerState(state.batch_size, state.n_kv_heads, state.head_dim, state.max_tokens,
                                np.array(state.k_cache), np.array(state.v_cache), state.cached_tokens, state.window)
    if isinstance(state, SambaState):
        return SambaState(state.batch_size, state.max_tokens, [clone(layer) for layer in state.layers])
    return state.copy()


# ----------------------------------------------------------------------------------------------- harness


@dataclass
class Subject:
    state: object                  # the state passed to the refused call
    proceed: Optional[Callable]    # a valid call on a state; None when the state can never take one
    repair: Optional[Callable] = None  # undoes what the case planted

    def __post_init__(self):
        self.clone = clone(self.state)


@dataclass
class Case:
    id: str
    exc: type
    match: str
    build: Callable  # () -> (Subject, the refused call)


def run(case):
    subject, call = case.build()
    before = snapshot(subject.state)
    with pytest.raises(case.exc, match=re.escape(case.match)):
        call()
    assert snapshot(subject.state) == before, "the refused call changed the state"
    if subject.repair is not None:
        subject.repair()
    if subject.proceed is not None:
        a = np.asarray(subject.proceed(subject.state))
        b = np.asarray(subject.proceed(subject.clone))
        assert a.tobytes() == b.tobytes(), "after the refusal the output differs from the never-refused clone's"
        assert content(subject.state) == content(subject.clone), "after the refusal the state differs"


def cases_of(faults, paths_name):
    """Cases from (name, paths, exc, match, setup(path)) faults, one per path, id '<fault>-<path>'."""
    out = []
    for name, paths, exc, match, setup in faults:
        for path in paths:
            out.append(pytest.param(Case(f"{name}-{path}", exc, match, lambda s=setup, p=path: s(p)),
                                    id=f"{paths_name}-{name}-{path}"))
    return out


def rng_tokens(shape, seed=9):
    return (np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(np.float32)


NAN, INF = np.float32(np.nan), np.float32(np.inf)

# ============================================================================== TransformerBlockInference

DM = 16
KV_PATHS = ("forward", "step", "reference_forward", "reference_step")
KV_FORWARDS = ("forward", "reference_forward")
KV_STEPS = ("step", "reference_step")
_kv_blocks = {}


def kv_block(which=0):
    """0 full causal (4 heads, 2 kv heads, head_dim 4); 1 window 3; 2 other dims with the same cache float
    count (2 heads, 1 kv head, head_dim 8); 3 another cache size (4 kv heads)."""
    if which not in _kv_blocks:
        nh, nkv, window = {0: (4, 2, 0), 1: (4, 2, 3), 2: (2, 1, 0), 3: (4, 4, 0)}[which]
        hd = DM // nh
        shapes = ((DM,), (DM,), (nh * hd, DM), (nkv * hd, DM), (nkv * hd, DM), (DM, nh * hd), (24, DM),
                  (24, DM), (DM, 24))
        weights = normal_weights(zip(TRANSFORMER_NAMES, shapes), 11 + which, scale=0.2)
        _kv_blocks[which] = samebits.TransformerBlockInference(weights, n_heads=nh, n_kv_heads=nkv, window=window)
    return _kv_blocks[which]


def call_path(block, path, x, state, reference, **kw):
    """The call `path` names: forward (with kw) or step through the block, any other path reference(x, state)."""
    if path == "forward":
        return block.forward(x, state, **kw)
    if path == "step":
        return block.step(x, state)
    return reference(x, state)


def kv_call(block, path, x, state, **kw):
    return call_path(block, path, x, state, partial(block._forward_reference, step=path == "reference_step"), **kw)


def kv_x(path, batch=2, length=3):
    return rng_tokens((batch, 1 if path in KV_STEPS else length, DM))


def kv_subject(which=0, batch=2, max_tokens=8, prefix=3, usable=True):
    block = kv_block(which)
    state = block.allocate_state(batch, max_tokens)
    if prefix:
        block.forward(rng_tokens((batch, prefix, DM), 5), state)
    proceed = (lambda s: block.step(rng_tokens((batch, 1, DM), 77), s)) if usable else None
    return Subject(state, proceed)


def _kv_x_shape(shape):
    def setup(path):
        subject = kv_subject()
        return subject, lambda: kv_call(kv_block(0), path, np.full(shape, 0.5, np.float32), subject.state)
    return setup


def _kv_x(transform):
    def setup(path):
        subject = kv_subject()
        return subject, lambda: kv_call(kv_block(0), path, transform(kv_x(path)), subject.state)
    return setup


def planted(value):
    """A transform of x that writes `value` at flat index 5 (in place) and returns x."""
    def transform(x):
        x.reshape(-1)[5] = value
        return x
    return transform


def _kv_plant_x(value):
    return _kv_x(planted(value))


def _kv_foreign(which):
    def setup(path):
        subject = kv_subject(which)
        return subject, lambda: kv_call(kv_block(0), path, kv_x(path), subject.state)
    return setup


def _kv_plant_cache(piece, index, value, which=0, prefix=3):
    def setup(path):
        subject = kv_subject(which, prefix=prefix)
        buffer = getattr(subject.state, piece)
        saved = buffer[index]
        buffer[index] = value
        subject.repair = lambda: buffer.__setitem__(index, saved)
        return subject, lambda: kv_call(kv_block(which), path, kv_x(path), subject.state)
    return setup


def _kv_set(attribute, value, make=None):
    """Sets a state attribute to `value` (an object built from the original by `make`), repaired afterwards."""
    def setup(path):
        subject = kv_subject()
        saved = getattr(subject.state, attribute)
        setattr(subject.state, attribute, make(saved) if make else value)
        subject.repair = lambda: setattr(subject.state, attribute, saved)
        return subject, lambda: kv_call(kv_block(0), path, kv_x(path), subject.state)
    return setup


def _strided_copy(buffer):
    wide = np.zeros(buffer.size * 2, np.float32)
    wide[::2] = buffer
    return wide[::2]


def _read_only_copy(buffer):
    copy = np.array(buffer)
    copy.flags.writeable = False
    return copy


def _kv_overflow(which):
    def setup(path):
        step = path in KV_STEPS
        subject = kv_subject(which, prefix=8 if step else 3, usable=not step)
        return subject, lambda: kv_call(kv_block(which), path, kv_x(path, length=6), subject.state)
    return setup


def _kv_rotary(path):
    subject = kv_subject(prefix=0, batch=1, max_tokens=8193, usable=False)
    return subject, lambda: kv_call(kv_block(0), path, kv_x(path, batch=1), subject.state)


def _kv_lengths(path):
    subject = kv_subject()
    return subject, lambda: kv_block(0).forward(kv_x(path), subject.state, lengths=[3, 2])


def _kv_not_a_state(path):
    subject = kv_subject()  # a Mamba-style dict of the same arrays is not a TransformerState
    fake = {"k_cache": subject.state.k_cache, "v_cache": subject.state.v_cache}
    return subject, lambda: kv_call(kv_block(0), path, kv_x(path), fake)


KV_FAULTS = [
    ("x_float64", KV_PATHS, TypeError, "x has dtype float64", _kv_x(lambda x: x.astype(np.float64))),
    ("x_list", KV_PATHS, TypeError, "x is a list, which does not support the buffer protocol",
     _kv_x(lambda x: x.tolist())),
    ("x_rank_2d", KV_FORWARDS, ValueError, "x must be (B, L, d_model), got 2-D shape (2, 16)", _kv_x_shape((2, DM))),
    ("x_rank_4d", KV_PATHS, ValueError, "got 4-D shape (2, 1, 1, 16)", _kv_x_shape((2, 1, 1, DM))),
    ("x_width", KV_PATHS, ValueError, "x has d_model 8, the weights have 16", _kv_x_shape((2, 1, 8))),
    ("step_two_tokens", KV_STEPS, ValueError, "a decode step takes exactly one token per batch row, got L = 2",
     _kv_x_shape((2, 2, DM))),
    ("zero_batch", KV_PATHS, ValueError, "B and L must be positive", _kv_x_shape((0, 1, DM))),
    ("zero_length", KV_FORWARDS, ValueError, "B and L must be positive", _kv_x_shape((2, 0, DM))),
    ("x_nan", KV_PATHS, ValueError, "NaN in x at flat index 5 REFUSED", _kv_plant_x(NAN)),
    ("x_infinity", KV_PATHS, ValueError, "infinity in x at flat index 5 REFUSED", _kv_plant_x(-INF)),
    ("state_not_a_transformer_state", KV_PATHS, TypeError, "state must be a TransformerState", _kv_not_a_state),
    ("batch_mismatch", KV_PATHS, ValueError, "the state was allocated for batch_size 2 but x has B = 3",
     lambda p: (lambda s: (s, lambda: kv_call(kv_block(0), p, kv_x(p, batch=3), s.state)))(kv_subject())),
    ("window_mismatch", KV_PATHS, ValueError, "the state was allocated for window 3 but this block has window 0",
     _kv_foreign(1)),
    ("other_dims_same_float_count", KV_PATHS, ValueError,
     "the state was allocated for n_kv_heads 1 x head_dim 8 but this block has n_kv_heads 2 x head_dim 4",
     _kv_foreign(2)),
    ("other_kv_heads", KV_PATHS, ValueError, "the state was allocated for n_kv_heads 4", _kv_foreign(3)),
    ("k_cache_float64", KV_PATHS, TypeError, "state buffer k_cache has dtype float64, want float32",
     _kv_set("k_cache", None, lambda b: b.astype(np.float64))),
    ("v_cache_list", KV_PATHS, TypeError, "state buffer v_cache must be a numpy ndarray",
     _kv_set("v_cache", None, lambda b: b.tolist())),
    ("k_cache_wrong_shape", KV_PATHS, ValueError, "state buffer k_cache has shape (2, 64), want (128,)",
     _kv_set("k_cache", None, lambda b: b.reshape(2, -1))),
    ("v_cache_not_contiguous", KV_PATHS, ValueError, "state buffer v_cache must be C-contiguous and writable",
     _kv_set("v_cache", None, _strided_copy)),
    ("k_cache_read_only", KV_PATHS, ValueError, "state buffer k_cache must be C-contiguous and writable",
     _kv_set("k_cache", None, _read_only_copy)),
    ("cached_tokens_negative", KV_PATHS, ValueError, "cached_tokens must be in [0, 8]", _kv_set("cached_tokens", -1)),
    ("cached_tokens_beyond_max_tokens", KV_PATHS, ValueError, "cached_tokens must be in [0, 8]",
     _kv_set("cached_tokens", 9)),
    ("cached_tokens_beyond_int64", KV_PATHS, TypeError, "incompatible function arguments",
     _kv_set("cached_tokens", 2**70)),
    ("max_tokens_beyond_rotary_table", KV_PATHS, ValueError, "exceeds max_positions 8192", _kv_rotary),
    ("k_cache_nan", KV_PATHS, ValueError, "NaN in k_cache at flat index 7 REFUSED", _kv_plant_cache("k_cache", 7, NAN)),
    ("v_cache_infinity", KV_PATHS, ValueError, "infinity in v_cache at flat index 47 REFUSED",
     _kv_plant_cache("v_cache", 47, INF)),
    ("window_ring_slot_nan", KV_PATHS, ValueError, "NaN in k_cache at flat index 46 REFUSED",
     _kv_plant_cache("k_cache", 46, NAN, which=1, prefix=2)),
    ("kv_overflow", KV_PATHS, ValueError, "KV slots and the cache holds 8 REFUSED", _kv_overflow(0)),
    ("window_kv_overflow", KV_PATHS, ValueError, "KV slots and the cache holds 8 REFUSED", _kv_overflow(1)),
    ("lengths_with_state", ("forward",), ValueError, "cannot carry a state", _kv_lengths),
]


@pytest.mark.parametrize("case", cases_of(KV_FAULTS, "transformer"))
def test_transformer_refusal_leaves_state_unchanged(case):
    run(case)


# ============================================================================== Mamba-1 / Mamba-2 / Mamba-3

M_PATHS = ("forward", "step", "reference_forward", "reference_step")
M_FORWARDS = ("forward", "reference_forward")
M_STEPS = ("step", "reference_step")


def _mamba1_shapes(dm):
    di, rank = 2 * dm, math.ceil(dm / 16)
    return [("norm.weight", (dm,)), ("in_proj.weight", (2 * di, dm)), ("conv1d.weight", (di, 1, 4)),
            ("conv1d.bias", (di,)), ("x_proj.weight", (rank + 32, di)), ("dt_proj.weight", (di, rank)),
            ("dt_proj.bias", (di,)), ("A_log", (di, 16)), ("D", (di,)), ("out_proj.weight", (dm, di))]


def _mamba2_shapes(dm):
    di = 2 * dm
    h, cd = di // 64, di + 256
    return [("block_norm.weight", (dm,)), ("in_proj.weight", (2 * di + 256 + h, dm)), ("conv1d.weight", (cd, 1, 4)),
            ("conv1d.bias", (cd,)), ("dt_bias", (h,)), ("A_log", (h,)), ("D", (h,)), ("norm.weight", (di,)),
            ("out_proj.weight", (dm, di))]


def _mamba3_shapes(dm):
    di = 2 * dm
    h = di // 64
    return [("block_norm.weight", (dm,)), ("in_proj.weight", (2 * di + 256 + 3 * h + 32, dm)), ("dt_bias", (h,)),
            ("B_norm.weight", (128,)), ("C_norm.weight", (128,)), ("B_bias", (h, 128)), ("C_bias", (h, 128)),
            ("D", (h,)), ("out_proj.weight", (dm, di))]


@dataclass
class MambaKind:
    name: str
    cls: type
    shapes: Callable
    d_model: int
    bad_weight: tuple   # (name, flat index, value) planted in variant 2
    weight_message: str
    zero_batch_message: str


KINDS = {
    "mamba1": MambaKind("mamba1", samebits.Mamba1BlockInference, _mamba1_shapes, 16, ("x_proj.weight", 4, np.nan),
                        "NaN in x_proj.weight at flat index 4 REFUSED", "B and L must be positive"),
    "mamba2": MambaKind("mamba2", samebits.Mamba2BlockInference, _mamba2_shapes, 32, ("D", 0, np.inf),
                        "infinity in D at flat index 0 REFUSED", "B and L must be positive"),
    "mamba3": MambaKind("mamba3", samebits.Mamba3BlockInference, _mamba3_shapes, 32, ("C_bias", 3, np.nan),
                        "NaN in C_bias at flat index 3 REFUSED",
                        "state buffer theta has shape (2, 1, 32), want (0, 1, 32)"),
}
_mamba_blocks = {}
_mamba_weights = {}


def mamba_block(kind, variant=0):
    """variant 0 normal, 1 twice the d_model (another model's state), 2 a non-finite weight."""
    key = (kind.name, variant)
    if key not in _mamba_blocks:
        dm = kind.d_model * (2 if variant == 1 else 1)
        rng = np.random.default_rng(31)
        weights = {}
        for name, shape in kind.shapes(dm):
            value = (rng.standard_normal(shape) * 0.1).astype(np.float32)
            if "norm" in name:
                value += np.float32(1)
            if name == "A_log":
                value = np.abs(value)
            weights[name] = value
        if variant == 2:
            name, index, bad = kind.bad_weight
            weights[name].reshape(-1)[index] = bad
        _mamba_weights[key] = weights
        _mamba_blocks[key] = kind.cls(weights)
    return _mamba_blocks[key]


def mamba_call(block, path, x, state, **kw):
    return call_path(block, path, x, state, partial(block._reference, step=path == "reference_step"), **kw)


def mamba_x(kind, path, batch=2, length=3):
    return rng_tokens((batch, 1 if path in M_STEPS else length, kind.d_model), 8)


def mamba_subject(kind, variant=0, batch=2, prefix=5):
    block = mamba_block(kind, variant)
    state = block.allocate_state(batch)
    dm = block.d_model
    if prefix:
        block.forward(rng_tokens((batch, prefix, dm), 6), state)
    return Subject(state, lambda s: block.step(rng_tokens((batch, 1, dm), 78), s))


def mamba_faults(kind):
    dm = kind.d_model

    def x_shape(shape):
        def setup(path):
            subject = mamba_subject(kind)
            return subject, lambda: mamba_call(mamba_block(kind), path, np.full(shape, 0.25, np.float32), subject.state)
        return setup

    def x_made(transform):
        def setup(path):
            subject = mamba_subject(kind)
            return subject, lambda: mamba_call(mamba_block(kind), path, transform(mamba_x(kind, path)), subject.state)
        return setup

    def planted_x(value):
        return x_made(planted(value))

    def foreign(variant, batch=2, call_variant=0):
        def setup(path):
            subject = mamba_subject(kind, variant, batch)
            return subject, lambda: mamba_call(mamba_block(kind, call_variant), path, mamba_x(kind, path),
                                               subject.state)
        return setup

    def wrong_type(path):
        subject = mamba_subject(kind)
        other = kv_block(0).allocate_state(2, 8)
        return subject, lambda: mamba_call(mamba_block(kind), path, mamba_x(kind, path), other)

    def lengths(path):
        subject = mamba_subject(kind)
        return subject, lambda: mamba_block(kind).forward(mamba_x(kind, path), subject.state, lengths=[3, 2])

    width = str(dm)
    return [
        ("x_float64", M_PATHS, TypeError, "x has dtype float64", x_made(lambda x: x.astype(np.float64))),
        ("x_float16", M_PATHS, TypeError, "x has dtype float16", x_made(lambda x: x.astype(np.float16))),
        ("x_list", M_PATHS, TypeError, "x is a list, which does not support the buffer protocol",
         x_made(lambda x: x.tolist())),
        ("x_rank_2d", M_FORWARDS, ValueError, f"x must be (B, L, d_model), got 2-D shape (2, {width})",
         x_shape((2, dm))),
        ("x_rank_4d", M_PATHS, ValueError, f"-D shape (2, 1, 1, {width})", x_shape((2, 1, 1, dm))),
        ("x_width", M_PATHS, ValueError, f"x has d_model 8, the weights have {width}", x_shape((2, 1, 8))),
        ("step_two_tokens", M_STEPS, ValueError, "a decode step takes exactly one token per batch row, got L = 2",
         x_shape((2, 2, dm))),
        ("zero_batch", M_PATHS, ValueError, kind.zero_batch_message, x_shape((0, 1, dm))),
        ("zero_length", M_FORWARDS, ValueError, "B and L must be positive", x_shape((2, 0, dm))),
        ("x_nan", M_PATHS, ValueError, "NaN in x at flat index 5 REFUSED", planted_x(NAN)),
        ("x_infinity", M_PATHS, ValueError, "infinity in x at flat index 5 REFUSED", planted_x(INF)),
        ("state_of_another_kind", M_PATHS, TypeError, "state must be a", wrong_type),
        ("batch_mismatch", M_PATHS, ValueError, "has shape (3, ", foreign(0, batch=3)),
        ("other_model_state", M_PATHS, ValueError, "has shape (2, ", foreign(1)),
        ("non_finite_weight", M_PATHS, ValueError, kind.weight_message, foreign(0, call_variant=2)),
        ("lengths_with_state", ("forward",), ValueError, "cannot carry a state", lengths),
    ]


def _plant_piece(kind, piece, index, value, prepare=None):
    def setup(path):
        subject = mamba_subject(kind, prefix=0 if prepare else 5)
        if prepare:
            prepare(subject.state)
            prepare(subject.clone)
        view = np.asarray(getattr(subject.state._native, piece) if kind.name != "mamba3"
                          else subject.state._native.piece(MAMBA3_PIECES.index(piece))).reshape(-1)
        saved = view[index].copy()
        view[index] = value
        subject.repair = lambda: view.__setitem__(index, saved)
        return subject, lambda: mamba_call(mamba_block(kind), path, mamba_x(kind, path), subject.state)
    return setup


def _set_scalar(kind, attribute, bad):
    def setup(path):
        subject = mamba_subject(kind)
        saved = getattr(subject.state, attribute)
        setattr(subject.state, attribute, bad)
        subject.repair = lambda: setattr(subject.state, attribute, saved)
        return subject, lambda: mamba_call(mamba_block(kind), path, mamba_x(kind, path), subject.state)
    return setup


MAMBA3_PIECES = ("theta", "h", "buffer_qrot", "buffer_krot", "buffer_v", "buffer_dt", "buffer_sig", "buffer_adt",
                 "pending_k", "pending_v")


def _input_states(state):
    rng = np.random.default_rng(4)
    b, h = state.batch_size, state.nheads
    state.set_input_states(*(rng.standard_normal(s).astype(np.float32) * np.float32(0.5)
                             for s in ((b, h, 32), (b, h, 64, 128), (b, h, 128), (b, h, 64))))


def mamba1_faults():
    k = KINDS["mamba1"]
    return mamba_faults(k) + [
        ("conv_window_nan", M_PATHS, ValueError, "NaN in conv_window at flat index 9 REFUSED",
         _plant_piece(k, "conv_window", 9, NAN)),
        ("h_infinity", M_PATHS, ValueError, "infinity in h at flat index 100 REFUSED", _plant_piece(k, "h", 100, INF)),
    ]


def mamba2_faults():
    k = KINDS["mamba2"]
    return mamba_faults(k) + [
        ("conv_window_nan", M_PATHS, ValueError, "NaN in conv_window at flat index 9 REFUSED",
         _plant_piece(k, "conv_window", 9, NAN)),
        ("h_infinity", M_PATHS, ValueError, "infinity in h at flat index 100 REFUSED", _plant_piece(k, "h", 100, -INF)),
        ("buffer_xbc_nan", M_PATHS, ValueError, "NaN in buffer_xbc at flat index 2 REFUSED",
         _plant_piece(k, "buffer_xbc", 2, NAN)),
        ("buffer_dtraw_nan_past_the_open_rows", M_PATHS, ValueError, "NaN in buffer_dtraw at flat index 250 REFUSED",
         _plant_piece(k, "buffer_dtraw", 250, NAN)),
        ("buffered_tokens_negative", M_PATHS, ValueError, "buf_len must be in [0, 256)",
         _set_scalar(k, "buffered_tokens", -1)),
        ("buffered_tokens_256", M_PATHS, ValueError, "buf_len must be in [0, 256)",
         _set_scalar(k, "buffered_tokens", 256)),
    ]


def mamba3_faults():
    k = KINDS["mamba3"]
    faults = mamba_faults(k)
    for piece in MAMBA3_PIECES[:8]:
        faults.append((f"{piece}_nan", M_PATHS, ValueError, f"NaN in state.{piece} at flat index 3 REFUSED",
                       _plant_piece(k, piece, 3, NAN)))
    for piece in MAMBA3_PIECES[8:]:
        faults.append((f"{piece}_nan_while_pending", M_PATHS, ValueError,
                       f"NaN in state.{piece} at flat index 1 REFUSED", _plant_piece(k, piece, 1, NAN, _input_states)))
    faults += [
        ("buffered_tokens_negative", M_PATHS, ValueError, "buf_len must be in [0, 64]",
         _set_scalar(k, "buffered_tokens", -1)),
        ("buffered_tokens_65", M_PATHS, ValueError, "buf_len must be in [0, 64]",
         _set_scalar(k, "buffered_tokens", 65)),
        ("input_states_on_mid_sequence_state", M_PATHS, ValueError,
         "Input_States only has upstream meaning on a fresh state", _set_scalar(k, "pending", True)),
    ]
    return faults


@pytest.mark.parametrize("case", cases_of(mamba1_faults(), "mamba1"))
def test_mamba1_refusal_leaves_state_unchanged(case):
    run(case)


@pytest.mark.parametrize("case", cases_of(mamba2_faults(), "mamba2"))
def test_mamba2_refusal_leaves_state_unchanged(case):
    run(case)


@pytest.mark.parametrize("case", cases_of(mamba3_faults(), "mamba3"))
def test_mamba3_refusal_leaves_state_unchanged(case):
    run(case)


def test_mamba3_reports_pending_on_a_state_survive_a_refused_call():
    """A refused call changes nothing, so the reports the block still owes from its last call stay those."""
    kind = KINDS["mamba3"]
    block, twin = mamba_block(kind), kind.cls(_mamba_weights[(kind.name, 0)])
    x = rng_tokens((2, 5, 32), 6)
    state, twin_state = block.allocate_state(2), twin.allocate_state(2)
    block.forward(x, state)
    twin.forward(x, twin_state)
    with pytest.raises(ValueError, match="NaN in x"):
        block.step(np.full((2, 1, 32), np.nan, np.float32), state)
    for name in ("h_last_", "k_last_", "v_last_", "theta_last_"):
        assert np.asarray(getattr(block, name)).tobytes() == np.asarray(getattr(twin, name)).tobytes(), name


# ============================================================================== SambaInference

VOCAB = 48
S_PATHS = ("forward", "step", "reference_forward")
S_FORWARDS = ("forward", "reference_forward")
_sambas = {}


def samba(variant=0):
    """Layers (mamba3, attention, mamba3, attention), so every fault has a later layer of each kind to hide
    in. Variants: 0 normal; 1 layer 2's block_norm and out_proj at FLT_MAX (finite weights whose output
    overflows: layer 3 refuses its input after layers 0-2 ran); 2 two layers; 3 the kinds swapped; 4 other
    kv heads; 5 d_model 64 with the same attention dims (other Mamba-3 heads); 6 other kv dims with the same
    cache float count (4 kv heads of 4 against 2 of 8)."""
    if variant not in _sambas:
        layers = ["mamba3", "attention", "mamba3", "attention"]
        if variant == 2:
            layers = ["mamba3", "attention"]
        if variant == 3:
            layers = ["attention", "mamba3", "attention", "mamba3"]
        config = samebits.SambaConfig(VOCAB, 64 if variant == 5 else 32, layers, n_heads=8 if variant in (5, 6) else 4,
                                      n_kv_heads=4 if variant in (4, 6) else 2, head_dim=4 if variant == 6 else 8,
                                      intermediate=40, tie_embeddings=False)
        rng = np.random.default_rng(21)
        weights = {}
        for name, shape in config.registry():
            value = (np.ones(shape, np.float32) if "norm" in name
                     else (rng.standard_normal(shape) * 0.05).astype(np.float32))
            if variant == 1 and name in ("layers.2.block_norm.weight", "layers.2.out_proj.weight"):
                value = np.full(shape, np.finfo(np.float32).max, np.float32)
            weights[name] = value
        _sambas[variant] = SambaInference(config, weights)
    return _sambas[variant]


def samba_call(model, path, ids, state, **kw):
    return call_path(model, path, ids, state, model._forward_reference, **kw)


def samba_ids(path, batch=2, length=2, seed=5):
    ids = np.random.default_rng(seed).integers(0, VOCAB, (batch, length))
    return ids[:, 0] if path == "step" else ids


def samba_subject(variant=0, batch=2, max_tokens=80, prefix=3, usable=True):
    model = samba(variant)
    state = model.allocate_state(batch, max_tokens)
    if prefix:
        model.forward(np.random.default_rng(4).integers(0, VOCAB, (batch, prefix)), state)
    proceed = (lambda s: model.step(np.random.default_rng(79).integers(0, VOCAB, batch), s)) if usable else None
    return Subject(state, proceed)


def _s_ids(make, variant=0, model=0, **subject_kw):
    def setup(path):
        subject = samba_subject(variant, **subject_kw)
        return subject, lambda: samba_call(samba(model), path, make(path), subject.state)
    return setup


def _s_plant_id(value):
    def make(path):
        ids = samba_ids(path)
        ids.reshape(-1)[1] = value
        return ids
    return _s_ids(make)


def _s_layer(layer, edit):
    """`edit(state, layer)` plants a fault and returns the repair."""
    def setup(path):
        subject = samba_subject()
        subject.repair = edit(subject.state, layer)
        return subject, lambda: samba_call(samba(0), path, samba_ids(path), subject.state)
    return setup


def _plant_value(piece, index, value):
    def edit(state, layer):
        target = state.layers[layer]
        view = (np.asarray(target._native.piece(MAMBA3_PIECES.index(piece))) if isinstance(target, Mamba3State)
                else getattr(target, piece)).reshape(-1)
        saved = view[index].copy()
        view[index] = value
        return lambda: view.__setitem__(index, saved)
    return edit


def _set_attribute(attribute, make):
    def edit(state, layer):
        target = state.layers[layer]
        saved = getattr(target, attribute)
        setattr(target, attribute, make(saved))
        return lambda: setattr(target, attribute, saved)
    return edit


def _replace_layer(make):
    def edit(state, layer):
        saved = state.layers[layer]
        state.layers[layer] = make(saved)
        return lambda: state.layers.__setitem__(layer, saved)
    return edit


def _s_overflow(prefix, length, input_states=False):
    def setup(path):
        subject = samba_subject(prefix=prefix)
        if input_states:
            _input_states(subject.state.layers[0])
            _input_states(subject.clone.layers[0])
        ids = samba_ids(path, length=length)
        return subject, lambda: samba_call(samba(1), path, ids, subject.state)
    return setup


def _s_rotary(path):
    subject = samba_subject(batch=1, max_tokens=8193, prefix=0, usable=False)
    return subject, lambda: samba_call(samba(0), path, samba_ids(path, batch=1, length=1), subject.state)


def _s_overflow_kv(path):
    subject = samba_subject(prefix=80 if path == "step" else 79, usable=path != "step")
    return subject, lambda: samba_call(samba(0), path, samba_ids(path), subject.state)


def _s_window_layer(state, layer):
    saved = state.layers[layer]
    state.layers[layer] = TransformerState(saved.batch_size, saved.n_kv_heads, saved.head_dim, saved.max_tokens,
                                           np.zeros(saved.batch_size * saved.n_kv_heads * 2 * saved.head_dim,
                                                    np.float32),
                                           np.zeros(saved.batch_size * saved.n_kv_heads * 2 * saved.head_dim,
                                                    np.float32), 0, 2)
    return lambda: state.layers.__setitem__(layer, saved)


def _s_not_a_state(path):
    subject = samba_subject()
    fake = {"layers": subject.state.layers}
    return subject, lambda: samba_call(samba(0), path, samba_ids(path), fake)


def _s_lengths(path):
    subject = samba_subject()
    return subject, lambda: samba(0).forward(samba_ids(path), subject.state, lengths=[2, 1])


SAMBA_FAULTS = [
    ("ids_float", S_PATHS, TypeError, "inputs must be integer token ids",
     _s_ids(lambda p: samba_ids(p).astype(np.float32))),
    ("ids_rank_3d", S_FORWARDS, ValueError, "inputs must be (B, L) integer ids",
     _s_ids(lambda p: samba_ids(p).reshape(2, 2, 1))),
    ("step_ids_two_tokens", ("step",), ValueError, "inputs must be (B,) or (B, 1) integer ids",
     _s_ids(lambda p: samba_ids("forward"))),
    ("zero_batch", S_PATHS, ValueError, "B and L must be positive",
     _s_ids(lambda p: np.zeros((0,) if p == "step" else (0, 2), np.int64))),
    ("zero_length", S_FORWARDS, ValueError, "B and L must be positive", _s_ids(lambda p: np.zeros((2, 0), np.int64))),
    ("id_negative", S_PATHS, ValueError, "inputs must be in [0, vocab)", _s_plant_id(-1)),
    ("id_vocab", S_PATHS, ValueError, "inputs must be in [0, vocab)", _s_plant_id(VOCAB)),
    ("state_not_a_samba_state", S_PATHS, TypeError, "state must be a SambaState (allocate_state)", _s_not_a_state),
    ("batch_mismatch", S_PATHS, ValueError, "the state holds 3 rows and 4 layers, the call has B = 2",
     _s_ids(samba_ids, batch=3)),
    ("fewer_layers", S_PATHS, ValueError,
     "the state holds 2 rows and 2 layers, the call has B = 2 and the stack 4 layers",
     _s_ids(samba_ids, variant=2)),
    ("layer_kinds_swapped", S_PATHS, TypeError, "state.layers[0] must be a Mamba3State", _s_ids(samba_ids, variant=3)),
    ("other_kv_heads", S_PATHS, ValueError, "state.layers[1] holds 4 kv heads of 8, the stack has 2 of 8",
     _s_ids(samba_ids, variant=4)),
    ("other_kv_dims_same_float_count", S_PATHS, ValueError,
     "state.layers[1] holds 4 kv heads of 4, the stack has 2 of 8",
     _s_ids(samba_ids, variant=6)),
    ("other_mamba3_heads", S_PATHS, ValueError, "the state holds batch 2 x 2 heads but the call has B = 2 x 1 heads",
     _s_ids(samba_ids, variant=5)),
    ("layer3_window_cache", S_PATHS, TypeError, "state.layers[3] must be a full-causal TransformerState",
     _s_layer(3, _s_window_layer)),
    ("layer1_not_a_state", S_PATHS, TypeError, "state.layers[1] must be a full-causal TransformerState",
     _s_layer(1, _replace_layer(lambda saved: None))),
    ("layer3_k_cache_float64", S_PATHS, TypeError, "state buffer k_cache has dtype float64",
     _s_layer(3, _set_attribute("k_cache", lambda b: b.astype(np.float64)))),
    ("layer3_v_cache_not_contiguous", S_PATHS, ValueError, "state buffer v_cache must be C-contiguous and writable",
     _s_layer(3, _set_attribute("v_cache", _strided_copy))),
    ("layer3_k_cache_read_only", S_PATHS, ValueError, "state buffer k_cache must be C-contiguous and writable",
     _s_layer(3, _set_attribute("k_cache", _read_only_copy))),
    ("layer3_k_cache_short", S_PATHS, ValueError, "state buffer k_cache has shape",
     _s_layer(3, _set_attribute("k_cache", lambda b: np.array(b[:-1])))),
    ("layer3_cached_tokens_negative", S_PATHS, ValueError, "layer 3 of the state does not match the stack",
     _s_layer(3, _set_attribute("cached_tokens", lambda c: -1))),
    ("layer3_cached_tokens_beyond_max_tokens", S_PATHS, ValueError, "KV slots and the cache holds 80",
     _s_layer(3, _set_attribute("cached_tokens", lambda c: 81))),
    ("kv_overflow", S_PATHS, ValueError, "this call would use 81 KV slots and the cache holds 80", _s_overflow_kv),
    ("max_tokens_beyond_rotary_table", S_PATHS, ValueError, "exceeds max_positions 8192", _s_rotary),
    # The known gap: a fault in a later layer's state used to be found after the layers below had moved.
    ("layer2_mamba3_h_nan", S_PATHS, ValueError, "NaN in state.h at flat index 17 REFUSED",
     _s_layer(2, _plant_value("h", 17, NAN))),
    ("layer2_mamba3_buffer_v_infinity", S_PATHS, ValueError, "infinity in state.buffer_v at flat index 70 REFUSED",
     _s_layer(2, _plant_value("buffer_v", 70, INF))),
    ("layer3_attention_v_cache_nan", S_PATHS, ValueError, "NaN in v_cache at flat index 40 REFUSED",
     _s_layer(3, _plant_value("v_cache", 40, NAN))),
    ("layer1_attention_k_cache_infinity", S_PATHS, ValueError, "infinity in k_cache at flat index 0 REFUSED",
     _s_layer(1, _plant_value("k_cache", 0, -INF))),
    ("layer2_buffered_tokens_65", S_PATHS, ValueError, "buf_len must be in [0, 64]",
     _s_layer(2, _set_attribute("buffered_tokens", lambda v: 65))),
    ("layer2_buffered_tokens_negative", S_PATHS, ValueError, "buf_len must be in [0, 64]",
     _s_layer(2, _set_attribute("buffered_tokens", lambda v: -1))),
    ("layer2_input_states_mid_sequence", S_PATHS, ValueError, "Input_States only has upstream meaning on a fresh state",
     _s_layer(2, _set_attribute("pending", lambda v: True))),
    ("lengths_with_state", ("forward",), ValueError, "lengths= applies to the stateless forward only", _s_lengths),
    # Finite weights whose layer-2 output overflows: layer 3 refuses its input after layers 0-2 ran, and they
    # are put back: inside the first chunk, sealing it (64 + 1), across it (60 + 10), consuming Input_States.
    ("hidden_overflow_in_first_chunk", S_PATHS, ValueError, "in x at flat index", _s_overflow(3, 2)),
    ("hidden_overflow_sealing_a_chunk", S_PATHS, ValueError, "in x at flat index", _s_overflow(64, 1)),
    ("hidden_overflow_across_a_chunk", S_FORWARDS, ValueError, "in x at flat index", _s_overflow(60, 10)),
    ("hidden_overflow_consuming_input_states", S_PATHS, ValueError, "in x at flat index", _s_overflow(0, 2, True)),
]


@pytest.mark.parametrize("case", cases_of(SAMBA_FAULTS, "samba"))
def test_samba_refusal_leaves_state_unchanged(case):
    run(case)


def test_samba_refused_calls_interleaved_with_a_decode_leave_no_trace():
    """Each token is first refused (hidden overflow) and then decoded: across the Mamba-3 chunk boundary the
    state continues exactly like one that never saw a refusal."""
    state = samba(0).allocate_state(2, 80)
    twin = clone(state)
    ids = np.random.default_rng(6).integers(0, VOCAB, (2, 70))
    for t in range(70):
        with pytest.raises(ValueError, match="in x at flat index"):
            samba(1).step(ids[:, t], state)
        a = samba(0).step(ids[:, t], state)
        b = samba(0).step(ids[:, t], twin)
        assert a.tobytes() == b.tobytes(), t
    assert content(state) == content(twin)
