# Type stubs of the samebits package (the public surface of docs/api.md); checked by mypy --strict on a
# usage sample in tests/python/test_typing.py.
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Generic, Literal, Self, TypeVar, overload

import numpy as np
import numpy.typing as npt

from . import lowbit as lowbit
from . import models as models

__version__: str

_Float32 = npt.NDArray[np.float32]
_Array = npt.ArrayLike
_Path = str | bytes | PathLike[str] | PathLike[bytes]
_Ids = Sequence[int] | npt.NDArray[np.integer[Any]]
_Lengths = Sequence[int] | npt.NDArray[np.integer[Any]] | None
_Stop = str | bytes | Sequence[str | bytes] | None
_Weights = Mapping[str, Any]
_State = TypeVar("_State")
_Model = TypeVar("_Model")

def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def default_model_path() -> Path: ...
def default_model() -> SambaInference: ...
def model_fingerprint(model: Any) -> str: ...

class MLPInference:
    weight_format: str
    def __init__(self, weight1: Any, bias1: Any, weight2: Any, bias2: Any) -> None: ...
    @classmethod
    def from_checkpoint(cls, path: _Path) -> MLPInference: ...
    def predict_logits(self, X: _Array) -> _Float32: ...
    @property
    def weights_(self) -> dict[str, _Float32]: ...

class _SavedState(Generic[_Model]):
    """Every decode state's save / load in the saved-state format (stub-only base); `_Model` owns it."""
    def save(self, path: _Path, model: _Model) -> None: ...
    @classmethod
    def load(cls, path: _Path, model: _Model) -> Self: ...

class TransformerState(_SavedState[TransformerBlockInference]):
    batch_size: int
    n_kv_heads: int
    head_dim: int
    max_tokens: int
    window: int
    k_cache: _Float32
    v_cache: _Float32
    cached_tokens: int
    def __init__(self, batch_size: int, n_kv_heads: int, head_dim: int, max_tokens: int, k_cache: _Array,
                 v_cache: _Array, cached_tokens: int = ..., window: int = ...) -> None: ...
    @property
    def capacity(self) -> int: ...
    def copy(self) -> TransformerState: ...
    def keys(self) -> _Float32: ...
    def values(self) -> _Float32: ...

class _Block(Generic[_State]):
    """What every block class has (a stub-only base: the classes share the surface, not a runtime base)."""
    weight_format: str
    d_model: int
    def forward(self, x: _Array, state: _State | None = ..., *, lengths: _Lengths = ...) -> _Float32: ...
    def __call__(self, x: _Array, state: _State | None = ..., *, lengths: _Lengths = ...) -> _Float32: ...
    def step(self, x: _Array, state: _State) -> _Float32: ...
    def backward(self, x: Any, grad_output: Any) -> Any: ...

class _MambaBlock(_Block[_State]):
    d_inner: int
    def allocate_state(self, batch_size: int) -> _State: ...

class _MambaState(_SavedState[_Model]):
    """What the Mamba states have alike (stub-only base); `_Model` is the block class they belong to."""
    @property
    def batch_size(self) -> int: ...
    def copy(self) -> Self: ...

class TransformerBlockInference(_Block[TransformerState]):
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate: int
    window: int
    def __init__(self, weights: _Weights, *, n_heads: int, n_kv_heads: int | None = ..., head_dim: int | None = ...,
                 window: int = ..., **options: Any) -> None: ...
    def allocate_state(self, batch_size: int, max_tokens: int) -> TransformerState: ...
    def step_many(self, x: _Array, states: Sequence[TransformerState]) -> _Float32: ...

class Mamba1State(_MambaState[Mamba1BlockInference]):
    conv_window: _Float32
    h: _Float32
    def __init__(self, conv_window: _Array, h: _Array) -> None: ...

class Mamba2State(_MambaState[Mamba2BlockInference]):
    conv_window: _Float32
    h: _Float32
    buffer_xbc: _Float32
    buffer_dtraw: _Float32
    buffered_tokens: int
    def __init__(self, conv_window: _Array, h: _Array, buffer_xbc: _Array, buffer_dtraw: _Array,
                 buffered_tokens: int = ...) -> None: ...

