"""GGUF fixtures: one tensor of every supported ggml type (random valid blocks, then edge blocks) written with
gguf-py's GGUFWriter, each tensor's float32 values from gguf-py's own `gguf.quants.dequantize`, and
gguf-py's GGUFReader view of the file (keys, types, values, tensor table). The pytest suite compares
samebits' reader and dequantizer with these bit for bit (docs/gguf.md §8); the C++ suite checks the same
file against its integer oracle.

Usage: python3 tools/make_gguf_fixtures.py   (needs numpy and gguf==0.19.0; writes tests/fixtures/gguf/)
"""

import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf")

# type -> byte offsets of its fp16 scale / min fields (docs/gguf.md §6)
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
EDGE = [0x0000, 0x8000, 0x0001, 0x8001, 0x7BFF, 0xFBFF, 0x03FF, 0x3C00]
# (d, m) pairs: signed zeros, smallest subnormals, largest finite, opposite signs, tiny d with a large m
# (an inexact final add), subnormal next to the smallest normal.
PAIRS = [(0x0000, 0x0000), (0x8000, 0x8000), (0x8000, 0x0000), (0x0000, 0x8000), (0x0001, 0x8001),
         (0x8001, 0x0001), (0x7BFF, 0xFBFF), (0xFBFF, 0x7BFF), (0x7BFF, 0x7BFF), (0x0001, 0x7BFF),
         (0x8001, 0x3C00), (0x03FF, 0x0400), (0x3C00, 0x3C00), (0xBC00, 0x3C00), (0x0400, 0x8001),
         (0x3555, 0xB555), (0x8000, 0x3C00), (0x3C00, 0x8000), (0xFBFF, 0xFBFF), (0x0200, 0x8200),
         (0x2E66, 0x5640), (0xA0A0, 0x1234), (0x7BFF, 0x0001), (0x83FF, 0x03FF)]


def random_half(rng, n):
    h = rng.integers(0, 0x7C00, size=n, dtype=np.uint16)
    return h | (rng.integers(0, 2, size=n, dtype=np.uint16) << 15)


def put_half(block, offset, h):
    block[offset] = h & 0xFF
    block[offset + 1] = h >> 8


def quant_blocks(rng, qtype, n_random):
    _, size = gguf.GGML_QUANT_SIZES[qtype]
    fields = FP16_FIELDS[qtype]
    blocks = []
    for _ in range(n_random):
        b = rng.integers(0, 256, size=size, dtype=np.uint8)
        for o, h in zip(fields, random_half(rng, len(fields))):
            put_half(b, o, int(h))
        blocks.append(b)
    edges = PAIRS if len(fields) == 2 else [(h, 0) for h in EDGE]
    for i, pair in enumerate(edges):
        for fill in ((0, 1, 2) if len(fields) == 1 else (i % 3,)):
            b = rng.integers(0, 256, size=size, dtype=np.uint8)
            if fill == 1:
                b[:] = 0
            elif fill == 2:
                b[:] = 0xFF
            for o, h in zip(fields, pair):
                put_half(b, o, h)
            blocks.append(b)
    return np.stack(blocks)


def float_payloads(rng):
    f32 = rng.integers(0, 2**32, size=256, dtype=np.uint64).astype(np.uint32)
    f32 &= np.uint32(0xBFFFFFFF)  # exponent below 255: finite
    f32[:8] = [0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000]
    f16 = np.concatenate([random_half(rng, 248), np.array(EDGE, np.uint16)])
    bf16 = rng.integers(0, 2**16, size=256, dtype=np.uint32).astype(np.uint16)
    bf16[(bf16 & 0x7F80) == 0x7F80] ^= 0x4000  # finite
    bf16[:6] = [0, 0x8000, 1, 0x8001, 0x7F7F, 0xFF7F]
    return {T.F32: f32.view(np.uint8), T.F16: f16.view(np.uint8), T.BF16: bf16.view(np.uint8)}


def jsonable(value):
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(22)
    path = os.path.join(OUT, "types.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_quantization_version(2)
    w.add_uint8("x.u8", 200)
    w.add_int8("x.i8", -100)
    w.add_uint16("x.u16", 65535)
    w.add_int16("x.i16", -32768)
    w.add_uint32("x.u32", 4000000000)
    w.add_int32("x.i32", -2000000000)
    w.add_float32("x.f32", 1e-5)
    w.add_bool("x.bool", True)
    w.add_string("x.str", "héllo ✓")
    w.add_uint64("x.u64", 2**64 - 1)
    w.add_int64("x.i64", -(2**63))
    w.add_float64("x.f64", 0.1)
    w.add_array("x.ints", [-1, 0, 7])
    w.add_array("x.strs", ["a b", "Ġtoken", "<|im_end|>"])
    w.add_array("x.floats", [0.5, -2.25])
    payloads = {}
    for qtype in (T.F32, T.F16, T.BF16):
        payloads[qtype] = float_payloads(rng)[qtype]
    for qtype in FP16_FIELDS:
        payloads[qtype] = quant_blocks(rng, qtype, 16 if gguf.GGML_QUANT_SIZES[qtype][0] == 256 else 48)
    arrays = {}
    for qtype, raw in payloads.items():
        name = "t.%s" % qtype.name.lower()
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        data = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, size)
        values = gguf.quants.dequantize(data, qtype).reshape(-1).astype(np.float32)
        arrays["bytes_" + qtype.name] = data.reshape(-1)
        arrays["bits_" + qtype.name] = values.view(np.uint32)
        if qtype == T.F32:
            w.add_tensor(name, data.reshape(-1).view(np.float32))
        elif qtype == T.F16:
            w.add_tensor(name, data.reshape(-1).view(np.float16))
        else:
            w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    np.savez_compressed(os.path.join(OUT, "dequant.npz"), **arrays)

    reader = gguf.GGUFReader(path)
    fields = []
    for field in reader.fields.values():
        types = [gguf.GGUFValueType(t).name for t in field.types]
        if types and types[0] == "ARRAY":
            value = [jsonable(field.contents(i)) for i in range(len(field.data))]
        else:
            value = jsonable(field.contents())
        fields.append({"key": field.name, "types": types, "value": value})
    tensors = [{"name": t.name, "ne": [int(d) for d in t.shape], "type": t.tensor_type.name,
                "data_offset": int(t.data_offset), "n_bytes": int(t.n_bytes)} for t in reader.tensors]
    with open(os.path.join(OUT, "reader.json"), "w", encoding="utf-8") as f:
        json.dump({"fields": fields, "tensors": tensors}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for name in sorted(os.listdir(OUT)):
        print("%-12s %8d bytes" % (name, os.path.getsize(os.path.join(OUT, name))))


if __name__ == "__main__":
    main()
