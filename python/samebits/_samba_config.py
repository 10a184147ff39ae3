"""SambaConfig: the shape of a Samba stack (docs/formats.md §1), validated by the engine's own rules and messages."""

import os
import struct

from ._native import native

# to_dict()'s keys, in the constructor's argument order.
_FIELDS = ("vocab", "d_model", "layers", "n_heads", "n_kv_heads", "head_dim", "intermediate", "tie_embeddings",
           "norm_eps", "dropout")


def _round_f32(value):
    """One round-to-nearest-even to binary32, kept as a float (OverflowError past the float32 range)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _optional_int(value):
    return None if value is None else int(value)


class SambaConfig:
    """The stack's shape: `layers` is a sequence of "mamba3" / "attention" in stack order.

    A mamba3 layer needs `d_model` to be a multiple of 32 (head dim 64, expand 2); an attention layer needs
    `n_heads` and `intermediate`, and then `head_dim` defaults to d_model // n_heads and `n_kv_heads` to
    `n_heads`. `norm_eps` (the final norm's eps) and `dropout` are rounded to float32 and kept as floats.
    Invalid values raise ValueError("samebits.SambaConfig: ...").
    """

    def __init__(self, vocab, d_model, layers, n_heads=None, n_kv_heads=None, head_dim=None, intermediate=None,
                 tie_embeddings=True, norm_eps=1e-5, dropout=0.0):
        # Python's own conversions first, in argument order (a float vocab is truncated, as upstream does);
        # then the engine fills the defaults and runs every rule in upstream's order.
        fields = {
            "vocab": int(vocab),
            "d_model": int(d_model),
            "layers": [str(kind) for kind in layers],
            "n_heads": _optional_int(n_heads),
            "n_kv_heads": _optional_int(n_kv_heads),
            "head_dim": _optional_int(head_dim),
            "intermediate": _optional_int(intermediate),
            "tie_embeddings": bool(tie_embeddings),
            "norm_eps": float(_round_f32(norm_eps)),
            "dropout": float(_round_f32(dropout)),
        }
        checked = native().samba_config_validate(fields)
        for name in _FIELDS:
            setattr(self, name, tuple(checked[name]) if name == "layers" else checked[name])

    def to_dict(self):
        """The ten fields as a JSON-ready dict (layers as a list)."""
        return {name: list(self.layers) if name == "layers" else getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, d):
        """Rebuilds and revalidates from the ten keys (a missing key is a KeyError; extra keys are ignored)."""
        return cls(*(d[name] for name in _FIELDS))

    def block_shapes(self, kind):
        """[(name, shape)] of one block kind's tensors in the block's order; any kind but "mamba3" is attention."""
        kind = "mamba3" if kind == "mamba3" else "attention"
        return [(name, tuple(shape)) for name, shape in native().samba_config_block_shapes(self.to_dict(), kind)]

    def registry(self):
        """[(name, shape)] of every tensor in stack order: embed.weight, layers.{i}.<block names>,
        norm_f.weight, then lm_head.weight when the embeddings are not tied."""
        return [(name, tuple(shape)) for name, shape, _, _ in native().samba_config_registry(self.to_dict())]

    def __eq__(self, other):
        if not isinstance(other, SambaConfig):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(tuple(tuple(v) if isinstance(v, list) else v for v in self.to_dict().values()))

    def __repr__(self):
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"SambaConfig({args})"


def read_samba_checkpoint(path):
    """(SambaConfig, {name: float32 array in registry order}, info dict) of a Samba checkpoint file: the
    streamed v2 archive or the legacy JSON, every container and inference check passed. Refusals are
    ValueError with upstream's sentences."""
    path = os.fsdecode(os.fspath(path))
    if "\0" in path:  # the native reader would stop at the NUL and open another file
        raise ValueError("samebits.SambaInference: checkpoint path contains a NUL byte")
    config, weights, info = native().samba_read_checkpoint(path)
    return SambaConfig.from_dict(config), weights, info
