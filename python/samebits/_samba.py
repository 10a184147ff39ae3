"""SambaInference: the forward-only Samba language model (embedding, Mamba-3 and attention blocks, final
RMSNorm, tied or untied head) over token ids, bit-exact on the CPU; SambaState carries decoding."""

import codecs
import os
import secrets

import numpy as np

from . import _blocks, _checks, _state_file
from . import lowbit as _lowbit
from ._mamba3 import Mamba3State
from ._native import native
from ._samba_config import SambaConfig
from ._transformer import TransformerState

PACKAGE = _blocks.PACKAGE
_CLASS = f"{PACKAGE}.SambaInference"
_DTYPE_SENTENCE = (
    "this surface is float32 ONLY (the fp32 profile mojolearn.samba-stack.fp32.v1). bfloat16 and float16 are "
    "refused BY NAME: a reduced-precision run is not this profile. float64 is refused rather than downcast so "
    "the bits that ran are the bits you passed. Convert yourself and pass float32."
)


# Up to this many ids are range-checked as Python ints (exact for every integer dtype).
_FEW_IDS = 64


class SambaState(_state_file.SavedState):
    """A decode state: `batch_size`, `max_tokens` and one block state per layer in stack order
    (`Mamba3State` for a mamba3 layer, `TransformerState` for an attention layer)."""

    def __init__(self, batch_size, max_tokens, layers):
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens)
        self.layers = list(layers)

    def copy(self):
        """An independent copy: every layer's state copied, so both continue bit-identically from here."""
        return SambaState(self.batch_size, self.max_tokens, [layer.copy() for layer in self.layers])

    def __repr__(self):
        return f"SambaState(batch_size={self.batch_size}, max_tokens={self.max_tokens}, layers={len(self.layers)})"


def _stops(stop, vocab, what):
    if stop is None:
        return []
    items = [stop] if isinstance(stop, (str, bytes, bytearray)) else stop
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"{what}: stop must be a str, bytes or a list of them, got {type(stop).__name__}")
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item.encode("utf-8"))
        elif isinstance(item, (bytes, bytearray)):
            out.append(bytes(item))
        else:
            raise TypeError(f"{what}: stop must be a str, bytes or a list of them, got an item of type "
                            f"{type(item).__name__}")
    if out and vocab != 256:
        raise ValueError(f"{what}: stop strings apply to a byte-level (vocab 256) model; this one has vocab {vocab}")
    return out


