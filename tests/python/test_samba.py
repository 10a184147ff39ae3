"""SambaInference (docs/api.md §7, upstream checks 14.1 items 17, 18, 20, 21; 14.3 samba case): decode ==
forward, split == whole, rows alone, ragged with junk padding, threads, packed weights, concurrent use,
refusals."""

import threading

import numpy as np
import pytest

import samebits
from samebits import lowbit
from samebits._samba import SambaInference, SambaState

import samba_checkpoint_writer as writer
from block_checks import expect_ragged_equals_rows_alone


def _config(tied, vocab=256, layers=("mamba3", "attention")):
    return samebits.SambaConfig(vocab, 32, list(layers), n_heads=2, intermediate=64, tie_embeddings=tied)


def _weights(config, seed=5):
    """Upstream's step_vs_full recipe: normal * 0.05, every norm weight ones."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in config.registry():
        if "norm" in name:
            out[name] = np.ones(shape, np.float32)
        else:
            out[name] = (rng.standard_normal(shape) * 0.05).astype(np.float32)
    return out


def _model(tied=True, **kw):
    config = _config(tied, **kw)
    return SambaInference(config, _weights(config))


def _ids(shape, vocab=256, seed=7):
    return np.random.default_rng(seed).integers(0, vocab, shape)


@pytest.mark.parametrize("tied", [True, False])
def test_decode_equals_forward_and_split_equals_whole(tied):
    model = _model(tied)
    ids = _ids((2, 12))
    full = model.forward(ids)
    assert full.shape == (2, 12, 256) and full.dtype == np.float32
    state = model.allocate_state(2, 12)
    for t in range(12):
        out = model.step(ids[:, t], state)
        assert out.shape == (2, 256)
        assert out.tobytes() == full[:, t].tobytes(), t
    split = model.allocate_state(2, 12)
    parts = [model.forward(ids[:, :5], split), model.forward(ids[:, 5:], split)]
    assert np.concatenate(parts, axis=1).tobytes() == full.tobytes()


def test_decode_crosses_the_mamba3_chunk():
    model = _model(True, vocab=64)
    ids = _ids((1, 70), vocab=64)
    full = model.forward(ids)
    state = model.allocate_state(1, 70)
    for t in range(70):
        assert model.step(ids[:, t : t + 1], state).tobytes() == full[:, t].tobytes(), t


@pytest.mark.parametrize("tied", [True, False])
def test_rows_alone_ragged_and_reference(tied):
    model = _model(tied)
    ids = _ids((4, 16))
    full = model.logits(ids)
    for i in range(4):
        assert model.logits(ids[i : i + 1]).tobytes() == full[i : i + 1].tobytes()
    # Out-of-vocab junk in the padding is tolerated.
    expect_ragged_equals_rows_alone(model, ids, [16, 3, 1, 9], junk=999)
    assert model._forward_reference(ids).tobytes() == full.tobytes()


def test_threads_and_simd_targets_agree(targets_and_threads):
    model = _model(True)
    ids = _ids((2, 20))
    want = model.forward(ids).tobytes()
    for case in targets_and_threads:
        assert model.forward(ids).tobytes() == want, case


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
def test_packed_weights_equal_their_materialized_float32(fmt):
    config = _config(False)
    weights = _weights(config)
    packed = lowbit.pack(weights, fmt)
    model = SambaInference(config, packed)
    assert model.weight_format == fmt
    materialized, _ = lowbit.unpack(packed)
    ids = _ids((2, 10))
    assert model.forward(ids).tobytes() == SambaInference(config, materialized).forward(ids).tobytes()
    assert model.forward(ids).tobytes() != SambaInference(config, weights).forward(ids).tobytes()


def test_one_model_many_threads_with_separate_states():
    model = _model(True)
    prompts = [_ids((1, 24), seed=s) for s in range(4)]
    want = []
    for ids in prompts:
        state = model.allocate_state(1, 24)
        want.append(np.stack([model.step(ids[:, t], state) for t in range(24)]).tobytes())
    got = [None] * 4

    def decode(i):
        state = model.allocate_state(1, 24)
        got[i] = np.stack([model.step(prompts[i][:, t], state) for t in range(24)]).tobytes()

    threads = [threading.Thread(target=decode, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


def test_checkpoint_round_trip(tmp_path):
    config = _config(True)
    weights = _weights(config)
    cfg = config.to_dict()
    for fmt, write in (("stream", writer.write_stream), ("legacy", writer.write_legacy)):
        path = write(tmp_path / f"{fmt}.ckpt", cfg, weights)
        model = SambaInference.from_checkpoint(path)
        assert model.config == config
        ids = _ids((2, 8))
        assert model.forward(ids).tobytes() == SambaInference(config, weights).forward(ids).tobytes()
        assert all(model.parameters()[n].tobytes() == weights[n].tobytes() for n in weights)


def test_state_pieces_are_live_views():
    model = _model(True)
    ids = _ids((2, 12))
    full = model.forward(ids)
    state = model.allocate_state(2, 12)
    for t in range(6):
        model.step(ids[:, t], state)
    cache = state.layers[1].v_cache
    bits = cache.view(np.uint32)
    bits[7] += 1  # one ULP through the view must reach the engine
    outs = [model.step(ids[:, t], state) for t in range(6, 12)]
    assert any(o.tobytes() != full[:, 6 + i].tobytes() for i, o in enumerate(outs))


def test_refusals():
    model = _model(True)
    ids = _ids((2, 4))
    with pytest.raises(ValueError, match=r"\[0, vocab\)"):
        model.forward(np.array([[256]]))
    with pytest.raises(TypeError, match="state must be a SambaState"):
        model.forward(ids, state=object())
    with pytest.raises(NotImplementedError, match="inference is forward only"):
        model.loss(ids, ids)
    with pytest.raises(NotImplementedError, match="inference is forward only"):
        model.train_step(ids, ids)
    with pytest.raises(ValueError, match="state is required"):
        model.step(ids[:, 0], None)
    with pytest.raises(ValueError, match=r"\(B,\) or \(B, 1\)"):
        model.step(ids, model.allocate_state(2, 4))
    with pytest.raises(TypeError, match="integer"):
        model.forward(ids.astype(np.float32))
    with pytest.raises(ValueError, match="stateless forward only"):
        model.forward(ids, model.allocate_state(2, 4), lengths=[1, 2])
    with pytest.raises(ValueError, match="the state holds 3 rows"):
        model.forward(ids, model.allocate_state(3, 4))
    with pytest.raises(ValueError, match="KV slots"):
        model.forward(_ids((2, 5)), model.allocate_state(2, 4))
    with pytest.raises(ValueError, match="must be positive"):
        model.allocate_state(0, 4)
    config = _config(True)
    weights = _weights(config)
    del weights["norm_f.weight"]
    with pytest.raises(ValueError, match="weight dict mismatch"):
        SambaInference(config, weights)
    with pytest.raises(TypeError, match="config must be a SambaConfig"):
        SambaInference({"vocab": 256}, _weights(config))
    bad = _weights(config)
    bad["layers.0.D"] = bad["layers.0.D"].astype(np.float64)
    with pytest.raises(TypeError, match="float64"):
        SambaInference(config, bad)
    bad = _weights(config)
    bad["embed.weight"][3, 3] = np.inf
    with pytest.raises(ValueError, match="embed.weight is not finite"):
        SambaInference(config, bad)


def test_ids_of_every_integer_kind_and_their_range():
    """Ids are judged on their original values whatever their integer dtype, layout or container; a step
    takes few ids (checked as Python ints), a forward many (checked by numpy): both refuse alike."""
    model = _model(True)
    ids = _ids((2, 6))
    state = model.allocate_state(2, 6)
    model.forward(ids[:, :5], state)
    want = model.step(ids[:, 5].astype(np.int32), _copy_state(state))
    spellings = [ids[:, 5].astype(np.int64), ids[:, 5].astype(np.uint8), ids[:, 5].astype(">i2"),
                 ids[:, 4:6][:, 1], ids[:, 5:6].astype(np.uint64), list(int(i) for i in ids[:, 5])]
    for spelled in spellings:
        assert model.step(spelled, _copy_state(state)).tobytes() == want.tobytes(), repr(spelled)
    for bad in (np.array([2**32 + 5, 1], dtype=np.int64), np.array([2**63, 0], dtype=np.uint64),
                np.array([-1, 0], dtype=np.int8), np.array([0, 256], dtype=">i4")):
        with pytest.raises(ValueError, match=r"\[0, vocab\)"):
            model.step(bad, _copy_state(state))
    with pytest.raises(TypeError, match="integer"):
        model.step(np.array([True, False]), _copy_state(state))
    many = _ids((2, 40))
    many[1, 33] = 2**32 + 3
    with pytest.raises(ValueError, match=r"\[0, vocab\)"):
        model.forward(many)
    many[1, 33] = -2**40
    with pytest.raises(ValueError, match=r"\[0, vocab\)"):
        model.forward(many)


def _copy_state(state):
    return SambaState(state.batch_size, state.max_tokens, [layer.copy() for layer in state.layers])


def _resident_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def test_a_state_for_more_tokens_than_it_holds_costs_only_what_is_written():
    """A KV cache's zeros are mapped, not written: allocate_state for far more tokens than a call will use
    (here 2 x 8 GiB of cache) is instant and takes no memory until written, as numpy's calloc'd zeros are;
    beyond the address space it is a MemoryError, beyond 2^61 floats a ValueError. Before, every page was
    zeroed at once, and a request past the machine's memory got the process killed."""
    model = _model(True)
    with open("/proc/sys/vm/overcommit_memory") as mode:
        strict = mode.read().strip() == "2"
    tokens = (8 << 30) // (4 * 2 * 16)  # 8 GiB per cache buffer: (B=1) x (KV=2) x tokens x (HD=16) floats
    if not strict:  # vm.overcommit_memory = 2 may refuse such a mapping outright
        before = _resident_bytes()
        state = model.allocate_state(1, tokens)
        attention = state.layers[1]
        assert attention.k_cache.size == 2 * tokens * 16
        assert attention.k_cache[-1] == 0.0 and attention.v_cache[len(attention.v_cache) // 2] == 0.0
        assert _resident_bytes() - before < (256 << 20)
        with pytest.raises(ValueError, match="exceeds max_positions 8192"):
            model.step(np.array([3]), state)
        del state, attention
    with pytest.raises(MemoryError, match=r"TransformerState: a state of 1 x 2 x 10000000000000 x 16 floats does not fit"):
        model.allocate_state(1, 10**13)
    with pytest.raises(ValueError, match=r"a state of 1 x 2 x 4611686018427387904 x 16 floats is too large to allocate"):
        model.allocate_state(1, 2**62)


def test_a_shared_mamba3_state_keeps_a_standalone_blocks_reports():
    """A Mamba3State of a SambaState may also be driven by a standalone Mamba3BlockInference; the block's
    reports are owed from the state its last call left, so a Samba call that moves the state must not
    change what the block then reports."""
    model = _model(True)
    params = model.parameters()
    layer0 = {name[len("layers.0."):]: value for name, value in params.items() if name.startswith("layers.0.")}
    block, block_twin = samebits.Mamba3BlockInference(layer0), samebits.Mamba3BlockInference(layer0)
    x = np.random.default_rng(3).standard_normal((1, 3, 32)).astype(np.float32)
    state = model.allocate_state(1, 16)
    twin = state.layers[0].copy()
    block.forward(x, state.layers[0])  # reports owed from state.layers[0]
    block_twin.forward(x, twin)
    want = [getattr(block_twin, name).copy() for name in ("h_last_", "k_last_", "v_last_", "theta_last_")]
    model.step(_ids((1,)), state)  # moves state.layers[0]
    for name, expected in zip(("h_last_", "k_last_", "v_last_", "theta_last_"), want):
        assert getattr(block, name).tobytes() == expected.tobytes(), name
