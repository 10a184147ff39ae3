"""Saved decode states (docs/formats.md §9): save -> load -> continue equals the uninterrupted run bit for bit
for every state kind, and every damaged, foreign or mismatched file is refused by name with nothing changed."""

import os
import struct

import numpy as np
import pytest

import samebits
import state_file_edits as edits
from block_weights import mamba1_weights, mamba2_weights, normal_x, transformer_weights
from test_causal_lm import family, ids_of, write_model
from test_mamba3 import random_weights as mamba3_weights
from test_samba import _model as samba_model


def _bits(array):
    return np.ascontiguousarray(array).tobytes()


def _block_cases():
    """(name, model, state factory, input maker) for the single blocks."""
    transformer = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1)
    windowed = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1, window=3)
    return [
        ("transformer", transformer, lambda m: m.allocate_state(2, 12)),
        ("transformer_window", windowed, lambda m: m.allocate_state(2, 12)),
        ("mamba1", samebits.Mamba1BlockInference(mamba1_weights()), lambda m: m.allocate_state(2)),
        ("mamba2", samebits.Mamba2BlockInference(mamba2_weights()), lambda m: m.allocate_state(2)),
        ("mamba3", samebits.Mamba3BlockInference(mamba3_weights()), lambda m: m.allocate_state(2)),
    ]


@pytest.mark.parametrize("case", range(5))
def test_block_states_continue_bitwise_after_save_and_load(case, tmp_path):
    name, model, allocate = _block_cases()[case]
    x = normal_x((2, 9, 32), seed=11)
    whole = allocate(model)
    expected = [model.forward(x[:, :5], whole)]
    expected += [model.step(x[:, t:t + 1], whole) for t in range(5, 9)]

    state = allocate(model)
    got = [model.forward(x[:, :5], state)]
    path = tmp_path / f"{name}.state"
    state.save(path, model)
    loaded = type(state).load(path, model)
    got += [model.step(x[:, t:t + 1], loaded) for t in range(5, 9)]
    assert [_bits(a) for a in got] == [_bits(b) for b in expected]
    # The loaded state saves to the very same bytes as the uninterrupted one at the same point.
    again = tmp_path / "again.state"
    loaded.save(again, model)
    whole.save(tmp_path / "whole.state", model)
    assert again.read_bytes() == (tmp_path / "whole.state").read_bytes()


def _decode(model, state, ids, steps):
    logits = [model.forward(ids, state)]
    token = np.argmax(logits[-1][:, -1], axis=-1).reshape(-1, 1)
    for _ in range(steps):
        logits.append(model.step(token, state))
        token = np.argmax(logits[-1], axis=-1).reshape(-1, 1)
    return [_bits(a) for a in logits]


def test_samba_state_continues_bitwise_after_save_and_load(tmp_path):
    model = samba_model()
    ids = np.random.default_rng(3).integers(0, 256, (2, 70))  # crosses a Mamba-3 chunk
    state = model.allocate_state(2, 120)
    model.forward(ids[:, :40], state)
    path = tmp_path / "samba.state"
    state.save(path, model)
    expected = _decode(model, state, ids[:, 40:], 8)
    loaded = samebits.SambaState.load(path, model)
    assert (loaded.batch_size, loaded.max_tokens, len(loaded.layers)) == (2, 120, 2)
    assert _decode(model, loaded, ids[:, 40:], 8) == expected


def test_default_model_state_continues_bitwise(tmp_path):
    model = samebits.default_model()
    ids = np.frombuffer(b"In the beginning God created the heaven", np.uint8).reshape(1, -1)
    state = model.allocate_state(1, 96)
    model.forward(ids, state)
    state.save(tmp_path / "s", model)
    expected = _decode(model, state, ids[:, -3:], 12)
    assert _decode(model, samebits.SambaState.load(tmp_path / "s", model), ids[:, -3:], 12) == expected


