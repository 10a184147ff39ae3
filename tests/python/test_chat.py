"""Chat templates and sampled generation on CausalLM (docs/tokenizer.md §10, docs/models.md §18-§20): where the
template is read from, jinja2 rendering equal to the native C++ renderers of every supported family, the
sampler path of CausalLM.generate equal to a loop over the shared sampler, stop ids, CausalLMState.layers
and CausalLM.chat, on a tiny random llama paired with the SmolLM2 tokenizer fixture."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from samebits import CausalLM
from samebits._mamba import Mamba1State, Mamba2State
from samebits._native import native
from samebits._transformer import TransformerState
from samebits.models import Tokenizer
from test_causal_lm import family, write_model, write_safetensors

ROOT = Path(__file__).resolve().parents[2]
SMOLLM2 = ROOT / "tests" / "fixtures" / "tokenizer" / "smollm2"

# Templates of each family in the shapes the hub's models use (written here, not copied).
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a small test model.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CHATML_MULTILINE = """{%- for message in messages %}
    {%- if loop.first and message.role != "system" %}
        {{- '<|im_start|>system\\nYou are Tester, made for tests. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
PHI3 = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\\n' + message['content'] + "
    "'<|end|>\\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + '<|end|>\\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
)
CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "  Where is Paris? \n"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4, naturally."},
     {"role": "user", "content": "café 東京 🙂\n\tend"}],
]


def tokenizer_dir(directory, chat_template=None, jinja=None, config_extra=None):
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(SMOLLM2 / "tokenizer.json", directory)
    config = json.loads((SMOLLM2 / "tokenizer_config.json").read_text())
    if chat_template is not None:
        config["chat_template"] = chat_template
    config.update(config_extra or {})
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    if jinja is not None:
        (directory / "chat_template.jinja").write_text(jinja)
    return directory


def tiny_llama(directory, chat_template=CHATML, vocab=49152):
    """A 2-layer random llama over the SmolLM2 vocabulary, with the tokenizer files beside it."""
    rng = np.random.default_rng(11)
    d, heads, kv, hd, inter = 32, 4, 2, 8, 48

    def n(*shape, scale=0.3, offset=0.0):
        return (rng.standard_normal(shape) * scale + offset).astype(np.float32)

    tensors = {"model.embed_tokens.weight": n(vocab, d, scale=1.0), "model.norm.weight": n(d, scale=0.2, offset=1.0)}
    for i in range(2):
        p = f"model.layers.{i}."
        tensors[p + "input_layernorm.weight"] = n(d, scale=0.2, offset=1.0)
        tensors[p + "post_attention_layernorm.weight"] = n(d, scale=0.2, offset=1.0)
        for name, shape in (("self_attn.q_proj", (heads * hd, d)), ("self_attn.k_proj", (kv * hd, d)),
                            ("self_attn.v_proj", (kv * hd, d)), ("self_attn.o_proj", (d, heads * hd)),
                            ("mlp.gate_proj", (inter, d)), ("mlp.up_proj", (inter, d)), ("mlp.down_proj", (d, inter))):
            tensors[p + name + ".weight"] = n(*shape)
    config = dict(model_type="llama", hidden_size=d, num_attention_heads=heads, num_key_value_heads=kv,
                  intermediate_size=inter, num_hidden_layers=2, vocab_size=vocab, max_position_embeddings=512,
                  tie_word_embeddings=True, rms_norm_eps=1e-5)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    write_safetensors(directory / "model.safetensors", tensors)
    tokenizer_dir(directory, chat_template)
    return directory


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny") / "model")


# ------------------------------------------------------------------ where the template comes from


def test_chat_template_sources(tmp_path):
    assert Tokenizer.from_pretrained(tokenizer_dir(tmp_path / "none")).chat_template is None
    assert Tokenizer.from_pretrained(tokenizer_dir(tmp_path / "string", CHATML)).chat_template == CHATML
    named = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": LLAMA3}]
    assert Tokenizer.from_pretrained(tokenizer_dir(tmp_path / "list", named)).chat_template == LLAMA3
    assert Tokenizer.from_pretrained(tokenizer_dir(tmp_path / "nodefault", named[:1])).chat_template is None
    jinja = Tokenizer.from_pretrained(tokenizer_dir(tmp_path / "jinja", CHATML, jinja=PHI3))
    assert jinja.chat_template == PHI3  # the separate file wins, as transformers reads it
    for bad, why in ((7, "neither a string nor a list"), ([{"name": "default"}], "string 'name' and 'template'")):
        with pytest.raises(ValueError, match=why):
            Tokenizer.from_pretrained(tokenizer_dir(tmp_path / "bad", bad))


