"""The identities every CausalLM keeps (docs/models.md §17.2, §16.2), as assertions shared by the suites over
synthetic checkpoints written in the tests and over the transformers-made fixtures of tests/fixtures/hf/."""

import numpy as np

from samebits import CausalLM
from hf_checkpoint_files import write_model


def same_bits(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def assert_identities(model, ids, set_threads, split=3):
    """On (2, L) ids: a carried forward, step after step, a prefill split at `split` and the second row alone
    all give the stateless forward's bits, under 1, 2 and 3 threads; a cloned state continues like the
    original and reset_state empties it."""
    B, L = ids.shape
    whole = model.forward(ids)
    assert whole.shape == (B, L, model.vocab_size) and whole.dtype == np.float32
    for threads in (1, 2, 3):
        set_threads(threads)
        state = model.allocate_state(B, L)
        assert same_bits(model.forward(ids, state), whole)
        stepped = model.allocate_state(B, L)
        for t in range(L):
            assert same_bits(model.step(ids[:, t], stepped), whole[:, t]), (threads, t)
        carried = model.allocate_state(B, L)
        a, b = model.forward(ids[:, :split], carried), model.forward(ids[:, split:], carried)
        assert same_bits(np.concatenate([a, b], 1), whole)
        assert carried.positions == L
        assert same_bits(model.forward(ids[1:2]), whole[1:2])
    state = model.allocate_state(1, L)
    model.forward(ids[:1, :split], state)
    copy = state.clone()
    assert np.array_equal(model.forward(ids[:1, split:], state), model.forward(ids[:1, split:], copy))
    assert model.reset_state(state) is state and state.positions == 0


def assert_low_bit_equals_materialized(source, config, tensors, fmt, workdir, ids):
    """The checkpoint directory `source` (config and float32 `tensors`) loaded in `fmt` gives the bits of the
    float32 model whose weights are its materialized parameters()."""
    packed = CausalLM.load(source, fmt)
    assert packed.weight_format == fmt
    rewritten = dict(tensors)
    rewritten.update(packed.parameters())
    plain = CausalLM.load(write_model(workdir / "materialized", config, rewritten))
    assert same_bits(packed.forward(ids), plain.forward(ids))
