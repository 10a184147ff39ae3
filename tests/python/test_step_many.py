"""step_many (docs/api.md §18): one batched decode step over independent one-row states at different positions
equals, bit for bit, stepping each state alone, for every CausalLM family, GGUF packed weights, the low-bit
formats, the Samba stack and one Transformer block, on every SIMD target and 1-3 threads; and its refusals
move no state."""

import numpy as np
import pytest

from samebits import CausalLM, TransformerBlockInference, TransformerState, lowbit
from samebits._samba import SambaInference

from block_weights import normal_x as tokens, transformer_weights as block_weights
from gguf_model_writer import T, write_gguf
from test_causal_lm import FAMILIES, V, family, write_model
from test_samba import _config, _weights

PROMPTS = (1, 4, 9, 2)  # each sequence at its own position
ROUNDS = 3


def _prefilled(model, prompts, vocab, capacity, seed=11):
    """One one-row state per prompt length, fed a prompt of that length; the prompts."""
    rng = np.random.default_rng(seed)
    ids = [rng.integers(0, vocab, (1, n)) for n in prompts]
    states = []
    for prompt in ids:
        state = model.allocate_state(1, capacity)
        model.forward(prompt, state)
        states.append(state)
    return states


def _copy(state):
    return state.clone() if hasattr(state, "clone") else state.copy()


def _expect_many_equals_alone(model, vocab, prompts=PROMPTS, rounds=ROUNDS, capacity=16, targets_and_threads=None):
    """Steps copies of the same states alone and together for `rounds` tokens (each row then takes its own
    argmax) and compares every logits row bit for bit; under each SIMD target and thread count when given."""
    base = _prefilled(model, prompts, vocab, capacity)
    for case in targets_and_threads if targets_and_threads is not None else [None]:
        _run_rounds(model, [_copy(s) for s in base], vocab, rounds, case)


def _run_rounds(model, states, vocab, rounds, case):
    alone = [_copy(s) for s in states]
    tokens = [int(i * 7 % vocab) for i in range(len(states))]
    for r in range(rounds):
        together = model.step_many(np.asarray(tokens), states)
        assert together.shape == (len(states), vocab) and together.dtype == np.float32
        for i, state in enumerate(alone):
            row = model.step(np.asarray([tokens[i]]), state)[0]
            assert row.tobytes() == together[i].tobytes(), (case, r, i)
        tokens = [int(np.argmax(row)) for row in together]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_causal_lm_families(name, tmp_path, targets_and_threads):
    config, tensors = family(name)
    model = CausalLM.load(write_model(tmp_path / name, config, tensors))
    _expect_many_equals_alone(model, V, targets_and_threads=targets_and_threads)
    states = _prefilled(model, PROMPTS, V, 16)
    model.step_many(np.zeros(len(states), np.int64), states)
    assert [s.positions for s in states] == [n + 1 for n in PROMPTS]


def test_mamba2_across_its_chunk(tmp_path):
    # A Mamba-2 state seals its 256-token chunk: one sequence crosses it during the rounds, the other does not.
    config, tensors = family("mamba2")
    model = CausalLM.load(write_model(tmp_path / "mamba2", config, tensors))
    _expect_many_equals_alone(model, V, prompts=(254, 3), rounds=4, capacity=260)


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
@pytest.mark.parametrize("name", ["llama_untied_biases", "mistral_window", "mamba", "mamba2"])
def test_causal_lm_low_bit_formats(name, fmt, tmp_path):
    config, tensors = family(name)
    _expect_many_equals_alone(CausalLM.load(write_model(tmp_path / name, config, tensors), fmt), V)


@pytest.mark.parametrize("qtype", ["Q4_0", "Q8_0"])
def test_gguf_packed_weights(qtype, tmp_path, targets_and_threads):
    config, tensors = family("qwen2_biases")
    write_gguf(tmp_path / "m.gguf", config, tensors, qtype=getattr(T, qtype))
    _expect_many_equals_alone(CausalLM.load(tmp_path / "m.gguf"), V, targets_and_threads=targets_and_threads)


