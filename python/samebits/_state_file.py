"""Saved decode states (docs/formats.md §9): `save` / `load` for every state kind and the model fingerprint
they are bound to. The format and every check live in the engine; this module picks the native call."""

import os

from ._native import native


def _path(path, what):
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"samebits {what}: path must be a str or os.PathLike, got {type(path).__name__}")
    text = os.fsdecode(os.fspath(path))
    if "\0" in text:  # the native open would stop at the NUL and touch another file
        raise ValueError(f"samebits {what}: path contains a NUL byte")
    return text


def _pairs():
    """(state class, model class) for every state kind."""
    from ._causal_lm import CausalLM, CausalLMState
    from ._mamba import Mamba1BlockInference, Mamba1State, Mamba2BlockInference, Mamba2State
    from ._mamba3 import Mamba3BlockInference, Mamba3State
    from ._samba import SambaInference, SambaState
    from ._transformer import TransformerBlockInference, TransformerState

    return {TransformerState: TransformerBlockInference, Mamba1State: Mamba1BlockInference,
            Mamba2State: Mamba2BlockInference, Mamba3State: Mamba3BlockInference, SambaState: SambaInference,
            CausalLMState: CausalLM}


def _model_for(cls, model, what):
    want = _pairs()[cls]
    if not isinstance(model, want):
        raise TypeError(f"samebits {what}: a {cls.__name__} belongs to a {want.__name__}, got {type(model).__name__}")


def model_fingerprint(model):
    """The model's fingerprint: SHA-256 (hex) of its kind, configuration, weight format and every tensor; computed
    once per loaded model and cached. A saved state names it and loads only into a model with the same one."""
    if type(model) not in _pairs().values():
        raise TypeError(f"samebits model_fingerprint: not a model with a decode state: {type(model).__name__}")
    return native().model_fingerprint(model._engine)


def save(state, path, model):
    """Writes `state` (of `model`) to `path`: a temporary sibling renamed into place."""
    cls = type(state)
    what = f"{cls.__name__}.save"
    path = _path(path, what)
    _model_for(cls, model, what)
    name = cls.__name__
    if name == "SambaState":
        handles = model._layers(state, what, state.batch_size)
        native().save_samba_state(path, model._engine, state.batch_size, state.max_tokens, handles)
    elif name == "TransformerState":
        floats = state.batch_size * state.n_kv_heads * state.capacity * state.head_dim
        native().save_state(path, model._engine, state._engine_state(what, floats))
    elif name == "CausalLMState":
        native().save_state(path, model._engine, state._engine)
    else:
        native().save_state(path, model._engine, state._native)


def load(cls, path, model):
    """A new `cls` state read from `path` for `model`; nothing else changes, whatever is refused."""
    what = f"{cls.__name__}.load"
    path = _path(path, what)
    _model_for(cls, model, what)
    name = cls.__name__
    if name == "SambaState":
        batch, max_tokens, layers = native().load_samba_state(path, model._engine)
        from ._mamba3 import Mamba3State
        from ._transformer import TransformerState

        wrapped = [Mamba3State._adopt(layer) if kind == "mamba3" else TransformerState._wrap(layer)
                   for kind, layer in zip(model.config.layers, layers)]
        return cls(batch, max_tokens, wrapped)
    engine_state = native().load_state(path, model._engine)
    if name == "TransformerState":
        return cls._wrap(engine_state)
    if name == "CausalLMState":
        return cls(engine_state, model)
    return cls._adopt(engine_state)


class SavedState:
    """What every decode-state class inherits: `save` and `load` in the saved-state format."""

    __slots__ = ()

    def save(self, path, model):
        """Writes this state to `path`, bound to `model` by its fingerprint (docs/formats.md §9)."""
        save(self, path, model)

    @classmethod
    def load(cls, path, model):
        """A new state read from a file `save` wrote for `model`: refused (ValueError naming the file, the
        field and the problem) for another model, another kind, or a truncated or altered file."""
        return load(cls, path, model)
