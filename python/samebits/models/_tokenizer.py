"""Tokenizer: byte-level BPE over tokenizer.json with the ids of Hugging Face `tokenizers` (docs/tokenizer.md)."""

import operator
import os

from .._blocks import forwarded_property
from .._native import native
from . import _chat

_PREFIX = "samebits.models.Tokenizer: "
_INT32 = 1 << 31


def _ids(ids):
    """A list of int32 ids, refusing bools and non-integers by position (docs/tokenizer.md §6)."""
    out = []
    for position, value in enumerate(ids):
        if isinstance(value, bool):
            raise TypeError(f"{_PREFIX}ids must be int, got bool at position {position}")
        try:
            number = operator.index(value)
        except TypeError:
            raise TypeError(
                f"{_PREFIX}ids must be int, got {type(value).__name__} at position {position}"
            ) from None
        if not -_INT32 <= number < _INT32:
            raise ValueError(
                f"{_PREFIX}id {number} at position {position} is outside [0, n_vocab) and no added token"
            )
        out.append(number)
    return out


def _flag(value, name):
    if not isinstance(value, bool):
        raise TypeError(f"{_PREFIX}{name} must be a bool, got {type(value).__name__}")
    return value


class Tokenizer:
    """Byte-level BPE read from a tokenizer.json (+ tokenizer_config.json); immutable and thread-safe."""

    def __init__(self, *_args, **_kwargs):
        raise TypeError(f"{_PREFIX}use Tokenizer.from_pretrained(path)")

    @classmethod
    def from_pretrained(cls, path):
        """Loads a directory holding tokenizer.json, a tokenizer.json path (docs/tokenizer.md §1), or a GGUF
        file's tokenizer metadata (docs/gguf.md §12)."""
        path = os.fspath(path)
        if os.path.isdir(path):
            if not os.path.exists(os.path.join(path, "tokenizer.json")) and not os.path.exists(
                os.path.join(path, "tokenizer.model")
            ):
                raise FileNotFoundError(f"{_PREFIX}{path} holds no tokenizer.json")
        elif not os.path.exists(path):
            raise FileNotFoundError(f"{_PREFIX}{path} does not exist")
        self = object.__new__(cls)
        self._engine = native().TokenizerEngine.from_pretrained(path)
        return self

    def encode(self, text, add_special_tokens=True, *, allow_special=True):
        """Ids of `text` (str, or bytes-like taken as UTF-8); bos/eos added when add_special_tokens.

        With allow_special=False, special added tokens in the text are ordinary text (docs/tokenizer.md §2.3).
        """
        if isinstance(text, str):
            data = text.encode("utf-8")
        else:
            try:
                data = bytes(memoryview(text))
            except TypeError:
                raise TypeError(
                    f"{_PREFIX}text must be str or bytes-like, got {type(text).__name__}"
                ) from None
        return self._engine.encode(
            data, _flag(add_special_tokens, "add_special_tokens"), _flag(allow_special, "allow_special")
        )

    def encode_bytes(self, data, *, allow_special=True):
        """Ids of raw bytes, without bos/eos; ill-formed UTF-8 is replaced by U+FFFD first."""
        if isinstance(data, str):
            raise TypeError(f"{_PREFIX}encode_bytes takes bytes; use encode for str")
        try:
            raw = bytes(memoryview(data))
        except TypeError:
            raise TypeError(f"{_PREFIX}encode_bytes takes bytes, got {type(data).__name__}") from None
        return self._engine.encode(raw, False, _flag(allow_special, "allow_special"))

    def decode_bytes(self, ids, skip_special_tokens=False):
        """The bytes the ids stand for (ByteLevel decoding)."""
        return self._engine.decode_bytes(_ids(ids), _flag(skip_special_tokens, "skip_special_tokens"))

    def decode(self, ids, errors="replace", skip_special_tokens=False):
        """decode_bytes as str; errors is passed to bytes.decode (default: U+FFFD per ill-formed subpart)."""
        skip = _flag(skip_special_tokens, "skip_special_tokens")
        if errors == "replace":
            return self._engine.decode(_ids(ids), skip)
        return self._engine.decode_bytes(_ids(ids), skip).decode("utf-8", errors)

    def token_bytes(self, id):
        """The bytes of one id, or None when it names no token."""
        return self._engine.token_bytes(_ids([id])[0])

    def is_special(self, id):
        """True when `id` is an added token marked special."""
        return self._engine.is_special(_ids([id])[0])

    def stream_decoder(self, skip_special_tokens=False):
        """A TokenStreamDecoder: push ids one by one, get text once each character is complete."""
        return TokenStreamDecoder(self, skip_special_tokens)

    n_vocab = forwarded_property(
        "_engine", "n_vocab", "One above the largest id of the vocabulary and the added tokens.")

    @property
    def bos_ids(self):
        return list(self._engine.bos_ids)

    @property
    def eos_ids(self):
        return list(self._engine.eos_ids)

    bos_token_id = forwarded_property("_engine", "bos_token_id")
    eos_token_id = forwarded_property("_engine", "eos_token_id")

    chat_template = forwarded_property(
        "_engine",
        "chat_template",
        "The model's Jinja chat template (tokenizer_config.json's chat_template, its \"default\" entry when it is "
        "a list, or chat_template.jinja), None when its files carry none (docs/tokenizer.md §10).",
    )

    def _token_text(self, id):
        return None if id is None else self.decode([id])

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True, *, chat_template=None,
                            **variables):
        """The conversation rendered with the chat template (jinja2, sandboxed, as transformers renders it):
        the ids of the text (special tokens parsed, no bos/eos added) when tokenize, else the text.

        `messages`: a list of {"role", "content"} dicts; `chat_template` replaces the model's; `variables`
        reach the template beside messages, add_generation_prompt, bos_token and eos_token."""
        source = self.chat_template if chat_template is None else chat_template
        if source is None:
            raise ValueError(f"{_PREFIX}{self.source}: the tokenizer files carry no chat template; pass chat_template=")
        if not isinstance(source, str):
            raise TypeError(f"{_PREFIX}chat_template must be a str, got {type(source).__name__}")
        scope = {"bos_token": self._token_text(self.bos_token_id), "eos_token": self._token_text(self.eos_token_id)}
        scope.update(variables)
        text = _chat.render(source, messages, _flag(add_generation_prompt, "add_generation_prompt"), scope)
        if not _flag(tokenize, "tokenize"):
            return text
        return self.encode(text, add_special_tokens=False)

    def chat_stop_ids(self):
        """The ids that end an assistant reply: the eos id and, when the chat template is one the native
        renderers know (ChatML, Llama-3, Phi-3), its end-of-turn token's id (docs/tokenizer.md §10)."""
        ids = [] if self.eos_token_id is None else [self.eos_token_id]
        if self.chat_template is None:
            return ids
        try:
            turn = native().ChatTemplateEngine.recognize(self.chat_template, "", "").end_of_turn
        except ValueError:
            return ids
        turn_ids = self.encode(turn, add_special_tokens=False)
        if len(turn_ids) == 1 and turn_ids[0] not in ids:
            ids.append(turn_ids[0])
        return ids

    source = forwarded_property("_engine", "source", "The tokenizer.json this tokenizer was read from.")

    @property
    def unicode_version(self):
        """Unicode version of the NFC and numeric tables (utf8proc)."""
        return native().TokenizerEngine.unicode_version()

    def __repr__(self):
        return f"Tokenizer({self.source!r}: {self._engine.describe()})"


class TokenStreamDecoder:
    """Streaming decode: push(id) returns the text completed so far; finish() flushes (docs/tokenizer.md §6)."""

    def __init__(self, tokenizer, skip_special_tokens=False):
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"{_PREFIX}TokenStreamDecoder takes a Tokenizer, got {type(tokenizer).__name__}")
        self._engine = native().TokenStreamDecoderEngine(
            tokenizer._engine, _flag(skip_special_tokens, "skip_special_tokens")
        )

    def push(self, id):
        """The text the id completes (possibly '')."""
        return self._engine.push(_ids([id])[0])

    def finish(self):
        """The held-back rest; an incomplete character becomes U+FFFD."""
        return self._engine.finish()

    pending_bytes = forwarded_property("_engine", "pending_bytes")