@pytest.mark.parametrize("name", ["llama_tied", "mistral_window", "mamba", "mamba2"])
def test_causal_lm_state_continues_bitwise(name, tmp_path):
    config, tensors = family(name)
    write_model(tmp_path / "m", config, tensors)
    model = samebits.CausalLM.load(tmp_path / "m")
    ids = ids_of(2, 10, 4)
    state = model.allocate_state(2, 24)
    model.forward(ids[:, :6], state)
    state.save(tmp_path / "c.state", model)
    expected = [_bits(model.forward(ids[:, 6:], state))]
    loaded = samebits.CausalLMState.load(tmp_path / "c.state", model)
    assert loaded.positions == 6
    assert [_bits(model.forward(ids[:, 6:], loaded))] == expected
    assert loaded.buffers_bytes() == state.buffers_bytes()


def _nudged(tensors, name):
    """The same tensors with one value of `name` moved by 0.25 (a copy)."""
    out = {key: value.copy() for key, value in tensors.items()}
    out[name].reshape(-1)[0] += np.float32(0.25)
    return out


def _refuses_each_others_states(model, other, state, tmp_path):
    assert samebits.model_fingerprint(model) != samebits.model_fingerprint(other)
    state.save(tmp_path / "x.state", model)
    with pytest.raises(ValueError, match="fingerprint: saved from another model"):
        type(state).load(tmp_path / "x.state", other)


@pytest.mark.parametrize("name", ["q_proj.bias", "o_proj.bias", "down_proj.bias", "gate_proj.bias",
                                  "q_norm.weight"])
def test_blocks_differing_in_one_optional_tensor_value_have_different_fingerprints(name, tmp_path):
    """docs/formats.md §9.3: every tensor the block computes with is in the fingerprint, the optional ones of
    its options included, so a state does not load into a block that differs only in a bias value."""
    weights = transformer_weights()
    options = dict(n_heads=2, n_kv_heads=1, qkv_bias=True, o_bias=True, mlp_bias=True, qk_norm=True)
    rng = np.random.default_rng(5)
    widths = {"q_proj.bias": 32, "k_proj.bias": 16, "v_proj.bias": 16, "o_proj.bias": 32, "up_proj.bias": 64,
              "gate_proj.bias": 64, "down_proj.bias": 32, "q_norm.weight": 16, "k_norm.weight": 16}
    weights.update({key: rng.standard_normal(width).astype(np.float32) for key, width in widths.items()})
    model = samebits.TransformerBlockInference(weights, **options)
    other = samebits.TransformerBlockInference(_nudged(weights, name), **options)
    state = model.allocate_state(1, 4)
    model.forward(normal_x((1, 2, 32), seed=3), state)
    _refuses_each_others_states(model, other, state, tmp_path)


@pytest.mark.parametrize("name, tensor", [("qwen2_biases", "model.layers.1.self_attn.k_proj.bias"),
                                          ("llama_untied_biases", "model.layers.0.mlp.down_proj.bias"),
                                          ("qwen3_qk_norm", "model.layers.1.self_attn.k_norm.weight")])
def test_causal_lms_differing_in_one_optional_tensor_value_have_different_fingerprints(name, tensor, tmp_path):
    config, tensors = family(name)
    model = samebits.CausalLM.load(write_model(tmp_path / "a", config, tensors))
    other = samebits.CausalLM.load(write_model(tmp_path / "b", config, _nudged(tensors, tensor)))
    state = model.allocate_state(1, 8)
    model.forward(ids_of(1, 3, 2), state)
    _refuses_each_others_states(model, other, state, tmp_path)


def test_the_fingerprint_is_the_same_at_every_thread_count():
    """docs/formats.md §9.3: a tensor's digest is cut into 2^18-value chunks by its length alone (gate_proj here
    is four chunks), so fingerprints taken at 1 and 2 threads, of two models with the same weights, agree."""
    weights = transformer_weights(dm=256, nh=4, nkv=2, it=4096, seed=4)
    before = samebits.get_num_threads()
    try:
        fingerprints = []
        for threads in (1, 2):
            samebits.set_num_threads(threads)
            fingerprints.append(samebits.model_fingerprint(samebits.TransformerBlockInference(weights, n_heads=4, n_kv_heads=2)))
    finally:
        samebits.set_num_threads(before)
    assert fingerprints[0] == fingerprints[1]
    other = dict(weights, **{"gate_proj.weight": weights["gate_proj.weight"].copy()})
    other["gate_proj.weight"].reshape(-1)[-1] += np.float32(0.25)  # in the last chunk
    assert samebits.model_fingerprint(samebits.TransformerBlockInference(other, n_heads=4, n_kv_heads=2)) != fingerprints[0]


