"""samebits: exact-bits CPU inference for models trained with mojolearn, over numpy arrays."""

from importlib import metadata as _metadata

from . import lowbit
from ._causal_lm import CausalLM, CausalLMState
from ._mamba import Mamba1BlockInference, Mamba1State, Mamba2BlockInference, Mamba2State
from ._mamba3 import Mamba3BlockInference, Mamba3State
from ._mlp import MLPInference
from ._native import native as _native
from ._samba import SambaInference, SambaState
from ._samba_config import SambaConfig
from ._transformer import TransformerBlockInference, TransformerState

try:
    __version__ = _metadata.version("samebits")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = [
    "CausalLM",
    "CausalLMState",
    "MLPInference",
    "Mamba1BlockInference",
    "Mamba1State",
    "Mamba2BlockInference",
    "Mamba2State",
    "Mamba3BlockInference",
    "Mamba3State",
    "SambaConfig",
    "SambaInference",
    "SambaState",
    "TransformerBlockInference",
    "TransformerState",
    "lowbit",
    "set_num_threads",
    "get_num_threads",
    "__version__",
]


def set_num_threads(n):
    """Worker threads for every kernel (default: SAMEBITS_NUM_THREADS or all cores); bits never change."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"samebits.set_num_threads: n must be an int, got {type(n).__name__}")
    if n > 256:  # the engine's limit (as for the CLI's --threads); the native call would clamp silently
        raise ValueError(f"samebits.set_num_threads: n must be at most 256, got {n}")
    _native().set_num_threads(n)


def get_num_threads():
    """The number of worker threads kernels use."""
    return _native().get_num_threads()
