"""Chat templates rendered with jinja2 as Hugging Face transformers renders them (docs/tokenizer.md §10): a
sandboxed, immutable environment with trim_blocks and lstrip_blocks, the loop-control extension, a `tojson`
filter that keeps non-ASCII text, and the globals `raise_exception` and `strftime_now`."""

import datetime
import functools
import json

_PREFIX = "samebits.models.Tokenizer.apply_chat_template: "


def _raise_exception(message):
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(format):
    return datetime.datetime.now().strftime(format)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Jinja's own tojson escapes HTML characters; templates expect plain JSON.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=16)
def compiled(source):
    """The template `source` compiled once in the sandbox (jinja2 is imported only here, when needed)."""
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError(f"{_PREFIX}rendering a chat template needs jinja2 (pip install jinja2)") from None
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise ValueError(f"{_PREFIX}the chat template is not valid Jinja: {e}") from None


def checked_messages(messages):
    """The conversation as a list of dicts (each with a str 'role'); other shapes are refused by name."""
    if isinstance(messages, (str, bytes)) or not hasattr(messages, "__iter__"):
        raise TypeError(f"{_PREFIX}messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    out = []
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise TypeError(f"{_PREFIX}message {k} must be a dict with a str 'role', got {m!r:.80}")
        out.append(m)
    return out


def render(source, messages, add_generation_prompt, variables):
    """The text the template renders for `messages`, with add_generation_prompt and `variables` (bos_token,
    eos_token and the caller's extra keyword arguments) in scope."""
    return compiled(source).render(messages=checked_messages(messages), add_generation_prompt=add_generation_prompt,
                                   **variables)
