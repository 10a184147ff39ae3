"""The Python generation API over the shared C++ sampler (docs/api.md §16): SambaInference.generate with
every option, streaming, stop strings, seeds, the same tokens as the command line; samebits.default_model;
SambaState.copy continuing bit-identically; argument types; python -m samebits; file kinds in
from_checkpoint."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import samba_checkpoint_writer as writer
import samebits

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "mlp-demo.ckpt"


@pytest.fixture(scope="module")
def lm():
    return samebits.default_model()


def cli(*args):
    return subprocess.run([sys.executable, "-m", "samebits", *map(str, args)], capture_output=True, timeout=120)


def test_default_model_is_the_shipped_file(lm, monkeypatch, tmp_path):
    path = samebits.default_model_path()
    assert path.is_file() and path.name == "samba-kjv.ckpt"
    assert path.read_bytes() == (ROOT / "assets" / "default-model" / "samba-kjv.ckpt").read_bytes()
    assert lm.config.vocab == 256
    other = writer.write_stream(tmp_path / "small.ckpt", writer.example_config())
    monkeypatch.setenv("SAMEBITS_DEFAULT_MODEL", str(other))
    assert samebits.default_model_path() == other


def test_generate_matches_the_command_line_for_a_seed(lm):
    for options, flags in (({}, ()), ({"top_k": 40, "temperature": 0.7}, ("--top-k", 40, "--temperature", 0.7)),
                           ({"top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.3, "presence_penalty": 0.2,
                             "frequency_penalty": 0.1, "repetition_window": 16},
                            ("--top-p", 0.9, "--min-p", 0.05, "--repeat-penalty", 1.3, "--presence-penalty", 0.2,
                             "--frequency-penalty", 0.1, "--repeat-last-n", 16))):
        text = lm.generate("In the beginning", 50, seed=11, **options)
        out = cli("generate", "-p", "In the beginning", "-n", 50, "-s", 11, *flags)
        assert out.returncode == 0
        assert out.stdout == b"In the beginning" + text.encode("utf-8") + b"\n", options


def test_greedy_is_argmax_of_the_logits(lm):
    ids = list(b"And God said")
    out = lm.generate(ids, 12, temperature=0.0, seed=5)
    assert out == lm.generate(ids, 12, temperature=0.0, seed=6)
    state = lm.allocate_state(1, 64)
    logits = lm.forward(np.array([ids]), state)[:, -1]
    expected = []
    for _ in range(12):
        token = int(np.argmax(logits[0]))
        expected.append(token)
        logits = lm.step(np.array([token]), state)
    assert out == expected


def test_seed_reproduces_and_random_default_varies(lm):
    a = lm.generate(b"And", 40, seed=3)
    assert a == lm.generate(b"And", 40, seed=3) and a != lm.generate(b"And", 40, seed=4)
    assert len({lm.generate(b"And", 40) for _ in range(3)}) > 1


def test_return_kinds_and_streaming(lm):
    text = lm.generate("And", 30, seed=8)
    raw = lm.generate(b"And", 30, seed=8)
    ids = lm.generate(np.frombuffer(b"And", np.uint8), 30, seed=8)
    assert isinstance(text, str) and isinstance(raw, bytes) and isinstance(ids, list)
    assert bytes(ids) == raw and raw.decode("utf-8", "replace") == text and len(raw) == 30
    assert "".join(lm.generate("And", 30, seed=8, stream=True)) == text
    assert b"".join(lm.generate(b"And", 30, seed=8, stream=True)) == raw
    assert list(lm.generate([65, 110, 100], 30, seed=8, stream=True)) == ids


def test_stop_strings(lm):
    free = lm.generate("And God said", 200, temperature=0.0)
    stop = free[20:23]
    cut = lm.generate("And God said", 200, temperature=0.0, stop=[stop, "never"])
    assert cut == free[:free.index(stop)]
    assert "".join(lm.generate("And God said", 200, temperature=0.0, stop=stop, stream=True)) == cut
    assert lm.generate("And God said", 200, temperature=0.0, stop=b"never-there") == free


def test_each_option_changes_the_text(lm):
    plain = lm.generate("And", 80, seed=4)
    for option in ({"top_k": 3}, {"top_p": 0.5}, {"min_p": 0.3}, {"repetition_penalty": 1.5},
                   {"presence_penalty": 1.0}, {"frequency_penalty": 0.5}, {"temperature": 0.3}):
        assert lm.generate("And", 80, seed=4, **option) != plain, option


def test_refusals(lm):
    with pytest.raises(ValueError, match="top_p must be in"):
        lm.generate("x", 4, top_p=0.0)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        lm.generate("x", 4, temperature=-1.0)
    with pytest.raises(ValueError, match="min_p"):
        lm.generate("x", 4, min_p=1.5)
    with pytest.raises(ValueError, match="max_new_tokens must be positive"):
        lm.generate("x", 0)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        lm.generate("x", 4.0)
    with pytest.raises(TypeError, match="top_k must be an int"):
        lm.generate("x", 4, top_k=1.5)
    with pytest.raises(TypeError, match="temperature must be a number"):
        lm.generate("x", 4, temperature="hot")
    with pytest.raises(ValueError, match="prompt ids must be in"):
        lm.generate([300], 4)
    with pytest.raises(ValueError, match="at least one token id"):
        lm.generate([], 4)
    with pytest.raises(TypeError, match="prompt must be"):
        lm.generate(np.zeros(3, np.float32), 4)
    with pytest.raises(TypeError, match="stop must be"):
        lm.generate("x", 4, stop=[1])


def test_samba_state_copy_continues_bit_identically(lm):
    state = lm.allocate_state(2, 40)
    rng = np.random.default_rng(0)
    lm.forward(rng.integers(0, 256, (2, 9)), state)
    fork = state.copy()
    assert fork is not state and all(a is not b for a, b in zip(fork.layers, state.layers))
    for _ in range(5):
        ids = rng.integers(0, 256, 2)
        assert lm.step(ids, state).tobytes() == lm.step(ids, fork).tobytes()
    lm.step(np.array([1, 2]), state)  # the two are independent from here
    a, b = lm.step(np.array([3, 4]), state), lm.step(np.array([3, 4]), fork)
    assert a.tobytes() != b.tobytes()


def test_argument_types_are_checked(lm):
    with pytest.raises(TypeError, match="batch_size must be an int, got float"):
        lm.allocate_state(1.5, 8)
    with pytest.raises(TypeError, match="max_tokens must be an int, got str"):
        lm.allocate_state(1, "8")
    with pytest.raises(TypeError, match="batch_size must be an int, got bool"):
        lm.allocate_state(True, 8)
    assert lm.allocate_state(np.int64(1), np.int32(8)).max_tokens == 8
    weights = {name[len("layers.1."):]: w for name, w in lm.parameters().items() if name.startswith("layers.1.")}
    block = samebits.TransformerBlockInference(weights, n_heads=4)
    with pytest.raises(TypeError, match="batch_size must be an int"):
        block.allocate_state(2.0, 8)
    m3_weights = {name[len("layers.0."):]: w for name, w in lm.parameters().items() if name.startswith("layers.0.")}
    with pytest.raises(TypeError, match="batch_size must be an int"):
        samebits.Mamba3BlockInference(m3_weights).allocate_state(1.0)


def test_python_dash_m_is_the_command_line():
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith(b"samebits ")
    assert cli("generate", "--help").stdout.startswith(b"usage: samebits generate")


def test_from_checkpoint_names_a_file_of_the_wrong_kind(tmp_path):
    # A text file may be a damaged JSON checkpoint: the reader's own (upstream) sentence stands.
    notes = tmp_path / "notes.txt"
    notes.write_text("In the beginning\n")
    with pytest.raises(ValueError, match="checkpoint is not valid JSON"):
        samebits.SambaInference.from_checkpoint(notes)
    with pytest.raises(ValueError, match=r"mlp-demo.ckpt is an MLP checkpoint; from_checkpoint wants a Samba"):
        samebits.SambaInference.from_checkpoint(DEMO)
    with pytest.raises(ValueError, match=r"is a Samba checkpoint \(v2 archive\); from_checkpoint wants an MLP"):
        samebits.MLPInference.from_checkpoint(samebits.default_model_path())
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 32)
    with pytest.raises(ValueError, match="is a GGUF file"):
        samebits.SambaInference.from_checkpoint(gguf)
    tensors = tmp_path / "model.safetensors"
    tensors.write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(ValueError, match="is a safetensors file; from_checkpoint wants an MLP checkpoint"):
        samebits.MLPInference.from_checkpoint(tensors)


def test_invalid_environment_values_are_refused_by_name():
    code = "import samebits; samebits.get_num_threads()"
    for variable, value in (("SAMEBITS_NUM_THREADS", "many"), ("SAMEBITS_NUM_THREADS", "0"),
                            ("SAMEBITS_SIMD", "sse9")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env={**os.environ, variable: value})
        assert out.returncode == 1 and f"ValueError: samebits: environment variable {variable} must" in out.stderr
    fine = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                          env={**os.environ, "SAMEBITS_NUM_THREADS": "3", "SAMEBITS_SIMD": "scalar"})
    assert fine.returncode == 0