def _stream(generation, mode, byte_level):
    """The pieces of a generation as they are decoded: str (text prompt), bytes (bytes prompt) or ids."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace") if mode == "text" else None
    while True:
        piece = generation.next()
        released = generation.flush() if piece is None else piece[1]
        if mode == "ids" and not byte_level:
            if piece is None:
                return
            yield piece[0]
            continue
        if mode == "text":
            text = decoder.decode(released, final=piece is None)
            if text:
                yield text
        elif mode == "bytes":
            if released:
                yield released
        else:
            yield from released
        if piece is None:
            return


def _ids(inputs, what, ndims):
    """Token ids as an integer numpy array of one of the ranks in `ndims` (any integer dtype; the range is
    checked on the original values before any conversion)."""
    array = _checks.id_array(inputs)
    if array is None or (array.dtype.kind not in "iu" and not np.issubdtype(array.dtype, np.integer)):
        kind = type(inputs).__name__ if array is None else array.dtype.name
        raise TypeError(f"{PACKAGE} {what}: inputs must be integer token ids, got {kind}")
    if array.ndim not in ndims:
        raise ValueError(
            f"{_CLASS}.step: inputs must be (B,) or (B, 1) integer ids"
            if 1 in ndims
            else f"{_CLASS}: inputs must be (B, L) integer ids"
        )
    return array


class SambaInference:
    """Forward-only Samba language model on the CPU: (B, L) integer ids -> (B, L, vocab) float32 logits.

    Build it from a SambaStack checkpoint with `from_checkpoint`, or from a `SambaConfig` and a dict of
    weights keyed by the config's registry names (float32, or packed by `samebits.lowbit`; packed weights
    are materialized exactly). `allocate_state`, `forward(ids, state)` and `step` carry a decode state;
    a step's logits equal the one-shot forward's at that position, bit for bit.
    """

    def __init__(self, config, weights):
        if not isinstance(config, SambaConfig):
            raise TypeError(f"{_CLASS}: config must be a SambaConfig")
        if not hasattr(weights, "keys"):
            raise TypeError(f"{_CLASS}: weights must be a dict keyed by the registry names")
        weights, self.weight_format = _lowbit.unpack(weights, "SambaInference")
        registry = config.registry()
        names = [name for name, _ in registry]
        missing = [n for n in names if n not in weights]
        unknown = [n for n in weights if n not in set(names)]
        if missing or unknown:
            raise ValueError(f"{_CLASS}: weight dict mismatch; missing {missing!r}, unknown {unknown!r}")
        arrays = []
        for name, shape in registry:
            array = _blocks.float32_strict(weights[name], "SambaInference", name, _DTYPE_SENTENCE)
            if tuple(array.shape) != tuple(shape):
                raise ValueError(f"{_CLASS}: {name} has shape {tuple(array.shape)!r}, want {tuple(shape)!r}")
            if not np.isfinite(array).all():
                raise ValueError(f"{_CLASS}: {name} is not finite")
            arrays.append(array)
        self.config = config
        self._engine = native().SambaEngine(config.to_dict(), names, arrays, self.weight_format)

    @classmethod
    def from_checkpoint(cls, path):
        """Build from a SambaStack checkpoint: the streamed v2 archive or the legacy JSON. Every integrity
        check runs; schema, profile and registry must match the config. Every refusal is a ValueError."""
        # The engine reads the file straight into its own buffers (no numpy round trip), so the peak memory
        # is about the parameter bytes once (bench/load_memory.py, tests/python/test_load_memory.py).
        path = os.fsdecode(os.fspath(path))
        if "\0" in path:  # the native reader would stop at the NUL and open another file
            raise ValueError(f"{_CLASS}: checkpoint path contains a NUL byte")
        _checks.refuse_wrong_kind(path, f"{_CLASS}.from_checkpoint", _checks.NOT_SAMBA,
                          "a Samba checkpoint (v2 archive or legacy JSON)")
        engine = native().SambaEngine.from_checkpoint(path)
        self = cls.__new__(cls)
        self.config = SambaConfig.from_dict(engine.config_dict)
        self.weight_format = engine.weight_format
        self._engine = engine
        return self

    def parameters(self):
        """An independent copy of every weight, keyed by registry name."""
        return {name: self._engine.parameter(name) for name, _ in self.config.registry()}

    def allocate_state(self, batch_size, max_tokens):
        """A zero SambaState for `batch_size` sequences of up to `max_tokens` positions."""
        what = f"{_CLASS}.allocate_state"
        b, smax = _checks.count(batch_size, what, "batch_size"), _checks.count(max_tokens, what, "max_tokens")
        if b < 1 or smax < 1:
            raise ValueError(f"{_CLASS}.allocate_state: batch_size and max_tokens must be positive")
        c = self.config
        if "attention" in c.layers and b * c.n_kv_heads * smax * c.head_dim > 2**61:
            # The engine's own bound, here because extents past int64 cannot reach it.
            shape = " x ".join(str(e) for e in (b, c.n_kv_heads, smax, c.head_dim))
            raise ValueError(f"TransformerState: a state of {shape} floats is too large to allocate (more than 2^61)")
        layers = [TransformerState._wrap(layer) if kind == "attention" else Mamba3State._adopt(layer)
                  for kind, layer in zip(c.layers, self._engine.allocate_layers(b, smax))]
        return SambaState(b, smax, layers)

    def _layers(self, state, what, batch):
        if not isinstance(state, SambaState):
            raise TypeError(f"{PACKAGE} {what}: state must be a SambaState (allocate_state)")
        if state.batch_size != batch or len(state.layers) != len(self.config.layers):
            raise ValueError(
                f"{PACKAGE} {what}: the state holds {state.batch_size} rows and {len(state.layers)} layers, "
                f"the call has B = {batch} and the stack {len(self.config.layers)} layers"
            )
        handles = []
        for i, (kind, layer) in enumerate(zip(self.config.layers, state.layers)):
            if kind == "mamba3":
                if not isinstance(layer, Mamba3State):
                    raise TypeError(f"{PACKAGE} {what}: state.layers[{i}] must be a Mamba3State")
                handles.append(layer._native)
            else:
                if not isinstance(layer, TransformerState) or layer.window != 0:
                    raise TypeError(f"{PACKAGE} {what}: state.layers[{i}] must be a full-causal TransformerState")
                if (layer.n_kv_heads, layer.head_dim) != (self.config.n_kv_heads, self.config.head_dim):
                    # The flat cache size alone can match (4 heads of 8 vs 2 of 16) and would be misread.
                    raise ValueError(
                        f"{PACKAGE} {what}: state.layers[{i}] holds {layer.n_kv_heads} kv heads of {layer.head_dim}, "
                        f"the stack has {self.config.n_kv_heads} of {self.config.head_dim}"
                    )
                floats = layer.batch_size * layer.n_kv_heads * layer.max_tokens * layer.head_dim
                handles.append(layer._engine_state(what, floats))
        return handles

    def _run(self, ids, state, step, what, reference=False):
        batch, length = int(ids.shape[0]), int(ids.shape[1])
        if batch < 1 or length < 1:
            raise ValueError(f"{PACKAGE} {what}: B and L must be positive")
        if ids.size <= _FEW_IDS:  # a decode step's few ids: Python's min/max cost less than two reductions
            few = ids.ravel().tolist()
            out_of_range = min(few) < 0 or max(few) >= self.config.vocab
        else:
            out_of_range = ids.min() < 0 or ids.max() >= self.config.vocab
        if out_of_range:
            raise ValueError(f"{PACKAGE} {what}: inputs must be in [0, vocab)")
        ids32 = ids if ids.dtype == np.int32 and ids.flags.c_contiguous else np.ascontiguousarray(ids, dtype=np.int32)
        handles = None if state is None else self._layers(state, what, batch)
        if state is not None:
            # A Mamba3State may also be the state of a standalone Mamba3BlockInference whose reports
            # (h_last_, ...) are still owed from it: they are computed before this call moves it.
            for layer in state.layers:
                if isinstance(layer, Mamba3State):
                    layer._before_change()
        logits = self._engine.run(ids32, handles, step, reference)
        if state is not None:
            for layer, handle in zip(state.layers, handles):
                if isinstance(layer, TransformerState):
                    layer._engine_done(handle)
        return logits

    def forward(self, inputs, state=None, *, lengths=None):
        """(B, L) integer ids in [0, vocab) -> (B, L, vocab) float32 logits. With `state` every block's
        state is read and updated in place; `lengths` (stateless only) makes the batch ragged."""
        what = "SambaInference.forward"
        ids = _ids(inputs, what, (2,))
        if lengths is not None:
            if state is not None:
                raise ValueError(f"{PACKAGE} {what}: lengths= applies to the stateless forward only; pass state=None")
            # Padding ids (any junk, even out of range) become id 0; padding logits become +0.0.
            return _blocks.ragged_forward(lambda padded: self._run(padded, None, False, what), ids, None, lengths, what)
        return self._run(ids, state, False, what)

    logits = forward
    __call__ = forward

    def step(self, inputs, state):
        """Decode one token per row: ids (B,) or (B, 1) -> (B, vocab) logits; `state` is required."""
        what = "SambaInference.step"
        if state is None:
            raise ValueError(f"{_CLASS}.step: state is required (allocate_state(B, max_tokens) makes the fresh one)")
        ids = _ids(inputs, what, (1, 2))
        if ids.ndim == 2 and ids.shape[1] != 1:
            raise ValueError(f"{_CLASS}.step: inputs must be (B,) or (B, 1) integer ids")
        rows = int(ids.shape[0])
        out = self._run(ids.reshape(rows, 1), state, True, what)
        return out.reshape(rows, self.config.vocab)

    def step_many(self, inputs, states):
        """One token for each of N independent sequences (docs/api.md §18): ids (N,) continue `states`, N one-row
        SambaStates each at its own position -> (N, vocab) logits, row i bit for bit step([ids[i]], states[i]);
        the weights are read once for all rows."""
        what = "SambaInference.step_many"
        ids = _ids(inputs, what, (1, 2))
        if ids.ndim == 2 and ids.shape[1] != 1:
            raise ValueError(f"{_CLASS}.step_many: inputs must be (N,) or (N, 1) integer ids")
        ids = ids.reshape(-1)
        states = list(states)
        if ids.size < 1 or ids.size != len(states):
            raise ValueError(f"{PACKAGE} {what}: give one id per state and at least one, got {ids.size} ids and "
                             f"{len(states)} states")
        if ids.min() < 0 or ids.max() >= self.config.vocab:
            raise ValueError(f"{PACKAGE} {what}: inputs must be in [0, vocab)")
        for i, state in enumerate(states):
            if any(state is other for other in states[:i]):
                raise ValueError(f"{PACKAGE} {what}: state {i} is state {states.index(state)} again; each sequence "
                                 "needs its own state")
        sequences = [self._layers(state, what, 1) for state in states]
        for state in states:
            for layer in state.layers:
                if isinstance(layer, Mamba3State):
                    layer._before_change()
        logits = self._engine.step_many(ids.astype(np.int32).tolist(), sequences)
        for state, handles in zip(states, sequences):
            for layer, handle in zip(state.layers, handles):
                if isinstance(layer, TransformerState):
                    layer._engine_done(handle)
        return logits

    def generate(self, prompt, max_new_tokens=200, *, temperature=0.8, top_k=0, top_p=1.0, min_p=0.0,
                 repetition_penalty=1.0, repetition_window=64, presence_penalty=0.0, frequency_penalty=0.0,
                 seed=None, stop=None, stream=False):
        """Sample up to `max_new_tokens` tokens after `prompt` with the shared sampler (docs/api.md §16).

        `prompt`: a str (UTF-8) or bytes for a byte-level (vocab 256) model, or a sequence / 1-D array of
        token ids. Returns only the continuation, of the prompt's kind: str, bytes or a list of ids. With
        `stream=True` an iterator yields it piece by piece as it is decoded. `seed=None` draws a random seed;
        the same seed, options and prompt give the same tokens, on every machine. `stop` (str, bytes or a
        list of them; byte-level models only) ends generation before a stop string, which is not returned.
        """
        what = f"{_CLASS}.generate"
        vocab = self.config.vocab
        if isinstance(prompt, str):
            mode, ids = "text", list(prompt.encode("utf-8"))
        elif isinstance(prompt, (bytes, bytearray)):
            mode, ids = "bytes", list(bytes(prompt))
        else:
            mode = "ids"
            if isinstance(prompt, (list, tuple)) and not prompt:
                raise ValueError(f"{what}: prompt must hold at least one token id")
            array = np.asarray(prompt)
            if array.dtype.kind not in "iu" or array.ndim not in (1, 2) or (array.ndim == 2 and array.shape[0] != 1):
                raise TypeError(f"{what}: prompt must be a str, bytes, or token ids (a sequence of ints or an (L,) "
                                f"/ (1, L) integer array), got {type(prompt).__name__}"
                                + (f" of dtype {array.dtype.name} and shape {array.shape}" if array.ndim else ""))
            array = array.reshape(-1)
            if array.size == 0:
                raise ValueError(f"{what}: prompt must hold at least one token id")
            if array.min() < 0 or array.max() >= vocab:
                raise ValueError(f"{what}: prompt ids must be in [0, vocab) = [0, {vocab})")
            ids = [int(v) for v in array]
        if mode != "ids":
            if vocab != 256:
                raise ValueError(f"{what}: a str or bytes prompt needs a byte-level (vocab 256) model; this one has "
                                 f"vocab {vocab}: pass token ids")
            if not ids:
                ids = [10]  # an empty prompt starts from a newline, as the command line does
        max_new = _checks.count(max_new_tokens, what, "max_new_tokens")
        if max_new < 1:
            raise ValueError(f"{what}: max_new_tokens must be positive, got {max_new}")
        if seed is None:
            seed = secrets.randbits(63)
        seed = _checks.count(seed, what, "seed")
        if not 0 <= seed < 2**64:
            raise ValueError(f"{what}: seed must be in [0, 2^64), got {seed}")
        sampler = native().SamplerEngine(
            _checks.real(temperature, what, "temperature"), _checks.count(top_k, what, "top_k"),
            _checks.real(top_p, what, "top_p"), _checks.real(min_p, what, "min_p"),
            _checks.real(repetition_penalty, what, "repetition_penalty"),
            _checks.count(repetition_window, what, "repetition_window"),
            _checks.real(presence_penalty, what, "presence_penalty"),
            _checks.real(frequency_penalty, what, "frequency_penalty"), seed)
        generation = native().SambaGeneration(self._engine, ids, max_new, sampler, _stops(stop, vocab, what))
        if stream:
            return _stream(generation, mode, vocab == 256)
        tokens, text = generation.run()
        if mode == "text":
            return text.decode("utf-8", errors="replace")
        if mode == "bytes":
            return text
        return list(text) if vocab == 256 else tokens

    def _forward_reference(self, inputs, state=None):
        """The engine's scalar twin (for cross-checks): the same refusals, the same bits."""
        return self._run(_ids(inputs, "SambaInference.forward", (2,)), state, False, "SambaInference.forward", True)

    def _refuse(self, name):
        raise NotImplementedError(
            f"{PACKAGE} SambaInference.{name}: inference is forward only; losses, backward and training run "
            "on mojolearn's SambaStack"
        )

    def loss(self, inputs, targets):
        self._refuse("loss")

    def train_step(self, inputs, targets):
        self._refuse("train_step")

    def __repr__(self):
        return repr(self._engine)
