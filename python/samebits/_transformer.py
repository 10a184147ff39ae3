"""TransformerBlockInference: the forward-only Llama decoder block, with its KV-cache state.

The arithmetic, the shape refusals and the native refusals live in the engine (src/api/transformer.cpp),
and the KV cache's buffers and layout in its C++ state (src/api/transformer_state.cpp); this module owns what needs Python objects: the weight dict, dtypes, the keyword
options, the caller's own buffers, and ragged batches.
"""

import math
import struct

import numpy as np

from . import _blocks, _buffers, _checks, _state_file
from . import lowbit as _lowbit
from ._native import native

_WHAT = "TransformerBlock"
_PACKAGE = _blocks.PACKAGE
_NAMES = (
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "q_proj.weight",
    "k_proj.weight",
    "v_proj.weight",
    "o_proj.weight",
    "gate_proj.weight",
    "up_proj.weight",
    "down_proj.weight",
)
# The order in which the parent class first touches each weight's dtype.
_DTYPE_ORDER = (0, 6, 1, 2, 3, 4, 5, 7, 8)
_DTYPE_SENTENCE = (
    "this surface is float32 ONLY (the fp32 profile mojolearn.identical.transformer.fp32.v1). bfloat16 and "
    "float16 are refused BY NAME: reduced-precision runs mix cast boundaries that are not this profile. "
    "float64 is refused rather than downcast, so that the bits that ran are bits you made. Convert "
    "yourself and pass float32."
)
# The optional tensors of the block options (docs/models.md §2), in upstream's order.
_OPT_NAMES = (
    "q_proj.bias",
    "k_proj.bias",
    "v_proj.bias",
    "o_proj.bias",
    "input_layernorm.bias",
    "post_attention_layernorm.bias",
    "up_proj.bias",
    "down_proj.bias",
    "gate_proj.bias",
    "q_norm.weight",
    "k_norm.weight",
)
_NORMS = ("layernorm", "rmsnorm", "rmsnorm_offset")
_MLPS = ("geglu", "geglu_tanh", "gelu", "gelu_tanh", "swiglu")


def _refuse(exc, text):
    raise exc(f"{_PACKAGE} {_WHAT}: {text}")