# ------------------------------------------------------------------ jinja2 == native, per family


@pytest.mark.parametrize("template", [CHATML, CHATML_MULTILINE, LLAMA3, PHI3], ids=["chatml", "chatml_lines", "llama3", "phi3"])
def test_jinja_rendering_equals_the_native_renderer(template, tmp_path):
    tok = Tokenizer.from_pretrained(tokenizer_dir(tmp_path, template))
    bos, eos = tok.decode([tok.bos_token_id]), tok.decode([tok.eos_token_id])
    engine = native().ChatTemplateEngine.recognize(template, bos, eos)
    for messages in CONVERSATIONS:
        for prompt in (False, True):
            text = tok.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=False)
            assert text == engine.render([(m["role"], m["content"]) for m in messages], prompt)
            assert tok.apply_chat_template(messages, add_generation_prompt=prompt) == tok.encode(text, False)
    assert engine.family == {CHATML: "chatml", CHATML_MULTILINE: "chatml", LLAMA3: "llama3", PHI3: "phi3"}[template]


def test_template_globals_filters_and_refusals(tmp_path):
    tok = Tokenizer.from_pretrained(tokenizer_dir(tmp_path))
    with pytest.raises(ValueError, match="carry no chat template"):
        tok.apply_chat_template(CONVERSATIONS[0])
    shown = "{{ messages | tojson }}|{{ strftime_now('%Y') | length }}|{% for m in messages %}{% break %}{% endfor %}"
    assert tok.apply_chat_template([{"role": "user", "content": "é"}], tokenize=False, chat_template=shown) == (
        '[{"role": "user", "content": "é"}]|4|')
    import jinja2

    with pytest.raises(jinja2.exceptions.TemplateError, match="only user turns"):
        tok.apply_chat_template(CONVERSATIONS[1], chat_template="{{ raise_exception('only user turns') }}")
    with pytest.raises(jinja2.exceptions.SecurityError):  # the sandbox: no reaching into Python objects
        tok.apply_chat_template(CONVERSATIONS[0], chat_template="{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}")
    with pytest.raises(TypeError, match="must be a dict with a str 'role'"):
        tok.apply_chat_template(["hi"], chat_template=CHATML)
    assert tok.apply_chat_template([], add_generation_prompt=True, chat_template=CHATML, tokenize=False) == (
        "<|im_start|>assistant\n")
    assert tok.apply_chat_template(CONVERSATIONS[0], chat_template="{{ greeting }}", greeting="hey", tokenize=False) == "hey"


# ------------------------------------------------------------------ generate with the sampler, stop ids


def reference_sampled(model, ids, n, seed, stop=(), **options):
    """generate(greedy=False) spelled as a loop over forward/step and the shared sampler, one row at a time."""
    defaults = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, repetition_window=64,
                    presence_penalty=0.0, frequency_penalty=0.0)
    defaults.update(options)
    rows = []
    for b, row in enumerate(ids):
        sampler = native().SamplerEngine(**defaults, seed=seed + b)
        for t in row:
            sampler.accept(int(t))
        state = model.allocate_state(1, len(row) + n)
        logits = model.forward(np.asarray([row]), state)[0, -1]
        out = list(row)
        for k in range(n):
            pick = sampler.sample(np.ascontiguousarray(logits))
            sampler.accept(pick)
            out.append(pick)
            if pick in stop or k + 1 == n:
                break
            logits = model.step(np.asarray([pick]), state)[0]
        rows.append(out)
    width = max(map(len, rows))
    return np.asarray([r + [-1] * (width - len(r)) for r in rows], dtype=np.int32)


