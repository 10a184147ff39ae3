"""CausalLM over GGUF files (docs/gguf.md §10-§11): small random models of every supported architecture
written twice, as a Hugging Face safetensors directory and as a GGUF file with the converter's
transformations (Q/K row order for `llama`, fused phi3 tensors, F32/F16/Q8_0 payloads), give the same logits
bit for bit; the un-permute is shown to matter; every refusal is named."""

import numpy as np
import pytest

import samebits
from samebits import CausalLM
from gguf_model_writer import write_gguf, T
from test_causal_lm import HD, ids_of, transformer_family, write_model

FAMILIES = {
    "llama_tied_gqa": lambda: transformer_family("llama", 11, tied=True, rms_norm_eps=1e-5, rope_theta=100000.0),
    "llama_biases": lambda: _config_also(transformer_family("llama", 12, qkv_bias=True, o_bias=True, mlp_bias=True,
                                                            attention_bias=True, rms_norm_eps=1e-6), mlp_bias=True),
    "qwen2_biases": lambda: transformer_family("qwen2", 13, qkv_bias=True, rms_norm_eps=1e-6,
                                               rope_theta=1000000.0),
    "qwen3_qk_norm": lambda: transformer_family("qwen3", 14, tied=True, qk_norm=True, head_dim=HD,
                                                rms_norm_eps=1e-6),
    "phi3_fused": lambda: transformer_family("phi3", 15, rms_norm_eps=1e-5, partial_rotary_factor=0.5,
                                             sliding_window=5),
}


def _config_also(pair, **fields):
    """A family whose config holds fields transformer_family's keywords take for the tensors (mlp_bias)."""
    pair[0].update(fields)
    return pair


def family(name):
    return FAMILIES[name]()


def twins(tmp_path, name, qtype=None, permute=True):
    config, tensors = family(name)
    decoded = write_gguf(tmp_path / "m.gguf", config, tensors, qtype=qtype, permute=permute)
    write_model(tmp_path / "hf", config, decoded)
    return CausalLM.load(tmp_path / "hf"), CausalLM.load(tmp_path / "m.gguf")