def _float32(name, value):
    """A float option: a real number (not a bool), finite and positive as a double, then rounded once to
    float32 (round to nearest even; struct raises OverflowError past FLT_MAX). The engine repeats the
    positivity test on the float32 (docs/models.md §1)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        _refuse(TypeError, f"{name} must be a float, got {value!r}")
    as_double = float(value)
    if not (math.isfinite(as_double) and as_double > 0.0):
        _refuse(ValueError, f"{name} must be a finite positive float, got {value!r}")
    return struct.unpack("<f", struct.pack("<f", as_double))[0]


# The constructor's keyword options that _block_options turns into the engine's option dict.
_OPTION_ARGUMENTS = (
    "rope_theta", "rope_scaling", "rope_dim", "max_positions", "qkv_bias", "o_bias", "norm", "norm_eps",
    "norm_bias", "mlp", "mlp_bias", "qk_norm", "attn_softcap",
)


def _block_options(given):
    """The keyword options as the engine's dict (docs/models.md §2), refusing in upstream's order and wording
    what needs Python objects to judge (types, dict keys, the double before its float32 rounding)."""
    out = {"rope_theta": _float32("rope_theta", given["rope_theta"])}
    scaling = given["rope_scaling"]
    out["rope_scaling"] = ""
    if scaling is not None:
        if not hasattr(scaling, "get"):
            _refuse(TypeError, "rope_scaling must be None or a dict with a 'type' key ('linear' or 'llama3'), got "
                    f"{scaling!r}")
        kind = scaling.get("type", scaling.get("rope_type"))
        if kind not in ("linear", "llama3"):
            _refuse(ValueError, f"rope_scaling type {kind!r} is not supported; 'linear' and 'llama3' are (dynamic, "
                    "yarn and longrope carry an attention_factor this profile does not spell)")
        keys = ("factor",) if kind == "linear" else (
            "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        for key in keys:
            if key not in scaling:
                _refuse(ValueError, f"rope_scaling {kind!r} needs {key!r}")
        out["rope_scaling"] = kind
        out["rope_factor"] = _float32("rope_scaling factor", scaling["factor"])
        if kind == "llama3":
            low = _float32("rope_scaling low_freq_factor", scaling["low_freq_factor"])
            high = _float32("rope_scaling high_freq_factor", scaling["high_freq_factor"])
            if not float(scaling["high_freq_factor"]) > float(scaling["low_freq_factor"]):
                _refuse(ValueError, "rope_scaling 'llama3' needs high_freq_factor > low_freq_factor, got "
                        f"{float(scaling['high_freq_factor'])!r} <= {float(scaling['low_freq_factor'])!r}")
            original = int(scaling["original_max_position_embeddings"])
            if original <= 0:
                _refuse(ValueError, f"rope_scaling 'llama3' original_max_position_embeddings must be positive, got "
                        f"{original}")
            out.update(rope_low_freq_factor=low, rope_high_freq_factor=high,
                       rope_original_max_position_embeddings=original)
    rope_dim = given["rope_dim"]
    if rope_dim is not None:
        if isinstance(rope_dim, (bool, np.bool_)) or not isinstance(rope_dim, (int, np.integer)) or rope_dim <= 0:
            out["rope_dim_bad"] = rope_dim  # refused below, once head_dim is known
        else:
            out["rope_dim"] = int(rope_dim)
    max_positions = given["max_positions"]
    if isinstance(max_positions, (bool, np.bool_)) or not isinstance(max_positions, (int, np.integer)) \
            or max_positions < 1:
        _refuse(ValueError, f"max_positions must be positive, got {max_positions!r}")
    out["max_positions"] = int(max_positions)
    norm = given["norm"]
    if not isinstance(norm, str) or norm not in _NORMS:
        _refuse(ValueError, f"norm={norm!r} is not supported; one of {list(_NORMS)}")
    out["norm"] = norm
    out["norm_eps"] = _float32("norm_eps", given["norm_eps"])
    if given["norm_bias"] and norm != "layernorm":
        _refuse(ValueError, f"norm_bias=True needs norm='layernorm', got norm={norm!r} (an RMSNorm carries no bias)")
    mlp = given["mlp"]
    if not isinstance(mlp, str) or mlp not in _MLPS:
        _refuse(ValueError, f"mlp={mlp!r} is not supported; one of {list(_MLPS)}")
    out["mlp"] = mlp
    if given["qk_norm"] and norm == "layernorm":
        _refuse(ValueError, "qk_norm=True with norm='layernorm' is not supported (no reference family normalizes q "
                "and k with LayerNorm; use norm='rmsnorm' or 'rmsnorm_offset')")
    softcap = given["attn_softcap"]
    if softcap is not None:
        if isinstance(softcap, (bool, np.bool_)) or not isinstance(softcap, (int, float, np.integer, np.floating)) \
                or not (math.isfinite(float(softcap)) and float(softcap) > 0.0):
            _refuse(ValueError, f"attn_softcap must be a finite positive float, got {softcap!r}")
        out["attn_softcap"] = _float32("attn_softcap", softcap)
    for flag in ("qkv_bias", "o_bias", "norm_bias", "mlp_bias", "qk_norm"):
        out[flag] = bool(given[flag])
    return out


_NATIVE_FLOAT32 = np.dtype(np.float32)


def _state_buffer(value, what, name, shape):
    """A caller state buffer, read and written in place: float32, exactly `shape`, C-contiguous and
    writable; nothing is fixed up, because a fixed-up copy would be updated instead of the caller's."""
    if (type(value) is np.ndarray and value.dtype == _NATIVE_FLOAT32 and value.shape == shape
            and value.flags.c_contiguous and value.flags.writeable):
        return value  # what the checks below accept, without a memoryview (decode calls this per token)
    try:
        view = _buffers.probe(value)
    except TypeError:
        raise TypeError(
            f"{_PACKAGE} {what}: state buffer {name} must be a numpy ndarray -- any writable float32 buffer "
            f"-- (it is read and written in place), got {type(value)!r}"
        ) from None
    if not _buffers.is_float32(view):
        dtype = getattr(getattr(value, "dtype", None), "name", None) or f"format {view.format!r}"
        raise TypeError(
            f"{_PACKAGE} {what}: state buffer {name} has dtype {dtype}, want float32 (the state is part of "
            "the fp32 profile and round-trips byte for byte)"
        )
    if tuple(view.shape) != shape:
        raise ValueError(f"{_PACKAGE} {what}: state buffer {name} has shape {tuple(view.shape)}, want {shape}")
    if not view.c_contiguous or view.readonly:
        raise ValueError(
            f"{_PACKAGE} {what}: state buffer {name} must be C-contiguous and writable; it is updated IN "
            "PLACE so the caller's array always holds the post-call state (allocate_state() makes "
            "conforming buffers)"
        )
    return np.asarray(value)


