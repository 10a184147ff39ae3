"""samebits.models.Tokenizer (docs/tokenizer.md): the ids of Hugging Face `tokenizers` over the committed corpus
fixtures for the smollm2, gpt2, llama3 and qwen2 pipelines, the Python surface and its refusals."""

import hashlib
import importlib.util
import json
import os
import struct
import threading

import pytest

import samebits
from samebits.models import Tokenizer, TokenStreamDecoder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
LAYOUTS = ("smollm2", "gpt2", "llama3", "qwen2", "qwen2_added")


def _fixture_tool():
    spec = importlib.util.spec_from_file_location("make_tokenizer_fixtures",
                                                  os.path.join(ROOT, "tools", "make_tokenizer_fixtures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _fixture_tool()


@pytest.fixture(scope="module")
def reference():
    with open(os.path.join(FIXTURES, "reference.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def chunks(reference):
    corpus, parts = TOOL.generate(TOOL.load_samples(ROOT))
    assert hashlib.sha256(corpus).hexdigest() == reference["corpus_sha256"]
    assert len(corpus) >= 1 << 20 and len(parts) == reference["chunks"]
    return parts


@pytest.fixture(scope="module")
def layout_dirs(tmp_path_factory):
    with open(os.path.join(FIXTURES, "smollm2", "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    with open(os.path.join(FIXTURES, "layouts.json"), encoding="utf-8") as f:
        layouts = json.load(f)
    dirs = {}
    for name in LAYOUTS:
        d = tmp_path_factory.mktemp(name)
        with open(d / "tokenizer.json", "w", encoding="utf-8") as f:
            json.dump(TOOL.variant(base, layouts.get(name)), f, ensure_ascii=False)
        dirs[name] = str(d)
    return dirs


@pytest.mark.parametrize("name", LAYOUTS)
def test_ids_equal_tokenizers_over_the_corpus(name, reference, chunks, layout_dirs):
    tok = Tokenizer.from_pretrained(layout_dirs[name])
    rec = reference["layouts"][name]
    total = 0
    for k, chunk in enumerate(chunks):
        ids = tok.encode(chunk)
        assert len(ids) == rec["count"][k], (name, k)
        assert TOOL.sha(ids) == rec["ids_sha256"][k], (name, k)
        assert hashlib.sha256(tok.decode(ids).encode()).hexdigest() == rec["decode_sha256"][k], (name, k)
        total += len(ids)
    assert total == rec["total_ids"]
    for k, digest in rec["text_special_sha256"].items():
        assert TOOL.sha(tok.encode(chunks[int(k)], allow_special=False)) == digest, (name, k)
    # str input gives the same ids as its UTF-8 bytes.
    text = chunks[3].decode("utf-8", errors="replace")
    assert tok.encode(text) == tok.encode(text.encode("utf-8"))


def test_live_comparison_when_tokenizers_is_installed(layout_dirs):
    tokenizers = pytest.importorskip("tokenizers")
    texts = ["Hello world", "  leading and trailing  ", "IT'S 12345 café", "<|im_start|>user\nhi<|im_end|>",
             "x\r\n\r\ny", "\u3000\u00a0a", "e\u0301 \u1100\u1161", "👨‍👩‍👧 🇫🇷", "", " ", "'ſ 'K"]
    for name in LAYOUTS:
        ours = Tokenizer.from_pretrained(layout_dirs[name])
        theirs = tokenizers.Tokenizer.from_file(os.path.join(layout_dirs[name], "tokenizer.json"))
        for text in texts:
            assert ours.encode(text) == theirs.encode(text).ids, (name, text)
            assert ours.encode(text, add_special_tokens=False) == theirs.encode(
                text, add_special_tokens=False).ids, (name, text)


def test_smollm2_directory_facts():
    tok = Tokenizer.from_pretrained(os.path.join(FIXTURES, "smollm2"))
    assert tok.n_vocab == 49152
    assert tok.bos_ids == [] and tok.eos_ids == []
    assert (tok.bos_token_id, tok.eos_token_id) == (1, 2)
    assert tok.encode("<|im_start|>user") == [1, 4093]
    assert tok.encode("<|im_start|>user", allow_special=False) == [44, 108, 306, 79, 3738, 108, 46, 4093]
    assert tok.encode_bytes(b"\x04") == []
    assert tok.decode([1, 4093]) == "<|im_start|>user"
    assert tok.decode([1, 4093], skip_special_tokens=True) == "user"
    assert tok.decode_bytes(tok.encode("é")) == "é".encode()
    assert tok.is_special(0) and not tok.is_special(300)
    assert tok.token_bytes(4093) == b"user" and tok.token_bytes(10 ** 6) is None
    assert "Digits(individual)" in repr(tok)
    assert tok.unicode_version
    assert samebits.models.Tokenizer is Tokenizer


def test_json_path_and_missing_files(tmp_path):
    tok = Tokenizer.from_pretrained(os.path.join(FIXTURES, "smollm2", "tokenizer.json"))
    assert tok.eos_token_id == 2  # the config beside the file is read
    with pytest.raises(FileNotFoundError, match="holds no tokenizer.json"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer.model").write_bytes(b"sp")
    with pytest.raises(ValueError, match="a SentencePiece family .* refused by name"):
        Tokenizer.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Tokenizer.from_pretrained(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text('{"model": {"type": "Unigram"}}')
    with pytest.raises(ValueError, match=r"^samebits\.models\.Tokenizer: .*bad\.json: .*Unigram"):
        Tokenizer.from_pretrained(tmp_path / "bad.json")
    with pytest.raises(TypeError, match="from_pretrained"):
        Tokenizer()


def test_argument_refusals():
    tok = Tokenizer.from_pretrained(os.path.join(FIXTURES, "smollm2"))
    with pytest.raises(TypeError, match="text must be str or bytes-like, got int"):
        tok.encode(3)
    with pytest.raises(TypeError, match="encode_bytes takes bytes; use encode for str"):
        tok.encode_bytes("x")
    with pytest.raises(TypeError, match="ids must be int, got bool at position 1"):
        tok.decode([5, True])
    with pytest.raises(TypeError, match="ids must be int, got float at position 0"):
        tok.decode([1.0])
    with pytest.raises(ValueError, match=r"id 49152 at position 1 is outside \[0, n_vocab\) and no added token"):
        tok.decode([5, 49152])
    with pytest.raises(ValueError, match=r"id -1 at position 0"):
        tok.decode_bytes([-1])
    with pytest.raises(ValueError, match=r"id 4294967296 at position 0"):
        tok.decode([1 << 32])
    with pytest.raises(TypeError, match="add_special_tokens must be a bool"):
        tok.encode("x", 1)
    with pytest.raises(UnicodeEncodeError):
        tok.encode("\ud800")
    assert tok.encode(bytearray(b"ab")) == tok.encode("ab") == tok.encode(memoryview(b"ab"))
    assert tok.decode(tok.encode_bytes(b"a\xffb")) == "a\ufffdb"
    assert tok.decode([216, 216], errors="strict") == "  "


def test_stream_decoder_emits_complete_characters():
    tok = Tokenizer.from_pretrained(os.path.join(FIXTURES, "smollm2"))
    text = "Grüße, 世界! 👨‍👩‍👧 ok"
    ids = tok.encode(text)
    stream = tok.stream_decoder()
    pieces = [stream.push(i) for i in ids]
    pieces.append(stream.finish())
    assert "".join(pieces) == text
    for piece in pieces:
        assert "\ufffd" not in piece
    # Byte-level ids of a 4-byte character: nothing until the last byte.
    single = {tok.token_bytes(i): i for i in range(tok.n_vocab) if len(tok.token_bytes(i) or b"") == 1}
    emoji = [single[bytes([b])] for b in "😀".encode()]
    stream = TokenStreamDecoder(tok)
    assert [stream.push(i) for i in emoji] == ["", "", "", "😀"]
    assert stream.push(emoji[0]) == "" and stream.pending_bytes == 1
    assert stream.finish() == "\ufffd" and stream.pending_bytes == 0
    with pytest.raises(ValueError, match="at position 5 is outside"):
        stream.push(10 ** 6)


def test_tokenizer_config_flags(tmp_path):
    with open(os.path.join(FIXTURES, "smollm2", "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    with open(os.path.join(FIXTURES, "layouts.json"), encoding="utf-8") as f:
        layouts = json.load(f)
    with open(tmp_path / "tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(TOOL.variant(base, layouts["llama3"]), f)
    tok = Tokenizer.from_pretrained(tmp_path)
    assert tok.bos_ids == [1] and tok.encode("hi")[0] == 1 and tok.bos_token_id == 1
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": False, "eos_token": "<|endoftext|>"}))
    tok = Tokenizer.from_pretrained(tmp_path)
    assert tok.bos_ids == [] and tok.encode("hi") == tok.encode("hi", add_special_tokens=False)
    assert tok.bos_token_id is None and tok.eos_token_id == 0
    (tmp_path / "tokenizer_config.json").write_text('{"add_bos_token": 1}')
    with pytest.raises(ValueError, match="add_bos_token is not a bool"):
        Tokenizer.from_pretrained(tmp_path)


def test_threads_share_one_tokenizer(chunks):
    tok = Tokenizer.from_pretrained(os.path.join(FIXTURES, "smollm2"))
    want = [tok.encode(c) for c in chunks[:24]]
    got = [None] * 3

    def work(t):
        got[t] = [tok.encode(c) for c in chunks[:24]]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert got == [want] * 3


def test_ids_digest_is_little_endian_int32():
    assert TOOL.sha([1, 2]) == hashlib.sha256(struct.pack("<2i", 1, 2)).hexdigest()
