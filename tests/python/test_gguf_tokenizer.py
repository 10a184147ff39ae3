"""Tokenizers from GGUF metadata (docs/gguf.md §12): SmolLM2's vocabulary and merges written as GGUF tokenizer
keys the way llama.cpp's converter writes them, under each supported `pre` name, give the ids Hugging Face
`tokenizers` gave for the matching tokenizer.json pipeline over the committed corpus; special tokens, BOS,
the chat template and every refusal."""

import json
import os

import numpy as np
import pytest

from samebits.models import Tokenizer
from test_tokenizer import FIXTURES, LAYOUTS, TOOL, chunks, reference  # noqa: F401 (fixtures)

gguf = pytest.importorskip("gguf")

PRE = {"smollm2": "smollm", "gpt2": "gpt-2", "llama3": "llama-bpe", "qwen2": "qwen2", "qwen2_added": "qwen2"}
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


def write_vocab(path, doc, pre, add_bos=None, model="gpt2", types_override=None, merges=None, arch="llama",
                extra=None, edit=None):
    """doc: a tokenizer.json dict. Tokens by id; added tokens CONTROL when special, USER_DEFINED otherwise."""
    vocab = doc["model"]["vocab"]
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    types = [1] * len(tokens)
    for t in doc["added_tokens"]:
        tokens[t["id"]] = t["content"]
        types[t["id"]] = 3 if t["special"] else 4
    for i, ty in (types_override or {}).items():
        types[i] = ty
    if edit is not None:
        edit(tokens)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges if merges is not None else
                       [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    w.add_chat_template(TEMPLATE)
    for key, value in (extra or {}).items():
        value(w, key)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


@pytest.fixture(scope="module")
def base():
    with open(os.path.join(FIXTURES, "smollm2", "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def gguf_files(base, tmp_path_factory):
    with open(os.path.join(FIXTURES, "layouts.json"), encoding="utf-8") as f:
        layouts = json.load(f)
    out = {}
    for name in LAYOUTS:
        doc = TOOL.variant(base, layouts.get(name))
        # llama3's template puts <|im_start|> (id 1) first: the file says so with add_bos_token
        out[name] = write_vocab(tmp_path_factory.mktemp(name) / "v.gguf", doc, PRE[name],
                                add_bos=True if name == "llama3" else None)
    return out


@pytest.mark.parametrize("name", LAYOUTS)
def test_ids_equal_tokenizers_over_the_corpus(name, reference, chunks, gguf_files):  # noqa: F811
    tok = Tokenizer.from_pretrained(gguf_files[name])
    rec = reference["layouts"][name]
    for k, chunk in enumerate(chunks):
        ids = tok.encode(chunk)
        assert len(ids) == rec["count"][k], (name, k)
        assert TOOL.sha(ids) == rec["ids_sha256"][k], (name, k)
    for k, digest in rec["text_special_sha256"].items():
        assert TOOL.sha(tok.encode(chunks[int(k)], allow_special=False)) == digest, (name, k)


def test_facts(gguf_files):
    tok = Tokenizer.from_pretrained(gguf_files["smollm2"])
    assert (tok.n_vocab, tok.bos_token_id, tok.eos_token_id) == (49152, 1, 2)
    assert tok.bos_ids == [] and tok.eos_ids == []
    assert tok.encode("<|im_start|>user") == [1, 4093]
    assert tok.decode([1, 4093], skip_special_tokens=True) == "user"
    assert "Digits(individual)" in repr(tok)
    assert tok.encode(" 2024") == [tok.encode(" ")[0]] + [tok.encode(c)[0] for c in "2024"]
    llama3 = Tokenizer.from_pretrained(gguf_files["llama3"])
    assert llama3.bos_ids == [1] and llama3.encode("hi")[0] == 1


def test_refusals(base, tmp_path):
    def refused(match, **kw):
        path = write_vocab(tmp_path / "bad.gguf", base, kw.pop("pre", "smollm"), **kw)
        with pytest.raises(ValueError, match=match):
            Tokenizer.from_pretrained(path)

    refused("'llama' is a SentencePiece vocabulary.*refused by name", model="llama")
    refused("tokenizer.ggml.model 'bert' is refused by name", model="bert")
    refused("pre 'default'", pre="default")
    refused("pre 'default'", pre=None)
    refused("pre 'deepseek-llm' is not supported", pre="deepseek-llm")
    refused(r"tokens\[300\].*token type 6 \(BYTE", types_override={300: 6})
    refused(r"merges\[0\] 'x' is not two names", merges=["x"])
    refused("add_space_prefix is true", extra={"tokenizer.ggml.add_space_prefix": lambda w, k: w.add_bool(k, True)})
    (tmp_path / "plain.gguf").write_bytes(b"GGUF" + b"\0" * 4)
    with pytest.raises(ValueError, match="plain.gguf"):
        Tokenizer.from_pretrained(str(tmp_path / "plain.gguf"))


def test_model_file_without_tokenizer_is_refused(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    w.add_tensor("x", np.ones(4, np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with pytest.raises(ValueError, match="holds no tokenizer"):
        Tokenizer.from_pretrained(str(tmp_path / "m.gguf"))