@pytest.mark.parametrize("qtype", [None, "F16", "Q8_0"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_gguf_equals_safetensors_bitwise(name, qtype, tmp_path):
    hf, gg = twins(tmp_path, name, None if qtype is None else getattr(T, qtype))
    assert (gg.model_type, gg.n_layers, gg.d_model, gg.vocab_size) == (hf.model_type, 2, hf.d_model, hf.vocab_size)
    assert gg.tie_embeddings == hf.tie_embeddings
    assert gg.max_positions == hf.max_positions
    ids = ids_of(2, 9, 3)
    a, b = hf.forward(ids), gg.forward(ids)
    assert a.view(np.uint32).tobytes() == b.view(np.uint32).tobytes()
    state = gg.allocate_state(2, 12)
    gg.forward(ids[:, :6], state)
    stepped = gg.step(ids[:, 6], state)
    assert stepped.view(np.uint32).tobytes() == gg.forward(ids[:, :7])[:, -1].view(np.uint32).tobytes()
    mine, theirs = gg.parameters(), hf.parameters()
    assert sorted(mine) == sorted(theirs)
    for key, value in theirs.items():
        assert value.view(np.uint32).tobytes() == mine[key].view(np.uint32).tobytes(), key


@pytest.mark.parametrize("qtype", ["F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_packed_equals_materialized_bitwise(name, qtype, tmp_path, monkeypatch, targets_and_threads):
    """docs/gguf.md §14: the matrices kept in the file's codes give the logits, steps and parameters of the
    model materialized to float32 (SAMEBITS_GGUF_MATERIALIZE=1), bit for bit, on every SIMD target and thread
    count."""
    config, tensors = family(name)
    write_gguf(tmp_path / "m.gguf", config, tensors, qtype=getattr(T, qtype))
    packed = CausalLM.load(tmp_path / "m.gguf")
    monkeypatch.setenv("SAMEBITS_GGUF_MATERIALIZE", "1")
    materialized = CausalLM.load(tmp_path / "m.gguf")
    ids = ids_of(2, 9, 4)
    targets_and_threads.scalar_one_thread()
    want = materialized.forward(ids).tobytes()
    for case in targets_and_threads:
        assert packed.forward(ids).tobytes() == want, case
    state = packed.allocate_state(2, 12)
    packed.forward(ids[:, :6], state)
    assert packed.step(ids[:, 6], state).tobytes() == materialized.forward(ids[:, :7])[:, -1].tobytes()
    mine, theirs = packed.parameters(), materialized.parameters()
    assert sorted(mine) == sorted(theirs)
    for key, value in theirs.items():
        assert value.tobytes() == mine[key].tobytes(), key
    # Same bits, same fingerprint (docs/formats.md §9.3): the twins read each other's saved states.
    assert samebits.model_fingerprint(packed) == samebits.model_fingerprint(materialized)


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
def test_gguf_weight_formats_equal_safetensors(fmt, tmp_path):
    config, tensors = family("llama_tied_gqa")
    decoded = write_gguf(tmp_path / "m.gguf", config, tensors, qtype=T.Q8_0)
    write_model(tmp_path / "hf", config, decoded)
    ids = ids_of(1, 7, 5)
    a = CausalLM.load(tmp_path / "hf", weight_format=fmt).forward(ids)
    b = CausalLM.load(tmp_path / "m.gguf", weight_format=fmt).forward(ids)
    assert a.view(np.uint32).tobytes() == b.view(np.uint32).tobytes()


def test_the_unpermute_is_exercised(tmp_path):
    """A llama file written without the converter's row order loads (the rows are just other rows) but its
    logits differ: the un-permute is what makes the GGUF path equal the safetensors one."""
    hf, gg = twins(tmp_path, "llama_tied_gqa", permute=False)
    ids = ids_of(1, 6, 7)
    assert not np.array_equal(hf.forward(ids), gg.forward(ids))


def _refused(tmp_path, match, name="llama_tied_gqa", **kw):
    config, tensors = family(name)
    mutate = kw.pop("mutate", None)
    if mutate:
        mutate(config, tensors)
    write_gguf(tmp_path / "bad.gguf", config, tensors, **kw)
    with pytest.raises(ValueError, match=match):
        CausalLM.load(tmp_path / "bad.gguf")


def test_refusals(tmp_path):
    _refused(tmp_path, "rope.scaling.type.*'yarn'.*not supported", extra={"{A}.rope.scaling.type": "yarn"})
    _refused(tmp_path, "expert_count.*mixture of experts", extra={"{A}.expert_count": 4})
    _refused(tmp_path, "tensor 'blk.0.extra.weight' is not one",
             mutate=lambda c, t: t.__setitem__("blk.0.extra.weight", np.ones(4, np.float32)))
    _refused(tmp_path, r"lacks 1 of the .*'blk.1.ffn_down.weight'",
             mutate=lambda c, t: t.pop("model.layers.1.mlp.down_proj.weight"))
    _refused(tmp_path, "rope_freqs.weight.*not supported",
             mutate=lambda c, t: t.__setitem__("rope_freqs.weight", np.ones(HD // 2, np.float32)))
    _refused(tmp_path, "key_length.*must equal embedding_length", name="qwen3_qk_norm",
             mutate=lambda c, t: c.__setitem__("head_dim", HD * 2))
    with pytest.raises(ValueError, match="loader 'mojolearn'.*GGUF"):
        config, tensors = family("qwen2_biases")
        write_gguf(tmp_path / "ok.gguf", config, tensors)
        CausalLM.load(tmp_path / "ok.gguf", loader="mojolearn")


@pytest.mark.parametrize("arch", ["mamba", "mamba2"])
def test_mamba_files_are_refused_by_name(arch, tmp_path):
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), arch)
    w.add_embedding_length(32)
    w.add_tensor("token_embd.weight", np.ones((8, 32), np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with pytest.raises(ValueError, match=f"architecture '{arch}' is refused by name: its ssm_a"):
        CausalLM.load(tmp_path / "m.gguf")


def test_other_architectures_and_files_are_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(tmp_path / "g.gguf"), "gemma")
    w.add_tensor("token_embd.weight", np.ones((8, 32), np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with pytest.raises(ValueError, match="architecture 'gemma' is not supported"):
        CausalLM.load(tmp_path / "g.gguf")
    (tmp_path / "x.bin").write_bytes(b"not a model")
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        CausalLM.load(tmp_path / "x.bin")