def test_sampled_generate_is_the_sampler_loop(tmp_path):
    model = CausalLM.load(write_model(tmp_path / "m", *family("llama_tied")))
    ids = np.asarray([[1, 7, 3, 11], [2, 9, 2, 4]])
    for options in ({}, {"temperature": 0.7, "top_k": 8}, {"top_p": 0.8, "min_p": 0.05, "repetition_penalty": 1.3,
                                                          "presence_penalty": 0.5, "frequency_penalty": 0.25}):
        got = model.generate(ids, 6, greedy=False, seed=5, **options)
        assert np.array_equal(got, reference_sampled(model, ids, 6, 5, **options)), options
        assert np.array_equal(got, model.generate(ids, 6, greedy=False, seed=5, **options))
    assert np.array_equal(model.generate(ids, 6, greedy=False, temperature=0.0, seed=1), model.generate(ids, 6))
    # Stop ids: each row ends at its first stop id (kept); the rest is -1 and unused columns are dropped.
    full = model.generate(ids, 8, greedy=False, seed=3)
    stop = int(full[0, 6])
    got = model.generate(ids, 8, greedy=False, seed=3, stop=stop)
    assert np.array_equal(got, reference_sampled(model, ids, 8, 3, stop=(stop,)))
    assert got[0, 6] == stop and (got[0, 7:] == -1).all()
    greedy = model.generate(ids, 8)
    stop = {int(greedy[1, 9]), 63}
    rows = []
    for row in greedy.tolist():
        cut = row[:4]
        for t in row[4:]:
            cut.append(t)
            if t in stop:
                break
        rows.append(cut)
    width = max(map(len, rows))
    want = np.asarray([r + [-1] * (width - len(r)) for r in rows], dtype=np.int32)
    assert np.array_equal(model.generate(ids, 8, stop=sorted(stop)), want)


def test_generate_option_refusals(tmp_path):
    model = CausalLM.load(write_model(tmp_path / "m", *family("llama_tied")))
    ids = np.asarray([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"sampling options \(temperature\) take greedy=False"):
        model.generate(ids, 2, temperature=0.5)
    with pytest.raises(ValueError, match=r"sampling options \(seed\) take greedy=False"):
        model.generate(ids, 2, seed=1)
    with pytest.raises(TypeError, match="greedy must be True or False, got 1"):
        model.generate(ids, 2, greedy=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'temp'"):
        model.generate(ids, 2, greedy=False, temp=1.0)
    with pytest.raises(ValueError, match="top_p must be in"):
        model.generate(ids, 2, greedy=False, top_p=0.0, seed=0)
    with pytest.raises(TypeError, match="stop must be a token id or a list of token ids"):
        model.generate(ids, 2, stop=1.5)


# ------------------------------------------------------------------ CausalLMState.layers


@pytest.mark.parametrize("name,kind", [("llama_tied", TransformerState), ("mamba", Mamba1State), ("mamba2", Mamba2State)])
def test_state_layers_are_copies_of_the_block_states(name, kind, tmp_path):
    model = CausalLM.load(write_model(tmp_path / "m", *family(name)))
    state = model.allocate_state(1, 8)
    model.forward(np.asarray([[1, 5, 9]]), state)
    layers = state.layers
    assert len(layers) == model.n_layers == 2 and all(type(layer) is kind for layer in layers)
    before = state.buffers_bytes()
    if kind is TransformerState:
        assert layers[0].cached_tokens == 3
        first = layers[0].k_cache.copy()
        layers[0].k_cache[:] = 7.0
        assert np.array_equal(state.layers[0].k_cache, first)
    else:
        layers[1].h[:] = 7.0
    assert state.buffers_bytes() == before  # editing a copy leaves the model's state as it was
    assert "layers=2" in repr(state)


# ------------------------------------------------------------------ CausalLM.chat


def test_chat_is_generate_over_the_rendered_conversation(tiny):
    model, tok = CausalLM.load(tiny), Tokenizer.from_pretrained(tiny)
    im_end = tok.encode("<|im_end|>", add_special_tokens=False)
    assert tok.chat_stop_ids() == [tok.eos_token_id] or tok.chat_stop_ids() == [tok.eos_token_id] + im_end
    prompt = tok.apply_chat_template(CONVERSATIONS[2], add_generation_prompt=True)
    for options in ({}, {"greedy": False, "temperature": 0.9, "seed": 4}):
        out = model.generate(np.asarray([prompt]), 12, stop=tok.chat_stop_ids(), **options)[0, len(prompt):]
        want = tok.decode([int(t) for t in out if t >= 0 and int(t) not in tok.chat_stop_ids()], skip_special_tokens=True)
        assert model.chat(CONVERSATIONS[2], tok, max_new_tokens=12, **options) == want
    with pytest.raises(TypeError, match="tokenizer must be a samebits.models.Tokenizer"):
        model.chat(CONVERSATIONS[0], "tok")