class TransformerState(_state_file.SavedState):
    """The block's decode state, the KV cache (docs/blocks.md §4.2), updated in place by forward and step.

    With B = batch_size, KV = n_kv_heads, HD = head_dim and capacity = window if window > 0 else
    max_tokens, `k_cache` and `v_cache` are FLAT float32 arrays of B * KV * capacity * HD floats. Full
    causal: the first B * KV * cached_tokens * HD floats are the [B, KV, cached_tokens, HD] cache
    (packed at stride cached_tokens, slot j = absolute position j) and the rest is zeros. Sliding
    window W: a ring of W slots per (batch row, kv head), slot = position mod W. `cached_tokens`
    counts the absolute positions consumed. Writes through `k_cache` / `v_cache` (or a view of them)
    are what the next call reads; `copy()` makes an independent state.

    A state made by allocate_state (or copy) is the engine's C++ state, which owns its buffers and their
    layout: while no view of them is alive it may hold the cache in a private layout where a decode step
    appends its row without moving the cache, and may skip re-scanning contents only it has written.
    Reading `k_cache`, `v_cache`, `keys()`, `values()` or `cached_tokens` always shows the packed layout
    above. Buffers given to the constructor stay the caller's: the engine borrows them for each call, and
    they are always packed.
    """

    def __init__(self, batch_size, n_kv_heads, head_dim, max_tokens, k_cache, v_cache, cached_tokens=0, window=0):
        self.batch_size = int(batch_size)
        self.n_kv_heads = int(n_kv_heads)
        self.head_dim = int(head_dim)
        self.max_tokens = int(max_tokens)
        self.window = int(window)
        self._native = None  # the engine's own state (allocate_state, copy); None while the buffers are the caller's
        self._k = k_cache
        self._v = v_cache
        self._cached = int(cached_tokens)

    @classmethod
    def _wrap(cls, engine_state):
        """The Python face of an engine-owned state."""
        state = cls.__new__(cls)
        state.batch_size = engine_state.batch_size
        state.n_kv_heads = engine_state.n_kv_heads
        state.head_dim = engine_state.head_dim
        state.max_tokens = engine_state.max_tokens
        state.window = engine_state.window
        state._native = engine_state
        state._cached = None  # a position count past int64 that the engine's state cannot hold (see below)
        return state

    def _engine_state(self, what, floats):
        """The C++ state a call runs on: the engine's own, or one borrowing the caller's checked buffers."""
        if self._native is not None:
            if self._cached is not None:
                self._native.cached_tokens = self._cached  # past int64: refused here, as for caller buffers
            return self._native
        k = _state_buffer(self._k, what, "k_cache", (floats,))
        v = _state_buffer(self._v, what, "v_cache", (floats,))
        return native().TransformerStateEngine.borrow(k, v, self.batch_size, self.n_kv_heads, self.head_dim,
                                                      self.max_tokens, self._cached, self.window)

    def _engine_done(self, engine_state):
        """After a call on a borrowed state: its new position count."""
        if self._native is None:
            self._cached = engine_state.cached_tokens

    def _buffer(self, name):
        return getattr(self._native, name) if self._native is not None else getattr(self, "_" + name[0])

    def _replace(self, name, value):
        """A buffer the caller gives: the state borrows it (and the other buffer, as it reads now) from now on."""
        if self._native is not None:
            self._k, self._v, self._cached = self._native.k_cache, self._native.v_cache, self.cached_tokens
            self._native = None
        setattr(self, "_" + name[0], value)

    k_cache = property(lambda self: self._buffer("k_cache"), lambda self, value: self._replace("k_cache", value),
                       doc="The flat key buffer (packed layout), writable; writes are read by the next call.")
    v_cache = property(lambda self: self._buffer("v_cache"), lambda self, value: self._replace("v_cache", value),
                       doc="The flat value buffer, like k_cache.")

    @property
    def cached_tokens(self):
        """Absolute positions consumed so far."""
        return self._native.cached_tokens if self._native is not None and self._cached is None else self._cached

    @cached_tokens.setter
    def cached_tokens(self, value):
        value = int(value)
        if self._native is not None and -(2**63) <= value < 2**63:
            self._native.cached_tokens, value = value, None
        self._cached = value

    @property
    def capacity(self):
        """Slots per (batch row, kv head): max_tokens for full causal, window for the ring."""
        return self.window if self.window > 0 else self.max_tokens

    def _borrowed_copy(self):
        """A C++ state borrowing float32 copies of the caller's buffers, or None if they cannot hold this state."""
        k, v = (np.array(b, dtype=np.float32).reshape(-1) for b in (self._k, self._v))
        try:
            return native().TransformerStateEngine.borrow(k, v, self.batch_size, self.n_kv_heads, self.head_dim,
                                                          self.max_tokens, self._cached, self.window)
        except (ValueError, TypeError, OverflowError):
            return None

    def copy(self):
        """An independent state with the same contents (the buffers copied)."""
        if self._native is not None:
            out = TransformerState._wrap(self._native.clone())
            out._cached = self._cached
            return out
        borrowed = self._borrowed_copy()
        if borrowed is not None:
            return TransformerState._wrap(borrowed.clone())
        k, v = (np.array(b, dtype=np.float32).reshape(-1) for b in (self._k, self._v))
        return TransformerState(self.batch_size, self.n_kv_heads, self.head_dim, self.max_tokens, k, v,
                                self._cached, self.window)

    def _used(self, which):
        if self._native is not None:
            return getattr(self._native, which)()
        borrowed = native().TransformerStateEngine.borrow(
            np.asarray(self._k).reshape(-1), np.asarray(self._v).reshape(-1), self.batch_size, self.n_kv_heads,
            self.head_dim, self.max_tokens, self._cached, self.window)
        return getattr(borrowed, which)()

    def keys(self):
        """The cached keys as (B, n_kv_heads, held, head_dim): a view for full causal (valid until the
        next call), a copy of the min(cached_tokens, window) most recent positions for a window."""
        return self._used("keys")

    def values(self):
        """The cached values, shaped like keys()."""
        return self._used("values")

    def __repr__(self):
        return (
            f"TransformerState(batch_size={self.batch_size}, n_kv_heads={self.n_kv_heads}, "
            f"head_dim={self.head_dim}, max_tokens={self.max_tokens}, window={self.window}, "
            f"cached_tokens={self.cached_tokens})"
        )