def _samba(tied=True, fmt=None):
    config = _config(tied, vocab=64, layers=("mamba3", "attention", "mamba3"))
    weights = _weights(config)
    return SambaInference(config, lowbit.pack(weights, fmt) if fmt else weights)


def test_samba_stack(targets_and_threads):
    # One sequence crosses the Mamba-3 chunk boundary (64 tokens) during the rounds.
    _expect_many_equals_alone(_samba(), 64, prompts=(62, 1, 5, 63), capacity=80,
                              targets_and_threads=targets_and_threads)


@pytest.mark.parametrize("fmt", [None, "bfloat16", "int8"])
def test_samba_untied_and_low_bit(fmt):
    _expect_many_equals_alone(_samba(False, fmt), 64)


def test_samba_many_equals_a_batched_state_at_one_position():
    # Sequences that do share a position: the ordinary B-row step and step_many agree too.
    model = _samba()
    ids = np.random.default_rng(3).integers(0, 64, (3, 5))
    batched = model.allocate_state(3, 8)
    model.forward(ids, batched)
    rows = []
    for i in range(3):
        state = model.allocate_state(1, 8)
        model.forward(ids[i : i + 1], state)
        rows.append(state)
    tokens = np.asarray([1, 2, 3])
    assert model.step_many(tokens, rows).tobytes() == model.step(tokens, batched).tobytes()


def test_samba_refusals_move_nothing():
    model = _samba()
    states = _prefilled(model, (2, 3), 64, 4)
    before = [s.layers[1].cached_tokens for s in states]
    with pytest.raises(ValueError, match="state 1 is state 0 again"):
        model.step_many([1, 2], [states[0], states[0]])
    with pytest.raises(ValueError, match="one id per state"):
        model.step_many([1], states)
    with pytest.raises(ValueError, match=r"in \[0, vocab\)"):
        model.step_many([1, 64], states)
    with pytest.raises(ValueError, match="rows"):
        model.step_many([1, 2], [states[0], model.allocate_state(2, 4)])
    full = model.allocate_state(1, 1)
    model.step([5], full)
    with pytest.raises(ValueError, match="KV slots"):
        model.step_many([1, 2, 3], [states[0], states[1], full])
    # states[1] holds 3 of 4 positions: one step fits, a second does not, and the first is not taken.
    model.step_many([1, 2], states)
    with pytest.raises(ValueError, match="KV slots"):
        model.step_many([1, 2], states)
    assert [s.layers[1].cached_tokens for s in states] == [n + 1 for n in before]


def test_causal_lm_refusals_move_nothing(tmp_path):
    config, tensors = family("llama_tied")
    model = CausalLM.load(write_model(tmp_path / "m", config, tensors))
    states = _prefilled(model, (2, 3), V, 4)
    snapshot = [s._engine.buffers_bytes() for s in states]
    with pytest.raises(ValueError, match="state 1 is state 0 again"):
        model.step_many([1, 2], [states[0], states[0]])
    with pytest.raises(ValueError, match="one id per state"):
        model.step_many([1, 2, 3], states)
    with pytest.raises(ValueError, match=r"ids must be in \[0, "):
        model.step_many([1, V], states)
    with pytest.raises(ValueError, match="the state holds 2 rows"):
        model.step_many([1, 2], [states[0], model.allocate_state(2, 4)])
    other = CausalLM.load(write_model(tmp_path / "other", config, tensors))
    with pytest.raises(ValueError, match="belongs to another model"):
        model.step_many([1, 2], [states[0], other.allocate_state(1, 4)])
    assert [s._engine.buffers_bytes() for s in states] == snapshot  # the refusals above moved nothing
    model.step_many([1, 2], states)
    stepped = [s._engine.buffers_bytes() for s in states]
    with pytest.raises(ValueError, match="more do not fit"):
        model.step_many([1, 2], states)  # states[1] is full, states[0] is not
    assert [s.positions for s in states] == [3, 4]
    assert snapshot != stepped == [s._engine.buffers_bytes() for s in states]
    for bad in (None, "state"):
        with pytest.raises(TypeError, match="CausalLMState"):
            model.step_many([1], [bad])