class Mamba3State(_MambaState[Mamba3BlockInference]):
    theta: _Float32
    h: _Float32
    buffer_qrot: _Float32
    buffer_krot: _Float32
    buffer_v: _Float32
    buffer_dt: _Float32
    buffer_sig: _Float32
    buffer_adt: _Float32
    pending_k: _Float32
    pending_v: _Float32
    buffered_tokens: int
    pending: bool
    def __init__(self, theta: _Array, h: _Array, buffer_qrot: _Array, buffer_krot: _Array, buffer_v: _Array,
                 buffer_dt: _Array, buffer_sig: _Array, buffer_adt: _Array, pending_k: _Array, pending_v: _Array,
                 buffered_tokens: int = ..., pending: bool = ...) -> None: ...
    @property
    def nheads(self) -> int: ...
    def set_input_states(self, theta: _Array, h: _Array, k: _Array, v: _Array) -> None: ...

class Mamba1BlockInference(_MambaBlock[Mamba1State]):
    dt_rank: int
    def __init__(self, weights: _Weights) -> None: ...

class Mamba2BlockInference(_MambaBlock[Mamba2State]):
    nheads: int
    conv_dim: int
    dt_limit: tuple[float, float]
    def __init__(self, weights: _Weights, *, dt_limit: tuple[float, float] = ...) -> None: ...
    @property
    def h_last_(self) -> _Float32: ...

class Mamba3BlockInference(_MambaBlock[Mamba3State]):
    nheads: int
    d_in_proj: int
    def __init__(self, weights: _Weights) -> None: ...
    @property
    def h_last_(self) -> _Float32: ...
    @property
    def k_last_(self) -> _Float32: ...
    @property
    def v_last_(self) -> _Float32: ...
    @property
    def theta_last_(self) -> _Float32: ...

class SambaConfig:
    vocab: int
    d_model: int
    layers: tuple[str, ...]
    n_heads: int | None
    n_kv_heads: int | None
    head_dim: int | None
    intermediate: int | None
    tie_embeddings: bool
    norm_eps: float
    dropout: float
    def __init__(self, vocab: int, d_model: int, layers: Sequence[str], n_heads: int | None = ...,
                 n_kv_heads: int | None = ..., head_dim: int | None = ..., intermediate: int | None = ...,
                 tie_embeddings: bool = ..., norm_eps: float = ..., dropout: float = ...) -> None: ...
    def to_dict(self) -> dict[str, Any]: ...
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SambaConfig: ...
    def block_shapes(self, kind: str) -> list[tuple[str, tuple[int, ...]]]: ...
    def registry(self) -> list[tuple[str, tuple[int, ...]]]: ...

class SambaState(_SavedState[SambaInference]):
    batch_size: int
    max_tokens: int
    layers: list[Mamba3State | TransformerState]
    def __init__(self, batch_size: int, max_tokens: int, layers: Sequence[Mamba3State | TransformerState]) -> None: ...
    def copy(self) -> SambaState: ...

