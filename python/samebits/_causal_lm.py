"""CausalLM: a language model over a Hugging Face checkpoint directory (llama / smollm, mistral, qwen2, qwen3,
phi3, mamba, mamba2), its decode state, greedy or sampled generation and chat (docs/models.md §15-§20)."""

import secrets

import numpy as np

from . import _checks, _state_file
from ._blocks import forwarded_property
from ._mamba import Mamba1State, Mamba2State
from ._native import native
from ._transformer import TransformerState

_LOAD = "samebits.models.CausalLM.load"
_CALL = "samebits CausalLM"
_FORMATS = ("float32", "bfloat16", "int8")
_LOADERS = ("samebits", "mojolearn")
# The shared sampler's options (docs/api.md §16) and the values that leave the distribution as it is.
_SAMPLING = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0,
             "repetition_window": 64, "presence_penalty": 0.0, "frequency_penalty": 0.0}


def _ids(ids, what, step):
    """Token ids as a C-contiguous int32 (B, L) array; the range is checked on the original values."""
    array = _checks.id_array(ids)
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


def _stop_ids(stop, what):
    """`stop` as a list of int ids (None: none)."""
    if stop is None:
        return []
    items = [stop] if isinstance(stop, (int, np.integer)) and not isinstance(stop, bool) else stop
    try:
        return [_checks.count(v, what, "stop") for v in items]
    except TypeError:
        raise TypeError(f"{what}: stop must be a token id or a list of token ids, got {type(stop).__name__}") from None


class CausalLMState(_state_file.SavedState):
    """One batch's decode state: one block state per layer and the positions consumed; it belongs to the
    model whose `allocate_state` made it."""

    def __init__(self, engine, owner):
        self._engine = engine
        self._owner = owner

    batch_size = forwarded_property("_engine", "batch_size")
    max_tokens = forwarded_property("_engine", "max_tokens")

    @property
    def layers(self):
        """One state per layer, in stack order, as the blocks' own classes (TransformerState, Mamba1State,
        Mamba2State): independent copies taken when read, so editing one leaves this state as it is
        (docs/models.md §18)."""
        faces = {"TransformerStateEngine": TransformerState._wrap, "Mamba1StateEngine": Mamba1State._adopt,
                 "Mamba2StateEngine": Mamba2State._adopt}
        copies = [self._engine.layer_copy(i) for i in range(self._engine.layers)]
        return [faces[type(c).__name__](c) for c in copies]

    positions = forwarded_property("_engine", "positions")

    def buffers_bytes(self):
        """Every layer's state buffers (and position counts), in stack order, as one bytes object: two states
        hold the same contents exactly when these are equal."""
        return self._engine.buffers_bytes()

    def clone(self):
        """An independent copy; continuing it gives the bits the original would."""
        return CausalLMState(self._engine.clone(), self._owner)

    def __repr__(self):
        return (
            f"CausalLMState(batch_size={self.batch_size}, max_tokens={self.max_tokens}, layers={self._engine.layers}, "
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

    def step_many(self, ids, states):
        """One token for each of N independent sequences (docs/api.md §18): ids (N,) continue `states`, N one-row
        states each at its own position -> logits (N, vocab), row i bit for bit step([ids[i]], states[i])."""
        array = _int32(_ids(ids, "step_many", True), self.vocab_size, "step_many").reshape(-1)
        engines = [self._state(state, "step_many") for state in states]
        return self._engine.step_many(array.tolist(), engines)

    def allocate_state(self, batch_size, max_tokens):
        """Zero state for batch_size rows and up to max_tokens positions."""
        return CausalLMState(self._engine.allocate_state(int(batch_size), int(max_tokens)), self)

    def reset_state(self, state):
        """New zero layer states of the same shape, positions 0; returns the same state object."""
        if not isinstance(state, CausalLMState):
            raise ValueError(f"{_CALL}.reset_state: state belongs to another model")
        self._engine.reset_state(state._engine)
        return state

    def generate(self, ids, max_new_tokens, *, greedy=True, seed=None, stop=None, **sampling):
        """(B, L + m) int32 ids: the prompt and up to max_new_tokens new ones per row (docs/models.md §19).

        greedy=True (the default) is upstream's argmax loop. greedy=False draws with the shared sampler
        (docs/api.md §16): temperature, top_k, top_p, min_p, repetition_penalty, repetition_window,
        presence_penalty, frequency_penalty; row b uses seed + b (seed=None draws a random one). `stop`: a
        token id or a list of ids; a row ends once it has produced one (kept), its later positions hold -1,
        and m is the most any row produced (max_new_tokens when no stop id came).
        """
        what = f"{_CALL}.generate"
        if greedy is not True and greedy is not False:
            raise TypeError(f"{what}: greedy must be True or False, got {greedy!r}")
        unknown = sorted(set(sampling) - set(_SAMPLING))
        if unknown:
            raise TypeError(f"{what}: unexpected keyword argument {unknown[0]!r}")
        if greedy and (sampling or seed is not None):
            raise ValueError(f"{what}: sampling options ({', '.join(sorted(sampling)) or 'seed'}) take greedy=False")
        n = int(max_new_tokens)
        if n < 0:
            raise ValueError(f"{what}: max_new_tokens must be >= 0, got {n}")
        array = _int32(_ids(ids, "generate", False), self.vocab_size, "generate")
        stop_ids = _stop_ids(stop, what)
        if greedy and not stop_ids:
            return self._engine.generate(array, n)
        options = dict(_SAMPLING, **sampling)
        args = [_checks.real(options[k], what, k) if isinstance(_SAMPLING[k], float) else
                _checks.count(options[k], what, k) for k in _SAMPLING]
        seed = secrets.randbits(63) if seed is None else _checks.count(seed, what, "seed")
        if not 0 <= seed < 2**64:
            raise ValueError(f"{what}: seed must be in [0, 2^64), got {seed}")
        return self._engine.generate_with(array, n, greedy, *args, seed, stop_ids)

    def chat(self, messages, tokenizer, max_new_tokens=256, **options):
        """The assistant's reply (str) to `messages` (a list of {"role", "content"} dicts): the conversation
        rendered with the tokenizer's chat template (Tokenizer.apply_chat_template, generation prompt added),
        then generate(..., **options) until the end-of-sequence id or the template's end-of-turn token
        (docs/models.md §20). `options` are generate's (greedy, seed, the sampler's); `stop` adds ids."""
        from .models._tokenizer import Tokenizer

        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"{_CALL}.chat: tokenizer must be a samebits.models.Tokenizer, got {type(tokenizer).__name__}")
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if not prompt:
            raise ValueError(f"{_CALL}.chat: the rendered conversation holds no token")
        stops = list(tokenizer.chat_stop_ids()) + _stop_ids(options.pop("stop", None), f"{_CALL}.chat")
        out = self.generate(np.asarray([prompt], dtype=np.int64), max_new_tokens, stop=stops, **options)
        reply = [int(t) for t in out[0, len(prompt):] if t >= 0 and int(t) not in stops]
        return tokenizer.decode(reply, skip_special_tokens=True)

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