class TransformerBlockInference:
    """Forward-only Llama decoder block on the CPU, bit-exact with mojolearn's TransformerBlock.

    Input RMSNorm, self-attention with RoPE (theta 10000, rotate-half, absolute positions), grouped-query
    heads and a KV cache (full causal, or a sliding window of `window` keys), residual, post-attention
    RMSNorm, SwiGLU MLP, residual. `weights` is a dict of the nine upstream tensor names (float32, or
    packed by samebits.lowbit and materialized exactly). `forward(x)` runs from a zero state;
    `allocate_state(B, max_tokens)`, `forward(x, state)` and `step(x, state)` carry the KV cache, and a
    token-by-token decode gives the bits of one forward over the whole sequence. `lengths=` runs a
    right-padded ragged batch. Every upstream block option is served bit for bit (docs/models.md §2):
    rope_theta, rope_scaling (linear, llama3), rope_dim, max_positions, qkv_bias, o_bias, norm (rmsnorm,
    layernorm, rmsnorm_offset), norm_eps, norm_bias, mlp (swiglu, gelu, gelu_tanh, geglu, geglu_tanh),
    mlp_bias, qk_norm and attn_softcap, each with the tensors it adds.
    """

    def __init__(
        self,
        weights,
        *,
        n_heads,
        n_kv_heads=None,
        head_dim=None,
        window=0,
        rope_theta=10000.0,
        rope_scaling=None,
        rope_dim=None,
        max_positions=8192,
        qkv_bias=False,
        o_bias=False,
        norm="rmsnorm",
        norm_eps=1e-6,
        norm_bias=False,
        mlp="swiglu",
        mlp_bias=False,
        qk_norm=False,
        attn_softcap=None,
        numeric_mode=None,
    ):
        if not hasattr(weights, "keys"):
            raise TypeError(
                f"{_PACKAGE} {_WHAT}: weights must be a dict of float32 arrays (numpy arrays) keyed by the "
                f"upstream parameter names {list(_NAMES)}"
            )
        if numeric_mode is not None and numeric_mode != "identical":
            raise ValueError(
                f"{_PACKAGE} {_WHAT}: numeric_mode={numeric_mode!r} is not served; samebits runs the "
                "'identical' tier only"
            )
        weights, self.weight_format = _lowbit.unpack(weights, "TransformerBlockInference")
        arguments = locals()
        options = _block_options({name: arguments[name] for name in _OPTION_ARGUMENTS})
        bad_rope_dim = options.pop("rope_dim_bad", None)
        native().transformer_check_weight_names(list(weights.keys()), options)
        nh = int(n_heads)
        nkv = None if n_kv_heads is None else int(n_kv_heads)
        hd = None if head_dim is None else int(head_dim)
        if bad_rope_dim is not None:
            options["rope_dim"] = -1  # refused by the engine once it knows head_dim; the message is rebuilt here
        names = [name for name in _NAMES if name in weights] + [name for name in _OPT_NAMES if name in weights]
        order = [_NAMES[i] for i in _DTYPE_ORDER if _NAMES[i] in weights] + [n for n in _OPT_NAMES if n in weights]
        arrays = {name: _blocks.float32_strict(weights[name], _WHAT, name, _DTYPE_SENTENCE) for name in order}
        try:
            self._engine = native().TransformerEngine(names, [arrays[name] for name in names], nh, nkv, hd, int(window),
                                                      self.weight_format, options)
        except ValueError as error:
            if bad_rope_dim is None or "rope_dim must be" not in str(error):
                raise
            head = str(error).split("head_dim=")[1].split("]")[0]
            raise ValueError(f"{_PACKAGE} {_WHAT}: rope_dim must be an even integer in (0, head_dim={head}], got "
                             f"{bad_rope_dim!r}") from None
        self.d_model = self._engine.d_model
        self.n_heads = self._engine.n_heads
        self.n_kv_heads = self._engine.n_kv_heads
        self.head_dim = self._engine.head_dim
        self.intermediate = self._engine.intermediate
        self.window = self._engine.window

    def allocate_state(self, batch_size, max_tokens):
        """A zero TransformerState for `batch_size` sequences of up to `max_tokens` positions in all
        (prefill plus every later step). max_tokens above max_positions (8192 by default), or a table whose RoPE
        angles leave the sin/cos domain (docs/models.md §4), is refused at the first call."""
        what = f"{_PACKAGE} TransformerBlockInference.allocate_state"
        b, smax = _checks.count(batch_size, what, "batch_size"), _checks.count(max_tokens, what, "max_tokens")
        return TransformerState._wrap(self._engine.allocate(b, smax))

    def _tokens(self, x, what, step):
        x = _blocks.float32_strict(x, what, "x", _DTYPE_SENTENCE)
        self._engine.check_tokens(list(x.shape), step)
        return x

    def _call(self, x, state, step, reference=False):
        what = f"{_WHAT}.step" if step else f"{_WHAT}.forward"
        x = self._tokens(x, what, step)
        if state is None:
            return self._engine.forward_reference(x) if reference else self._engine.forward(x)
        if not isinstance(state, TransformerState):
            raise TypeError(
                f"{_PACKAGE} {what}: state must be a TransformerState (allocate_state(B, max_tokens) makes "
                f"one), got {type(state).__name__}"
            )
        batch = int(x.shape[0])
        self._engine.check_state(batch, state.batch_size, state.window, step)
        if state.n_kv_heads != self.n_kv_heads or state.head_dim != self.head_dim:
            # Another block's cache can have this block's float count (KV * HD alike): refused by its dims.
            raise ValueError(
                f"{_PACKAGE} {what}: the state was allocated for n_kv_heads {state.n_kv_heads} x head_dim "
                f"{state.head_dim} but this block has n_kv_heads {self.n_kv_heads} x head_dim {self.head_dim} "
                "(allocate_state on THIS block makes a matching one)"
            )
        engine_state = state._engine_state(what, batch * self.n_kv_heads * state.capacity * self.head_dim)
        y = self._engine.forward_state(x, engine_state, step, reference)
        state._engine_done(engine_state)
        return y

    def forward(self, x, state=None, *, lengths=None):
        """(B, L, d_model) float32 -> (B, L, d_model) float32. With `state` the cache is read and
        updated in place; `lengths` (stateless only) makes the batch ragged, right-padded."""
        if lengths is None:
            return self._call(x, state, False)
        what = f"{_WHAT}.forward"
        x = self._tokens(x, what, False)
        return _blocks.ragged_forward(lambda padded: self._call(padded, None, False), x, state, lengths, what)

    __call__ = forward

    def step(self, x, state):
        """One token per batch row: x (B, 1, d_model) or (B, d_model); the output has x's rank."""
        _blocks.require_state(_WHAT, state, "allocate_state(B, max_tokens)")
        return self._call(x, state, True)

    def step_many(self, x, states):
        """One token for each of N independent sequences (docs/api.md §18): row i of x (N, d_model) or
        (N, 1, d_model) continues states[i] (one-row states, each at its own position, none listed twice);
        row i of the result (x's shape) is bit for bit step(x[i:i+1], states[i]). Every state is checked
        before any cache moves."""
        what = f"{_WHAT}.step"
        x = _blocks.float32_strict(x, f"{_WHAT}.step_many", "x", _DTYPE_SENTENCE)
        states = list(states)
        for i, state in enumerate(states):
            if not isinstance(state, TransformerState):
                raise TypeError(
                    f"{_PACKAGE} {what}_many: state {i} must be a TransformerState (allocate_state(1, max_tokens) "
                    f"makes one), got {type(state).__name__}"
                )
            # By identity: a state over caller buffers gets a fresh engine state per call.
            for j in range(i):
                if states[j] is state:
                    raise ValueError(
                        f"{_PACKAGE} {what}_many: state {i} is state {j} again; each sequence needs its own state"
                    )
        engines = [
            s._engine_state(what, s.batch_size * s.n_kv_heads * s.capacity * s.head_dim) for s in states
        ]
        y = self._engine.step_many(x, engines)
        for state, engine_state in zip(states, engines):
            state._engine_done(engine_state)
        return y

    def _forward_reference(self, x, state=None, *, step=False):
        """The engine's scalar twin (for cross-checks): the same refusals, the same bits."""
        return self._call(x, state, step, reference=True)

    def backward(self, x, grad_output):
        self._engine.backward()

    def __repr__(self):
        return (
            f"TransformerBlockInference(d_model={self.d_model}, n_heads={self.n_heads}, "
            f"n_kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, intermediate={self.intermediate}, "
            f"window={self.window})"
        )