class SambaInference:
    config: SambaConfig
    weight_format: str
    def __init__(self, config: SambaConfig, weights: _Weights) -> None: ...
    @classmethod
    def from_checkpoint(cls, path: _Path) -> SambaInference: ...
    def parameters(self) -> dict[str, _Float32]: ...
    def allocate_state(self, batch_size: int, max_tokens: int) -> SambaState: ...
    def forward(self, inputs: _Array, state: SambaState | None = ..., *, lengths: _Lengths = ...) -> _Float32: ...
    def logits(self, inputs: _Array, state: SambaState | None = ..., *, lengths: _Lengths = ...) -> _Float32: ...
    def __call__(self, inputs: _Array, state: SambaState | None = ..., *, lengths: _Lengths = ...) -> _Float32: ...
    def step(self, inputs: _Array, state: SambaState) -> _Float32: ...
    def step_many(self, inputs: _Array, states: Sequence[SambaState]) -> _Float32: ...
    @overload
    def generate(self, prompt: str, max_new_tokens: int = ..., *, temperature: float = ..., top_k: int = ...,
                 top_p: float = ..., min_p: float = ..., repetition_penalty: float = ..., repetition_window: int = ...,
                 presence_penalty: float = ..., frequency_penalty: float = ..., seed: int | None = ...,
                 stop: _Stop = ..., stream: Literal[False] = ...) -> str: ...
    @overload
    def generate(self, prompt: str, max_new_tokens: int = ..., *, temperature: float = ..., top_k: int = ...,
                 top_p: float = ..., min_p: float = ..., repetition_penalty: float = ..., repetition_window: int = ...,
                 presence_penalty: float = ..., frequency_penalty: float = ..., seed: int | None = ...,
                 stop: _Stop = ..., stream: Literal[True]) -> Iterator[str]: ...
    @overload
    def generate(self, prompt: bytes | bytearray, max_new_tokens: int = ..., *, temperature: float = ...,
                 top_k: int = ..., top_p: float = ..., min_p: float = ..., repetition_penalty: float = ...,
                 repetition_window: int = ..., presence_penalty: float = ..., frequency_penalty: float = ...,
                 seed: int | None = ..., stop: _Stop = ..., stream: Literal[False] = ...) -> bytes: ...
    @overload
    def generate(self, prompt: bytes | bytearray, max_new_tokens: int = ..., *, temperature: float = ...,
                 top_k: int = ..., top_p: float = ..., min_p: float = ..., repetition_penalty: float = ...,
                 repetition_window: int = ..., presence_penalty: float = ..., frequency_penalty: float = ...,
                 seed: int | None = ..., stop: _Stop = ..., stream: Literal[True]) -> Iterator[bytes]: ...
    @overload
    def generate(self, prompt: _Ids, max_new_tokens: int = ..., *, temperature: float = ..., top_k: int = ...,
                 top_p: float = ..., min_p: float = ..., repetition_penalty: float = ..., repetition_window: int = ...,
                 presence_penalty: float = ..., frequency_penalty: float = ..., seed: int | None = ...,
                 stop: _Stop = ..., stream: Literal[False] = ...) -> list[int]: ...
    @overload
    def generate(self, prompt: _Ids, max_new_tokens: int = ..., *, temperature: float = ..., top_k: int = ...,
                 top_p: float = ..., min_p: float = ..., repetition_penalty: float = ..., repetition_window: int = ...,
                 presence_penalty: float = ..., frequency_penalty: float = ..., seed: int | None = ...,
                 stop: _Stop = ..., stream: Literal[True]) -> Iterator[int]: ...
    def loss(self, inputs: Any, targets: Any) -> Any: ...
    def train_step(self, inputs: Any, targets: Any) -> Any: ...

class CausalLMState(_SavedState[CausalLM]):
    batch_size: int
    max_tokens: int
    positions: int
    # copies of the layer states, made when read (docs/models.md §18)
    layers: list[TransformerState | Mamba1State | Mamba2State]
    def buffers_bytes(self) -> bytes: ...
    def clone(self) -> CausalLMState: ...

class CausalLM:
    @classmethod
    def load(cls, path: _Path, weight_format: Literal["float32", "bfloat16", "int8"] = ...,
             max_positions: int | None = ..., loader: Literal["samebits", "mojolearn"] = ...) -> CausalLM: ...
    def forward(self, ids: _Array, state: CausalLMState | None = ...) -> _Float32: ...
    def step(self, ids: _Array, state: CausalLMState) -> _Float32: ...
    def step_many(self, ids: _Array, states: Sequence[CausalLMState]) -> _Float32: ...
    def allocate_state(self, batch_size: int, max_tokens: int) -> CausalLMState: ...
    def reset_state(self, state: CausalLMState) -> CausalLMState: ...
    def generate(self, ids: _Array, max_new_tokens: int, *, greedy: bool = ..., seed: int | None = ...,
                 stop: int | Sequence[int] | None = ..., temperature: float = ..., top_k: int = ...,
                 top_p: float = ..., min_p: float = ..., repetition_penalty: float = ..., repetition_window: int = ...,
                 presence_penalty: float = ..., frequency_penalty: float = ...) -> npt.NDArray[np.int32]: ...
    def chat(self, messages: Sequence[Mapping[str, Any]], tokenizer: Any, max_new_tokens: int = ...,
             **options: Any) -> str: ...
    def parameters(self) -> dict[str, _Float32]: ...
    @property
    def unused_names(self) -> list[str]: ...
    model_type: str
    kind: str
    weight_format: str
    loader: str
    d_model: int
    vocab_size: int
    n_layers: int
    tie_embeddings: bool
    norm_eps: float
    max_positions: int | None
