"""CausalLM on checkpoints that transformers itself made (tests/fixtures/hf/, written by
tools/make_hf_fixtures.py: config.json in transformers 5.x style, safetensors from save_pretrained): the logits
against transformers' own float64 run of the same files, every identity of the seed surface on each, the
low-bit formats against their materialized float32, and test_causal_lm's numpy float64 forward against the same
references (docs/models.md §21)."""

import json
import os
import shutil

import numpy as np
import pytest

from samebits import CausalLM
from causal_lm_checks import assert_identities, assert_low_bit_equals_materialized, same_bits
from hf_checkpoint_files import read_safetensors
from test_causal_lm import mamba_reference64, reference64

ROOT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "hf")
NAMES = sorted(n for n in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, n)))
FAMILY_OF = {"llama_tied": "llama", "llama_untied": "llama", "llama_tied_bf16": "llama", "mistral_window": "mistral",
             "qwen2_biases": "qwen2", "qwen3_qk_norm": "qwen3", "phi3_fused": "phi3", "mamba": "mamba",
             "mamba2": "mamba2"}
TOLERANCE = 1e-5


def fixture(name):
    directory = os.path.join(ROOT, name)
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(directory, "reference.json")) as f:
        reference = json.load(f)
    ids = np.array(reference["ids"], np.int64)
    return directory, config, ids, np.array(reference["logits"], np.float64)


def worst_relative_error(got, want):
    """Over every (row, position): max |got - want| over the vocabulary divided by that position's logit range
    (max - min of want); the worst of them."""
    spread = np.abs(got.astype(np.float64) - want).max(-1)
    return float((spread / (want.max(-1) - want.min(-1))).max())


def test_every_family_has_a_fixture():
    assert NAMES == sorted(FAMILY_OF)
    for name in NAMES:
        directory, config, ids, logits = fixture(name)
        assert config["model_type"] == FAMILY_OF[name]
        assert config["transformers_version"].startswith("5.") and "dtype" in config  # the 5.x writing
        assert ids.shape == (2, 8) and logits.shape == (2, 8, config["vocab_size"])


@pytest.mark.parametrize("name", NAMES)
def test_logits_match_transformers_float64(name):
    directory, config, ids, want = fixture(name)
    model = CausalLM.load(directory)
    assert model.model_type == config["model_type"] and model.unused_names == []
    assert model.tie_embeddings == ("lm_head.weight" not in read_safetensors(os.path.join(directory,
                                                                                          "model.safetensors"))[0])
    assert worst_relative_error(model.forward(ids), want) <= TOLERANCE


@pytest.mark.parametrize("name", NAMES)
def test_the_numpy_forward_is_transformers_float64(name):
    """test_causal_lm's numpy float64 forward, the reference of its 4.x-style checkpoints, gives transformers'
    float64 logits on every fixture to within 1e-10 of the range (measured: at most 7e-12)."""
    directory, config, ids, want = fixture(name)
    tensors, _ = read_safetensors(os.path.join(directory, "model.safetensors"))
    forward = mamba_reference64 if config["model_type"].startswith("mamba") else reference64
    assert np.abs(forward(config, tensors, ids) - want).max() <= 1e-10 * (want.max() - want.min())


def _full_attention(config):
    config["layer_types"] = ["full_attention"] * 2


def _whole_head_rotates(config):
    del config["rope_parameters"]["partial_rotary_factor"]


@pytest.mark.parametrize("name, edit", [("qwen2_biases", _full_attention), ("phi3_fused", _whole_head_rotates)])
def test_the_reference_sees_the_options(name, edit, tmp_path):
    """The same weights under a config without the option (qwen2's window on its second layer, phi3's partial
    rotary) miss the reference by far more than the tolerance: the agreement above is no accident."""
    directory, config, ids, want = fixture(name)
    edit(config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    shutil.copy(os.path.join(directory, "model.safetensors"), tmp_path)
    assert worst_relative_error(CausalLM.load(tmp_path).forward(ids), want) > 100 * TOLERANCE


@pytest.mark.parametrize("name", NAMES)
def test_identities(name, thread_count):
    directory, _, ids, _ = fixture(name)
    assert_identities(CausalLM.load(directory), ids, thread_count)


@pytest.mark.parametrize("name", NAMES)
def test_simd_targets_and_threads_agree(name, targets_and_threads):
    directory, _, ids, _ = fixture(name)
    model = CausalLM.load(directory)
    targets_and_threads.scalar_one_thread()
    want = model.forward(ids)
    for case in targets_and_threads:
        assert same_bits(model.forward(ids), want), case


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
@pytest.mark.parametrize("name", NAMES)
def test_low_bit_formats_equal_their_materialized_float32(name, fmt, tmp_path):
    directory, config, ids, _ = fixture(name)
    tensors, _ = read_safetensors(os.path.join(directory, "model.safetensors"))
    assert_low_bit_equals_materialized(directory, config, tensors, fmt, tmp_path, ids)


def test_bf16_storage_keeps_its_bits():
    """The BF16 fixture under weight_format="bfloat16" is its own float32 load (docs/models.md §16.2)."""
    directory, _, ids, _ = fixture("llama_tied_bf16")
    _, dtypes = read_safetensors(os.path.join(directory, "model.safetensors"))
    assert set(dtypes.values()) == {"BF16"}
    assert same_bits(CausalLM.load(directory, "bfloat16").forward(ids), CausalLM.load(directory).forward(ids))
