"""CausalLM: a language model over a Hugging Face checkpoint directory (llama / smollm, mistral, qwen2, qwen3,
phi3, mamba, mamba2), its decode state and greedy generation (docs/models.md §15-§19)."""

import numpy as np

from . import _state_file
from ._native import native

_LOAD = "samebits.models.CausalLM.load"
_CALL = "samebits CausalLM"
_FORMATS = ("float32", "bfloat16", "int8")
_LOADERS = ("samebits", "mojolearn")


def _ids(ids, what, step):
    """Token ids as a C-contiguous int32 (B, L) array; the range is checked on the original values."""
    if type(ids) is np.ndarray:
        array = ids
    else:
        try:
            array = np.asarray(memoryview(ids))
        except TypeError:
            array = np.asarray(ids) if isinstance(ids, (list, tuple)) else None
    if array is None:
        raise TypeError(f"{_CALL}.{what}: ids must be integer, got {type(ids).__name__}")
    if array.dtype.kind not in "iu":
        raise TypeError(f"{_CALL}.{what}: ids must be integer, got buffer format {array.dtype.char!r}")
    if step:
        if array.ndim == 1:
            array = array.reshape(-1, 1)
        if array.ndim != 2 or array.shape[1] != 1:
            raise ValueError(f"{_CALL}.{what}: ids must be (B,) or (B, 1) for a step, got shape {array.shape}")
    elif array.ndim != 2:
        raise ValueError(f"{_CALL}.{what}: ids must be (B, L), got shape {array.shape}")
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"{_CALL}.{what}: B and L must be positive, got {tuple(array.shape)}")
    return array


def _int32(array, vocab, what):
    if array.size and (array.min() < 0 or array.max() >= vocab):
        raise ValueError(f"{_CALL}.{what}: ids must be in [0, {vocab})")
    return np.ascontiguousarray(array, dtype=np.int32)


class CausalLMState(_state_file.SavedState):
    """One batch's decode state: one block state per layer and the positions consumed; it belongs to the
    model whose `allocate_state` made it."""

    def __init__(self, engine, owner):
        self._engine = engine
        self._owner = owner

    @property
    def batch_size(self):
        return self._engine.batch_size

    @property
    def max_tokens(self):
        return self._engine.max_tokens

    @property
    def layers(self):
        """The number of layer states (one per block, in stack order)."""
        return self._engine.layers

    @property
    def positions(self):
        return self._engine.positions

    def buffers_bytes(self):
        """Every layer's state buffers (and position counts), in stack order, as one bytes object: two states
        hold the same contents exactly when these are equal."""
        return self._engine.buffers_bytes()

    def clone(self):
        """An independent copy; continuing it gives the bits the original would."""
        return CausalLMState(self._engine.clone(), self._owner)

    def __repr__(self):
        return (
            f"CausalLMState(batch_size={self.batch_size}, max_tokens={self.max_tokens}, layers={self.layers}, "
            f"positions={self.positions})"
        )


class CausalLM:
    """A causal language model loaded from a Hugging Face checkpoint directory or a GGUF file; (B, L) integer ids ->
    (B, L, vocab) float32 logits, with exact fp32 bits on every thread count and SIMD target."""

    def __init__(self, engine):
        self._engine = engine

    @classmethod
    def load(cls, path, weight_format="float32", max_positions=None, loader="samebits"):
        """Loads `path`: a directory (config.json + safetensors) or a GGUF file (llama, qwen2, qwen3, phi3;
        docs/gguf.md §10). weight_format "float32", "bfloat16" or "int8";
        max_positions the transformer's position ceiling (default min(max_position_embeddings, 8192));
        loader "samebits" (the checkpoint as its config defines it) or "mojolearn" (upstream's quirks)."""
        if weight_format not in _FORMATS:
            raise ValueError(f"{_LOAD}: weight_format must be one of {_FORMATS}, got {weight_format!r}")
        if loader not in _LOADERS:
            raise ValueError(f"{_LOAD}: loader must be 'samebits' or 'mojolearn', got {loader!r}")
        if max_positions is not None:
            if isinstance(max_positions, bool) or not isinstance(max_positions, (int, np.integer)):
                raise TypeError(f"{_LOAD}: max_positions must be an int or None, got {type(max_positions).__name__}")
            max_positions = int(max_positions)
        return cls(native().CausalLMEngine.load(str(path), weight_format, max_positions, loader))

    # -------------------------------------------------------------- calls

    def _state(self, state, what):
        if not isinstance(state, CausalLMState):
            raise TypeError(f"{_CALL}.{what}: state must be a CausalLMState (allocate_state)")
        return state._engine

    def forward(self, ids, state=None):
        """Logits (B, L, vocab). Without a state the transformer layers run on a fresh cache of L positions;
        with one, the call continues it by L positions."""
        ids32 = _int32(_ids(ids, "forward", False), self.vocab_size, "forward")
        engine_state = None if state is None else self._state(state, "forward")
        return self._engine.forward(ids32, engine_state)

    def step(self, ids, state):
        """One token per row: ids (B,) or (B, 1) -> logits (B, vocab)."""
        if state is None:
            raise ValueError(f"{_CALL}.step: state is required (allocate_state(B, max_tokens) makes the fresh one)")
        ids32 = _int32(_ids(ids, "step", True), self.vocab_size, "step")
        return self._engine.step(ids32, self._state(state, "step"))

    def allocate_state(self, batch_size, max_tokens):
        """Zero state for batch_size rows and up to max_tokens positions."""
        return CausalLMState(self._engine.allocate_state(int(batch_size), int(max_tokens)), self)

    def reset_state(self, state):
        """New zero layer states of the same shape, positions 0; returns the same state object."""
        if not isinstance(state, CausalLMState):
            raise ValueError(f"{_CALL}.reset_state: state belongs to another model")
        self._engine.reset_state(state._engine)
        return state

    def generate(self, ids, max_new_tokens, *, greedy=True):
        """Greedy decoding: (B, L + max_new_tokens) int32 (docs/models.md §19)."""
        if greedy is not True:
            raise NotImplementedError(
                f"{_CALL}.generate: greedy=True is the only decoding implemented; got greedy={greedy!r}"
            )
        n = int(max_new_tokens)
        if n < 0:
            raise ValueError(f"{_CALL}.generate: max_new_tokens must be >= 0, got {n}")
        array = _ids(ids, "generate", False)
        return self._engine.generate(_int32(array, self.vocab_size, "generate"), n)

    # -------------------------------------------------------------- reports

    def parameters(self):
        """{checkpoint name: float32 array} of the embedding, every block's base weights (materialized),
        the final norm and the untied head."""
        return self._engine.parameters()

    @property
    def unused_names(self):
        return list(self._engine.unused_names)

    model_type = property(lambda self: self._engine.model_type)
    kind = property(lambda self: self._engine.kind)
    weight_format = property(lambda self: self._engine.weight_format)
    loader = property(lambda self: self._engine.loader)
    d_model = property(lambda self: self._engine.d_model)
    vocab_size = property(lambda self: self._engine.vocab_size)
    n_layers = property(lambda self: self._engine.n_layers)
    tie_embeddings = property(lambda self: self._engine.tie_embeddings)
    norm_eps = property(lambda self: self._engine.norm_eps)
    max_positions = property(lambda self: self._engine.max_positions)

    def __repr__(self):
        return repr(self._engine)
