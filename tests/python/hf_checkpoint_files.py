"""Hugging Face checkpoint files in numpy for the tests: a safetensors writer (F32 or BF16, the layout of
docs/models.md §14), a reader of F32/BF16 files, and a directory writer (config.json + model.safetensors)."""

import json
import struct

import numpy as np


def bf16_round(a):
    """float32 -> the bf16 value (round to nearest even), widened back."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return rounded.astype(np.uint32).view(np.float32)


def write_safetensors(path, tensors, bf16=False):
    """Names sorted, compact JSON, header padded with spaces to a multiple of 8, payloads back to back."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], np.float32)
        data = (a.view(np.uint32) >> 16).astype("<u2").tobytes() if bf16 else a.astype("<f4").tobytes()
        header[name] = {"dtype": "BF16" if bf16 else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs))


def read_safetensors(path):
    """{name: float32 array} of an F32/BF16 file (BF16 widened exactly) and {name: dtype} as stored."""
    raw = open(path, "rb").read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8: 8 + size])
    header.pop("__metadata__", None)
    payload, tensors = raw[8 + size:], {}
    for name, entry in header.items():
        start, end = entry["data_offsets"]
        if entry["dtype"] == "BF16":
            values = (np.frombuffer(payload[start:end], "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            assert entry["dtype"] == "F32", (name, entry["dtype"])
            values = np.frombuffer(payload[start:end], "<f4").astype(np.float32)
        tensors[name] = values.reshape(entry["shape"])
    return tensors, {name: entry["dtype"] for name, entry in header.items()}


def write_model(directory, config, tensors, bf16=False):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    # BF16 files hold the bf16 rounding of each value (exactly representable, so the writer truncates)
    write_safetensors(directory / "model.safetensors", {k: bf16_round(v) for k, v in tensors.items()} if bf16
                      else tensors, bf16)
    return directory
