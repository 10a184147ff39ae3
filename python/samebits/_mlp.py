"""MLPInference: the forward-only 8 -> 16 ReLU -> 3 SmallMLPTrainer network on the CPU."""

import os

from . import _buffers, _checks
from . import lowbit as _lowbit
from ._native import native

_NAMES = ("weight1", "bias1", "weight2", "bias2")
_ARRAY_KINDS = "(a NumPy array or an array.array)"


def _float32_weight(value, name):
    """Refuses a non-float32 buffer by type; shape and finiteness are checked by the engine."""
    try:
        view = _buffers.probe(value)
    except TypeError:
        raise TypeError(f"SmallMLPTrainer {name} must be a float32 array {_ARRAY_KINDS}") from None
    if not _buffers.is_float32(view):
        raise TypeError(f"SmallMLPTrainer {name} must be a float32 array {_ARRAY_KINDS}")
    array = _buffers.owned_float32(value)
    native().mlp_check_tensor(name, array)
    return array


def _float32_batch(X):
    try:
        view = _buffers.probe(X)
    except TypeError:
        raise TypeError(
            "SmallMLPTrainer X must be a float32 array of shape (batch, 8) "
            f"{_ARRAY_KINDS}, got {type(X).__name__}"
        ) from None
    native().mlp_check_batch_shape(list(view.shape))
    if not _buffers.is_float32(view):
        raise TypeError(f"SmallMLPTrainer X must be a float32 array {_ARRAY_KINDS}")
    return _buffers.contiguous_float32(X)


class MLPInference:
    """Forward-only SmallMLPTrainer network (8 -> 16 ReLU -> 3, float32), bit-exact on the CPU.

    The four weights are copied at construction and never change. The two matrices may be given
    packed by `samebits.lowbit`; they are materialized exactly to float32 and `weight_format`
    records the packed format. Each row's logits depend on that row alone.
    """

    def __init__(self, weight1, bias1, weight2, bias2):
        self.weight_format = _lowbit.format_of([weight1, weight2])
        weight1 = _lowbit.materialize_one(weight1, "weight1")
        weight2 = _lowbit.materialize_one(weight2, "weight2")
        arrays = [_float32_weight(v, n) for v, n in zip((weight1, bias1, weight2, bias2), _NAMES)]
        self._engine = native().MLPEngine(*arrays, self.weight_format)

    @classmethod
    def from_checkpoint(cls, path):
        """Build from a SmallMLPTrainer checkpoint file; every refusal is a ValueError."""
        path = os.fsdecode(os.fspath(path))
        if "\0" in path:  # the native reader would stop at the NUL and open another file
            raise ValueError("MLPInference checkpoint path contains a NUL byte")
        _checks.refuse_wrong_kind(path, "MLPInference.from_checkpoint", _checks.NOT_MLP, "an MLP checkpoint")
        engine = native().MLPEngine.from_checkpoint(path)
        model = cls.__new__(cls)
        model.weight_format = "float32"
        model._engine = engine
        return model

    def predict_logits(self, X):
        """Logits (rows, 3) float32 for X (rows, 8) float32, 1 <= rows <= 256."""
        return self._engine.predict_logits(_float32_batch(X))

    @property
    def weights_(self):
        """An independent copy of the four weights, keyed by name."""
        return {name: self._engine.weight(name) for name in _NAMES}

    def __repr__(self):
        return repr(self._engine)
