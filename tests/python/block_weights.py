"""Weight dicts and inputs for the block tests: the d_model-32 fixtures' (name, shape) tables, standard-normal
weights drawn over them (the upstream test fixtures' recipe: normal * scale in name order, named norms set
to ones) and standard-normal inputs."""

import numpy as np

from samba_checkpoint_writer import ATTENTION_NAMES as TRANSFORMER_NAMES  # noqa: F401  (re-exported)

MAMBA1_SHAPES = (
    ("norm.weight", (32,)), ("in_proj.weight", (128, 32)), ("conv1d.weight", (64, 1, 4)), ("conv1d.bias", (64,)),
    ("x_proj.weight", (34, 64)), ("dt_proj.weight", (64, 2)), ("dt_proj.bias", (64,)), ("A_log", (64, 16)),
    ("D", (64,)), ("out_proj.weight", (32, 64)),
)
MAMBA2_SHAPES = (
    ("block_norm.weight", (32,)), ("in_proj.weight", (385, 32)), ("conv1d.weight", (320, 1, 4)),
    ("conv1d.bias", (320,)), ("dt_bias", (1,)), ("A_log", (1,)), ("D", (1,)), ("norm.weight", (64,)),
    ("out_proj.weight", (32, 64)),
)


def normal_weights(shapes, seed, ones=(), scale=0.1):
    """{name: standard normal * scale} drawn in the order of `shapes` ([(name, shape)]); names in `ones` are
    then replaced by float32 ones."""
    rng = np.random.default_rng(seed)
    out = {name: (rng.standard_normal(shape) * scale).astype(np.float32) for name, shape in shapes}
    for name in ones:
        out[name] = np.ones(out[name].shape, np.float32)
    return out


def normal_x(shape=(2, 16, 32), seed=3):
    """A float32 input of standard-normal values."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def transformer_weights(dm=32, nh=2, nkv=1, it=64, seed=1):
    """A Llama decoder block's weights, every tensor (norms included) normal * 0.1."""
    hd = dm // nh
    shapes = ((dm,), (dm,), (nh * hd, dm), (nkv * hd, dm), (nkv * hd, dm), (dm, nh * hd), (it, dm), (it, dm), (dm, it))
    return normal_weights(zip(TRANSFORMER_NAMES, shapes), seed)


def mamba1_weights(seed=21, scale=0.1):
    return normal_weights(MAMBA1_SHAPES, seed, ones=("norm.weight",), scale=scale)


def mamba2_weights(seed=22, scale=0.1):
    return normal_weights(MAMBA2_SHAPES, seed, ones=("block_norm.weight", "norm.weight"), scale=scale)
