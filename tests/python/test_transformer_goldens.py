"""Upstream-recorded digests of docs/goldens.md §4 and §4a for the transformer and transformer-window lanes,
base and hashed fixtures, ones and near-one norms: the stateless forward, the same slab decoded token
by token from a fresh state, and one decode step after a carried prefill."""

import numpy as np
import pytest

import samebits
from goldens import digest, lane_weights, slab

TENSORS = [
    ("input_layernorm.weight", (32,)),
    ("post_attention_layernorm.weight", (32,)),
    ("q_proj.weight", (32, 32)),
    ("k_proj.weight", (16, 32)),
    ("v_proj.weight", (16, 32)),
    ("o_proj.weight", (32, 32)),
    ("gate_proj.weight", (64, 32)),
    ("up_proj.weight", (64, 32)),
    ("down_proj.weight", (32, 64)),
]
NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight")

# docs/goldens.md §4: (norms, window) -> {fixture: digest}
FORWARD = {
    ("ones", 0): {"base": "d658bafd272776e1", "hashed": "33aa6df81aac0bcd"},
    ("near", 0): {"base": "80ab5cc2b56af36f", "hashed": "0e628f9d48f2496e"},
    ("ones", 8): {"base": "a35cf82209713d66", "hashed": "980b88a5ef026b11"},
    ("near", 8): {"base": "ac4114e19357cfc1", "hashed": "2e437a2b86507bbb"},
}
# docs/goldens.md §4a (only the recorded cells).
DECODE = {
    ("ones", 0, "base"): "cb617deca75d536b",
    ("ones", 0, "hashed"): "24d0838231c0cad8",
    ("near", 0, "base"): "6808a88b162a07c0",
    ("near", 8, "base"): "be87c335557cd386",
}


def block(norms, window):
    if norms == "ones":
        weights = lane_weights("transformer", TENSORS, ones=NORMS)
    else:
        weights = lane_weights("transformer", TENSORS, near_one=NORMS)
    return samebits.TransformerBlockInference(weights, n_heads=2, n_kv_heads=1, window=window)


def test_weight_check():
    weights = lane_weights("transformer", TENSORS, near_one=NORMS)
    assert weights["input_layernorm.weight"][:2].tolist() == [0.9321880340576172, 1.076145052909851]


@pytest.mark.parametrize("norms,window", sorted(FORWARD))
@pytest.mark.parametrize("kind", ["base", "hashed"])
def test_held_out_forward(norms, window, kind, targets_and_threads):
    blk = block(norms, window)
    x = slab(kind, 1)
    want = FORWARD[(norms, window)][kind]
    y = blk.forward(x)
    assert y.shape == (2, 16, 32) and y.dtype == np.float32 and y.flags.c_contiguous
    assert digest(y) == want
    assert digest(blk._forward_reference(x)) == want
    for case in targets_and_threads:
        assert digest(blk.forward(x)) == want, case


@pytest.mark.parametrize("norms,window", sorted(FORWARD))
@pytest.mark.parametrize("kind", ["base", "hashed"])
def test_held_out_slab_decoded_token_by_token(norms, window, kind):
    blk = block(norms, window)
    x = slab(kind, 1)
    state = blk.allocate_state(2, 16)
    steps = [blk.step(np.ascontiguousarray(x[:, t : t + 1]), state) for t in range(16)]
    assert digest(np.concatenate(steps, axis=1)) == FORWARD[(norms, window)][kind]
    assert state.cached_tokens == 16


@pytest.mark.parametrize("norms,window,kind", sorted(DECODE))
def test_one_decode_step_after_a_carried_prefill(norms, window, kind):
    blk = block(norms, window)
    x = slab(kind, 0)
    state = blk.allocate_state(2, 32)
    blk.forward(x, state)
    y = blk.step(np.ascontiguousarray(x[:, :1, :]), state)
    assert y.shape == (2, 1, 32)
    assert digest(y) == DECODE[(norms, window, kind)]
    # decode == prefill: position 16 of a fresh forward over the 17 tokens
    whole = blk.forward(np.ascontiguousarray(np.concatenate([x, x[:, :1]], axis=1)))
    assert whole[:, 16:17].tobytes() == y.tobytes()
