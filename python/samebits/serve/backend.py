"""The model behind the server (docs/serving.md §2): one interface over the shipped Samba model or a Samba
checkpoint (byte-level, no chat template) and a CausalLM directory with its tokenizer, so the scheduler
never asks which one it runs."""

import os
import tempfile
from pathlib import Path

import numpy as np

import samebits


class ServeError(Exception):
    """A request the server refuses: the HTTP status, OpenAI's error type, the message and the parameter."""

    def __init__(self, status, message, kind="invalid_request_error", param=None, headers=None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param
        self.headers = headers or {}


class Backend:
    """What the scheduler needs from a model: states of one row and `context` positions, prefill and decode
    logits (float32 rows), copies, the saved-state format, and the tokenizer."""

    name = "model"
    vocab = 0
    eos_ids = ()
    chat_template = None

    def __init__(self, context):
        self.context = int(context)
        self.fingerprint = samebits.model_fingerprint(self.model)
        # Every state has the same capacity, so one measurement (its saved size, which holds every buffer)
        # prices each prefix-cache snapshot and session.
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "probe.state"
            self.save(self.new_state(), path)
            self.state_bytes = path.stat().st_size

    # -- states
    def new_state(self):
        return self.model.allocate_state(1, self.context)

    def copy(self, state):
        raise NotImplementedError

    def save(self, state, path):
        state.save(path, self.model)

    def load(self, path):
        raise NotImplementedError

    # -- calls (GIL released inside the engine)
    def prefill_rows(self, ids, state):
        """Feeds ids (a list) to the state; the logits row after each one, (len(ids), vocab)."""
        return self.model.forward(np.asarray([ids], dtype=np.int32), state)[0]

    def prefill(self, ids, state):
        """Feeds ids (a list) to the state; the logits row after the last one."""
        return self.prefill_rows(ids, state)[-1]

    def decode(self, token, state):
        return self.model.step(np.asarray([token], dtype=np.int32), state)[0]

    def decode_many(self, tokens, states):
        """One batched step: tokens[i] continues states[i] (docs/api.md §18); row i is decode(tokens[i], states[i])
        bit for bit."""
        return self.model.step_many(np.asarray(tokens, dtype=np.int32), states)

    def prompt_logits(self, ids):
        """Logits at every prompt position, from a fresh state (echo with logprobs on a session, whose own
        prefill continues its history)."""
        state = self.new_state()
        return self.model.forward(np.asarray([ids], dtype=np.int32), state)[0]

    # -- text
    def encode(self, text):
        raise NotImplementedError

    def token_bytes(self, token):
        raise NotImplementedError

    def decode_bytes(self, ids):
        return b"".join(self.token_bytes(t) for t in ids)


class SambaBackend(Backend):
    """A Samba checkpoint (the shipped model by default): byte-level, vocab 256, no chat template."""

    def __init__(self, path, context):
        self.path = Path(path)
        self.model = samebits.SambaInference.from_checkpoint(self.path)
        self.vocab = self.model.config.vocab
        self.name = self.path.stem
        if self.vocab != 256:
            raise ValueError(f"samebits serve: {self.path}: a Samba model is served byte-level and needs vocab "
                             f"256, this one has {self.vocab}")
        super().__init__(context)

    def copy(self, state):
        return state.copy()

    def load(self, path):
        return samebits.SambaState.load(path, self.model)

    def encode(self, text):
        return list(text.encode("utf-8"))

    def token_bytes(self, token):
        return bytes([token])


class CausalLMBackend(Backend):
    """A Hugging Face directory or a GGUF file through samebits.models: CausalLM plus its Tokenizer; the chat
    template is the tokenizer's."""

    def __init__(self, path, context):
        from samebits import models

        self.path = Path(path)
        self.model = models.CausalLM.load(self.path)
        self.tokenizer = models.Tokenizer.from_pretrained(self.path)
        self.vocab = self.model.vocab_size
        self.name = self.path.name
        self.eos_ids = tuple(self.tokenizer.chat_stop_ids())  # eos and the chat template's end of turn
        limit = self.model.max_positions
        super().__init__(min(context, limit) if limit else context)
        if hasattr(self.tokenizer, "apply_chat_template") and getattr(self.tokenizer, "chat_template", None):
            self.chat_template = self.tokenizer.apply_chat_template

    def copy(self, state):
        return state.clone()

    def load(self, path):
        from samebits import models

        return models.CausalLMState.load(path, self.model)

    def encode(self, text):
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def token_bytes(self, token):
        return self.tokenizer.token_bytes(token)


def open_backend(model, context):
    """The backend for a model argument: None (the shipped model), a Samba checkpoint file, a Hugging Face model
    directory or a GGUF file."""
    if model is None:
        return SambaBackend(samebits.default_model_path(), context)
    path = Path(os.fspath(model))
    if path.is_dir() or path.suffix == ".gguf":
        return CausalLMBackend(path, context)
    return SambaBackend(path, context)
