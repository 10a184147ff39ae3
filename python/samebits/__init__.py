"""samebits: exact-bits CPU inference for models trained with mojolearn, over numpy arrays."""

import os as _os
from importlib import metadata as _metadata
from pathlib import Path as _Path

from . import lowbit
from . import models
from ._causal_lm import CausalLM, CausalLMState
from ._mamba import Mamba1BlockInference, Mamba1State, Mamba2BlockInference, Mamba2State
from ._mamba3 import Mamba3BlockInference, Mamba3State
from ._mlp import MLPInference
from ._native import native as _native
from ._samba import SambaInference, SambaState
from ._samba_config import SambaConfig
from ._state_file import model_fingerprint
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
    "default_model",
    "default_model_path",
    "lowbit",
    "model_fingerprint",
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


def default_model_path():
    """The shipped model's file: $SAMEBITS_DEFAULT_MODEL if set, else the copy installed inside this package
    (samebits/assets/samba-kjv.ckpt), else the source tree's assets/default-model/samba-kjv.ckpt. The same
    search as the command line's."""
    forced = _os.environ.get("SAMEBITS_DEFAULT_MODEL")
    if forced:
        return _Path(forced)
    here = _Path(__file__).resolve().parent
    for candidate in (here / "assets" / "samba-kjv.ckpt",
                      here.parent.parent / "assets" / "default-model" / "samba-kjv.ckpt"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("samebits: the shipped model is missing from this install (set SAMEBITS_DEFAULT_MODEL)")


def default_model():
    """The shipped byte-level Samba model (736K parameters, trained on the King James Bible), loaded."""
    return SambaInference.from_checkpoint(default_model_path())