# ---- TransformerBlockInference.step_many: one block over many one-row states


def _block(window=0):
    return TransformerBlockInference(block_weights(nh=4, nkv=2), n_heads=4, n_kv_heads=2, window=window)


def _caller_state(state):
    """A state over caller buffers with the same contents (borrowed by each call, always packed)."""
    return TransformerState(state.batch_size, state.n_kv_heads, state.head_dim, state.max_tokens,
                            np.array(state.k_cache), np.array(state.v_cache), state.cached_tokens, state.window)


def _block_states(block, prompts=PROMPTS, capacity=16):
    """One one-row state per prompt length, fed that many tokens; every other one over caller buffers."""
    states = []
    for i, n in enumerate(prompts):
        state = block.allocate_state(1, capacity)
        block.forward(tokens((1, n, block.d_model), seed=20 + i), state)
        states.append(_caller_state(state) if i % 2 else state)
    return states


def _contents(states):
    return [(s.cached_tokens, np.asarray(s.k_cache).tobytes(), np.asarray(s.v_cache).tobytes()) for s in states]


@pytest.mark.parametrize("window", [0, 3])
@pytest.mark.parametrize("rank", [2, 3])
def test_block_many_equals_alone(window, rank, targets_and_threads):
    block = _block(window)
    for case in targets_and_threads:
        together = _block_states(block)
        alone = [s.copy() for s in together]
        for r in range(ROUNDS):
            x = tokens((len(together), 1, block.d_model), seed=40 + r)
            x = x.reshape(len(together), block.d_model) if rank == 2 else x
            y = block.step_many(x, together)
            assert y.shape == x.shape and y.dtype == np.float32
            for i, state in enumerate(alone):
                row = block.step(x[i : i + 1], state)
                assert row.tobytes() == y[i : i + 1].tobytes(), (case, r, i)
        assert _contents(together) == _contents(alone), case


def test_block_many_refusals_move_nothing():
    block = _block()
    states = _block_states(block, prompts=(2, 3), capacity=4)
    x = tokens((2, 1, block.d_model), seed=5)
    before = _contents(states)

    def refused(error, match, x, listed):
        with pytest.raises(error, match=match):
            block.step_many(x, listed)
        assert _contents(states) == before

    refused(ValueError, r"step_many: state 1 is state 0 again; each sequence needs its own state", x,
            [states[0], states[0]])
    refused(ValueError, r"step_many: state 1 is state 0 again", x, [states[1], states[1]])  # caller buffers
    refused(TypeError, r"step_many: state 1 must be a TransformerState", x, [states[0], None])
    refused(ValueError, r"step_many: x has 2 rows for 1 states", x, states[:1])
    refused(ValueError, r"step: the state was allocated for batch_size 2 but x has B = 1", x,
            [states[0], block.allocate_state(2, 4)])
    other = TransformerBlockInference(block_weights(nh=4, nkv=4), n_heads=4, n_kv_heads=4)
    refused(ValueError, r"step: the state was allocated for n_kv_heads 4 x head_dim 8 but this block has "
            r"n_kv_heads 2", x, [states[0], other.allocate_state(1, 4)])
    refused(ValueError, r"step: the state was allocated for window 3 but this block has window 0", x,
            [states[0], _block(3).allocate_state(1, 4)])
    bad = x.copy()
    bad[1, 0, 3] = np.nan
    refused(ValueError, r"NaN in x", bad, states)
    poisoned = _caller_state(states[1])
    poisoned.k_cache[0] = np.inf
    with pytest.raises(ValueError, match=r"infinity in k_cache"):
        block.step_many(x, [states[0], poisoned])
    assert _contents(states) == before
    # states[1] holds 3 of 4 positions: one step fits, a second does not, and the first is not taken.
    block.step_many(x, states)
    stepped = _contents(states)
    with pytest.raises(ValueError, match="KV slots"):
        block.step_many(x, states)
    assert _contents(states) == stepped != before
