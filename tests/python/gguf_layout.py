"""The byte layout of a GGUF file as gguf-py's writer lays it out, shared by the hostile-input catalogue and
the fuzz corpus writer (fuzz/make_corpus.py), which need raw files the gguf package would refuse to write."""

import struct


def _string(text):
    return struct.pack("<Q", len(text)) + text


def gguf_bytes(kvs=(), tensors=(), version=3, alignment=32, header=None):
    """A GGUF file: header (or `header` as given), key/values, tensor infos, padding, padded payloads. `kvs`
    hold (key bytes, type code, value bytes); `tensors` hold (name bytes, dims, type id, payload bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) if header is None else header
    infos, data = b"", b""
    for key, code, value in kvs:
        out += _string(key) + struct.pack("<I", code) + value
    for name, ne, type_id, payload in tensors:
        infos += _string(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        infos += struct.pack("<IQ", type_id, len(data))
        data += payload + b"\0" * (-len(payload) % alignment)
    out += infos
    if tensors:
        out += b"\0" * (-len(out) % alignment)
    return out + data
