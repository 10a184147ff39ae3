"""Upstream-recorded digests (docs/goldens.md §2, §5) for the MLP and GEMM v1 on the base and hashed fixtures."""

import numpy as np
import pytest

import samebits
from goldens import digest, draw

SLABS = {
    ("base", 1): "6d7cdd743479a80f",
    ("hashed", 1): "803a93350f7ea51b",
    ("base", 0): "1ecb2624fa2a842b",
    ("hashed", 0): "c27efc5113530683",
}
MLP = {"base": "aba80ad4b3c4a002", "hashed": "cdb6dde10999c281"}
GEMM = {"base": "27f3a0d05477091c", "hashed": "4863b43f7882649a"}


@pytest.mark.parametrize("kind,seed", sorted(SLABS))
def test_fixture_slabs(kind, seed):
    slab = draw(kind, seed).reshape(-1)[:1024].reshape(2, 16, 32)
    assert digest(slab) == SLABS[(kind, seed)]


def _pattern(shape):
    size = int(np.prod(shape))
    return ((np.arange(size) % 7 - 3) / 32).astype(np.float32).reshape(shape)


@pytest.mark.parametrize("kind", ["base", "hashed"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_mlp_digest(kind, threads, thread_count):
    thread_count(threads)
    model = samebits.MLPInference(_pattern((16, 8)), _pattern((16,)), _pattern((3, 16)), _pattern((3,)))
    x = np.ascontiguousarray(draw(kind, 1)[:256, :8])
    assert digest(model.predict_logits(x)) == MLP[kind]


@pytest.mark.parametrize("kind", ["base", "hashed"])
def test_gemm_digest_every_target(kind, simd_targets):
    x = draw(kind, 0)
    a = np.ascontiguousarray(x[:256].T)  # (16, 256)
    b = np.ascontiguousarray(x[:256])  # (256, 16)
    core = samebits._native()
    assert digest(core.gemm(a, b, "NN", reference=True)) == GEMM[kind]
    for target in simd_targets:
        core.set_simd_target(target)
        assert digest(core.gemm(a, b, "NN")) == GEMM[kind], target
        assert digest(core.gemm(b, b, "TN")) == GEMM[kind], target
        assert digest(core.gemm(a, a, "NT")) == GEMM[kind], target
