"""The deterministic fixtures and digest of docs/goldens.md: base and hashed draws, h(...)."""

import functools
import hashlib

import numpy as np

ROWS, COLS = 20000, 16


def digest(*arrays):
    """h(a1, a2, ...): SHA-256 over dtype name, shape text and raw bytes of each array; 16 hex chars."""
    hasher = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        hasher.update(array.dtype.name.encode("ascii"))
        hasher.update(str(array.shape).encode("ascii"))
        hasher.update(array.tobytes())
    return hasher.hexdigest()[:16]


def hashed_uniform(n, d, seed):
    """n*d float32 in [0, 1] from the SHA-256 stream of docs/goldens.md §2."""
    count = n * d
    raw = np.arange(count, dtype="<u8").tobytes()
    key = hashlib.sha256(raw + str(seed).encode("ascii")).digest()
    need = 4 * count
    blocks = (need + 31) // 32
    stream = b"".join(hashlib.sha256(key + blk.to_bytes(8, "little")).digest() for blk in range(blocks))
    words = np.frombuffer(stream[:need], dtype="<u4")
    return (words.astype(np.float64) / 2.0**32).astype(np.float32)


@functools.lru_cache(maxsize=None)
def draw(kind, seed):
    """The (20000, 16) float32 input draw: kind 'base' (numpy default_rng) or 'hashed'."""
    if kind == "base":
        out = np.random.default_rng(seed).standard_normal((ROWS, COLS)).astype(np.float32)
    else:
        out = hashed_uniform(ROWS, COLS, seed).reshape(ROWS, COLS) * np.float32(4.0) - np.float32(2.0)
    out.setflags(write=False)
    return out


def golden_weight(shape, seed, lo=-1 / 8, hi=1 / 8):
    """docs/goldens.md §3: w(shape, seed) = hashed_uniform(prod(shape), 1, seed) * f32(hi - lo) + f32(lo),
    two float32 roundings, reshaped row-major."""
    size = int(np.prod(shape))
    u = hashed_uniform(size, 1, seed)
    return (u * np.float32(hi - lo) + np.float32(lo)).astype(np.float32).reshape(shape)


def lane_weights(lane, tensors, ones=(), near_one=()):
    """The weights of a golden lane: `tensors` is [(name, shape)] in order; names in `ones` are
    float32 ones, names in `near_one` are 1 + w(shape, "LANE:near_one:NAME"), the rest
    w(shape, "LANE:NAME")."""
    out = {}
    for name, shape in tensors:
        if name in ones:
            out[name] = np.ones(shape, np.float32)
        elif name in near_one:
            out[name] = (np.float32(1) + golden_weight(shape, f"{lane}:near_one:{name}")).astype(np.float32)
        else:
            out[name] = golden_weight(shape, f"{lane}:{name}")
    return out


def slab(kind, seed, shape=(2, 16, 32)):
    """The block input slab: the first prod(shape) floats of a draw, row-major, reshaped."""
    size = int(np.prod(shape))
    return np.ascontiguousarray(draw(kind, seed).reshape(-1)[:size].reshape(shape))
