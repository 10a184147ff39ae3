"""Edits of saved-state files (docs/formats.md §9) for the refusal tests and the hostile-input catalogue: each
keeps the SHA-256 honest, so the check behind the checksum is the one that answers."""

import hashlib
import struct


def rewrite(data, edit):
    """`data` with edit(bytearray of everything before the checksum) applied and the checksum redone."""
    body = bytearray(data[:-32])
    edit(body)
    return bytes(body) + hashlib.sha256(bytes(body)).digest()


def header(offset, packed):
    """An edit that overwrites header bytes at `offset` (8 version, 12 kind, 16 fingerprint)."""
    return lambda d: d.__setitem__(slice(offset, offset + len(packed)), packed)


def counter(name, value):
    """An edit that sets counter `name` to `value`."""
    key = struct.pack("<H", len(name)) + name.encode() + b"\0"

    def edit(d):
        at = d.index(key) + len(key)
        d[at:at + 8] = struct.pack("<q", value)

    return edit


def array_value(name, rank, index, value):
    """An edit that sets element `index` of array `name` (of rank `rank`) to the float32 `value`."""
    key = struct.pack("<H", len(name)) + name.encode() + b"\x01"

    def edit(d):
        at = d.index(key) + len(key) + 1 + 8 * rank + 4 * index
        d[at:at + 4] = struct.pack("<f", value)

    return edit


def array_extent(name, value):
    """An edit that sets the first extent of array `name`."""
    key = struct.pack("<H", len(name)) + name.encode() + b"\x01"

    def edit(d):
        at = d.index(key) + len(key) + 1
        d[at:at + 8] = struct.pack("<q", value)

    return edit


def extra_counter(name, value):
    """An edit that appends a counter entry the kind does not define (entry count and body length follow)."""

    def edit(d):
        entry = struct.pack("<H", len(name)) + name.encode() + b"\0" + struct.pack("<q", value)
        body_length = struct.unpack_from("<Q", d, 80)[0]
        entries = struct.unpack_from("<I", d, 88)[0]
        struct.pack_into("<Q", d, 80, body_length + len(entry))
        struct.pack_into("<I", d, 88, entries + 1)
        d.extend(entry)

    return edit