def test_causal_lms_differing_in_the_mamba2_dt_limit_have_different_fingerprints(tmp_path):
    config, tensors = family("mamba2")
    model = samebits.CausalLM.load(write_model(tmp_path / "a", config, tensors))
    other = samebits.CausalLM.load(write_model(tmp_path / "b", dict(config, time_step_limit=[0.0, 4.0]), tensors))
    state = model.allocate_state(1, 8)
    model.forward(ids_of(1, 3, 2), state)
    _refuses_each_others_states(model, other, state, tmp_path)


# ------------------------------------------------------------------ refusals


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = samba_model()
    state = model.allocate_state(1, 16)
    model.forward(np.arange(5).reshape(1, 5), state)
    path = tmp_path_factory.mktemp("saved") / "good.state"
    state.save(path, model)
    return model, path.read_bytes()


def _refused(model, data, tmp_path, *words):
    path = tmp_path / "bad.state"
    path.write_bytes(data)
    with pytest.raises(ValueError) as info:
        samebits.SambaState.load(path, model)
    message = str(info.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, (word, message)


def test_damaged_files_are_refused_by_name(saved, tmp_path):
    model, data = saved
    _refused(model, data[:50], tmp_path, "file", "truncated")
    _refused(model, data[:-7], tmp_path, "body_length", "truncated")
    _refused(model, data + b"\0", tmp_path, "trailing")
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 1
    _refused(model, bytes(flipped), tmp_path, "checksum")
    _refused(model, b"NOTSTATE" + data[8:], tmp_path, "magic")
    _refused(model, edits.rewrite(data, edits.header(8, struct.pack("<I", 3))), tmp_path, "version", "version 3")
    _refused(model, edits.rewrite(data, edits.header(8, struct.pack("<I", 1))), tmp_path, "version", "version 1",
             "save the state again")
    _refused(model, edits.rewrite(data, edits.header(12, struct.pack("<I", 4))), tmp_path, "kind", "Mamba3State")
    _refused(model, edits.rewrite(data, edits.header(16, b"f" * 64)), tmp_path, "fingerprint", "another model")


def test_another_models_state_and_bad_fields_are_refused(saved, tmp_path):
    model, data = saved
    other = samba_model(tied=False)
    path = tmp_path / "good.state"
    path.write_bytes(data)
    with pytest.raises(ValueError, match="fingerprint: saved from another model"):
        samebits.SambaState.load(path, other)
    assert samebits.model_fingerprint(model) != samebits.model_fingerprint(other)
    assert samebits.model_fingerprint(model) == samebits.model_fingerprint(model)

    for edit, words in (
            (edits.counter("batch", 0), ("batch", "not in [1,")),
            (edits.counter("batch", 2), ("layer.0.batch",)),
            (edits.counter("max_tokens", 17), ("layer.1.max_tokens",)),
            (edits.counter("layer.0.buffered_tokens", 65), ("buffered_tokens",)),
            (edits.counter("layer.1.cached_tokens", 17), ("cached_tokens",)),
            (edits.array_value("layer.0.theta", 3, 0, float("nan")), ("layer.0.theta", "not finite")),
            (edits.array_extent("layer.0.h", 2**62), ("layer.0.h",)),
            (edits.extra_counter("surprise", 1), ("surprise", "not a field"))):
        _refused(model, edits.rewrite(data, edit), tmp_path, *words)


def test_wrong_model_class_and_paths(saved, tmp_path):
    model, data = saved
    path = tmp_path / "good.state"
    path.write_bytes(data)
    with pytest.raises(TypeError, match="belongs to a SambaInference"):
        samebits.SambaState.load(path, samebits.Mamba1BlockInference(mamba1_weights()))
    with pytest.raises(ValueError, match="NUL"):
        samebits.SambaState.load(str(path) + "\0x", model)
    with pytest.raises(Exception, match="no-such"):
        samebits.SambaState.load(tmp_path / "no-such.state", model)
    # A failed save leaves no partial file behind and the old file intact.
    state = samebits.SambaState.load(path, model)
    with pytest.raises(ValueError):
        state.save(tmp_path / "missing-dir" / "x.state", model)
    assert not os.path.exists(tmp_path / "missing-dir")
