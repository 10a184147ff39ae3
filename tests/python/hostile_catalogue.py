"""The hostile-input catalogue: every kind of bad input to every public surface of samebits, one row each.

A row names its category, the surface it calls, the input in words, and a callable that makes the call.
`guard` is what the call was handed that must survive it unchanged (a state, an array, a file); the runner
compares its bytes before and after. Most rows expect a refusal (ValueError / TypeError /
NotImplementedError, or for the command line a non-zero exit with a message); a few rows are legitimate
inputs that look hostile (strided views, Fortran order, inputs spec-defined to be accepted) and instead
carry a `check` that verifies the result.

Run as a script (`python3 hostile_catalogue.py`), it runs every row in this process and prints one JSON
line per row, so a parent process sees a crash or a hang as missing rows. test_hostile_inputs.py does that
and renders docs/hostile-inputs.md from the lines.
"""

import faulthandler
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlp_checkpoint_writer as mlp_writer  # noqa: E402
import samba_checkpoint_writer as samba_writer  # noqa: E402
import state_file_edits as state_edits  # noqa: E402
from block_weights import mamba1_weights, mamba2_weights, normal_weights, transformer_weights  # noqa: E402
from gguf_layout import gguf_bytes  # noqa: E402
from block_weights import normal_x as tokens  # noqa: E402
import samebits  # noqa: E402
from samebits import lowbit  # noqa: E402
from samebits._mamba3 import _PIECES as MAMBA3_PIECES, _piece_shapes as mamba3_piece_shapes  # noqa: E402

REFUSALS = (ValueError, TypeError, NotImplementedError)
# A request for more memory than any machine has may also be refused by the allocator, before anything is
# written: MemoryError is a refusal for the rows that ask for such an allocation (and for no others).
ALLOCATION = REFUSALS + (MemoryError,)
CLI_REFUSAL_CODES = (1, 2)  # 1: a refused file or run, 2: a usage error; 3 is "internal error", <0 a signal
ROW_TIMEOUT_S = 60  # a row that runs longer is a hang: the child process is ended and the row goes missing
TMP_PLACEHOLDER = "<tmp>"


@dataclass
class CliResult:
    """What a command-line row gives back: the exit code and both streams, decoded."""

    code: int
    stdout: str
    stderr: str


@dataclass
class Row:
    category: str
    surface: str
    input: str
    call: Callable[[], Any]
    guard: Any = None  # a state, array, Path or tuple of them, compared byte for byte around the call
    allowed: tuple = REFUSALS  # exception types that count as a refusal for this row
    expect: str = "refuse"  # "refuse", "cli" (non-zero exit) or "accept" (then `check` must pass)
    check: Optional[Callable[[Any], None]] = None
    note: str = ""  # for "accept" rows: why accepting is correct (shown in the message column)


# ------------------------------------------------------------------------------------ fixtures

D = 32  # d_model of every block fixture


def mamba3_weights(dm=D):
    cfg = samba_writer.config_dict(256, dm, ["mamba3"])
    return normal_weights(samba_writer.block_shapes(cfg, "mamba3"), 23, ones=("block_norm.weight",))


def ids(shape, vocab=256, seed=5):
    return np.random.default_rng(seed).integers(0, vocab, size=shape).astype(np.int64)


def samba_model(cfg=None):
    cfg = samba_writer.example_config() if cfg is None else cfg
    return samebits.SambaInference(samebits.SambaConfig.from_dict(cfg), samba_writer.deterministic_weights(cfg))


def with_value(array, index, value):
    """A float32 copy of `array` with flat element `index` set to `value`."""
    out = np.array(array, dtype=np.float32, copy=True)
    out.reshape(-1)[index] = value
    return out


def with_nan(array, index=0):
    return with_value(array, index, np.nan)


def planted(state, piece, index, value):
    """`state` with element `index` of its buffer `piece` set to `value` (in place, through the view)."""
    getattr(state, piece)[index] = value
    return state


def readonly(array):
    array = np.array(array, copy=True)
    array.setflags(write=False)
    return array


# ------------------------------------------------------------------------------------ snapshots

def snapshot(obj):
    """The bytes of everything `obj` holds that a refused call must not change."""
    if obj is None:
        return None
    if isinstance(obj, tuple):
        return tuple(snapshot(o) for o in obj)
    if isinstance(obj, Path):
        return obj.read_bytes() if obj.is_file() else ("not a file", obj.exists())
    if isinstance(obj, np.ndarray):
        return (obj.dtype.str, obj.shape, obj.strides, obj.tobytes())
    if isinstance(obj, list):
        return repr(obj)
    if isinstance(obj, samebits.TransformerState):
        return ("transformer", obj.batch_size, obj.n_kv_heads, obj.head_dim, obj.max_tokens, obj.window,
                obj.cached_tokens, snapshot(np.asarray(obj.k_cache)), snapshot(np.asarray(obj.v_cache)))
    if isinstance(obj, samebits.Mamba1State):
        return ("mamba1", np.array(obj.conv_window).tobytes(), np.array(obj.h).tobytes())
    if isinstance(obj, samebits.Mamba2State):
        return ("mamba2", obj.buffered_tokens,
                *(np.array(getattr(obj, p)).tobytes() for p in ("conv_window", "h", "buffer_xbc", "buffer_dtraw")))
    if isinstance(obj, samebits.Mamba3State):
        pieces = (np.array(getattr(obj, p)).tobytes() for p in MAMBA3_PIECES)
        return ("mamba3", obj.buffered_tokens, obj.pending, *pieces)
    if isinstance(obj, samebits.CausalLMState):
        return ("causal_lm", obj.batch_size, obj.max_tokens, obj.positions, obj.buffers_bytes())
    if isinstance(obj, samebits.SambaState):
        return ("samba", obj.batch_size, obj.max_tokens, tuple(snapshot(layer) for layer in obj.layers))
    raise TypeError(f"hostile catalogue: no snapshot for {type(obj).__name__}")


# ------------------------------------------------------------------------------------ the catalogue

class Catalogue:
    def __init__(self, tmp):
        self.tmp = Path(tmp)
        self.rows = []
        self._count = 0

    def add(self, category, surface, text, call, guard=None, **options):
        self.rows.append(Row(category, surface, text, call, guard, **options))

    def file(self, name, data):
        """A file under the run's temporary directory holding `data`."""
        self._count += 1
        path = self.tmp / f"{self._count:03d}-{name}"
        path.write_bytes(data)
        return path


def _samba_file_rows(cat):
    load = samebits.SambaInference.from_checkpoint
    surface = "SambaInference.from_checkpoint"
    variants = {name: data for name, data, _ in samba_writer.broken_variants()}
    good = samba_writer.stream_bytes()

    def row(text, path, **options):
        cat.add("file: Samba v2 archive", surface, text, lambda: load(path), guard=path, **options)

    def variant(text, name):
        row(text, cat.file(name, variants[name]))

    row("a path that does not exist", cat.tmp / "missing.ckpt")
    row("a directory", cat.tmp)
    row("an empty file (0 bytes)", cat.file("empty", b""))
    cat.add("file: Samba v2 archive", surface, "/dev/zero (endless zero bytes; must not read forever)",
            lambda: load("/dev/zero"))
    valid = cat.file("valid-archive", good)
    cat.add("file: Samba v2 archive", surface, "a valid file's path with an embedded NUL byte and junk after it",
            lambda: load(str(valid) + "\0junk"), guard=valid)
    cat.add("file: Samba v2 archive", surface, "path None", lambda: load(None))
    cat.add("file: Samba v2 archive", surface, "path 42 (an int)", lambda: load(42))
    row("an MLP checkpoint (another kind, named)", cat.file("mlp-kind.ckpt", mlp_writer.valid_bytes()))
    row("a GGUF file (another kind, named)", cat.file("model.gguf", b"GGUF\x03\x00\x00\x00" + b"\x00" * 32))
    row("a safetensors file (another kind, named)", cat.file("model.safetensors", b"\x02" + b"\x00" * 7 + b"{}"))
    variant("the 17-byte magic alone", "magic_only")
    variant("truncated inside the 8-byte header length", "short_header_length")
    variant("truncated inside the JSON header (length says 5000, 1000 bytes follow)", "header_length_past_end")
    variant("truncated inside the header digest", "truncated_inside_header_digest")
    variant("truncated right after the header digest (no array bytes)", "truncated_to_header")
    variant("truncated by one byte at the end", "truncated_one_byte")
    variant("bad magic (format version byte 3)", "bad_magic_version")
    variant("header length 0", "header_length_zero")
    variant("header length 2^64 - 1", "header_length_huge")
    variant("header length 1 MiB + 1 (over the limit)", "header_length_over_limit")
    variant("one header byte flipped (digest mismatch)", "header_byte_flipped")
    variant("header pretty-printed (non-canonical) with its honest digest", "header_non_canonical")
    variant("header with a duplicate key", "header_duplicate_key")
    variant("header with a NaN literal", "header_nan_literal")
    variant("header not JSON", "header_not_json")
    variant("envelope schema v3", "envelope_wrong_schema")
    variant("state profile fp16", "state_wrong_profile")
    variant("config vocab 2^26 with its honest registry (2^31 embedding elements)", "registry_index_overflow")
    variant("config d_model 48 with a mamba3 layer", "config_mamba_width")
    variant("config float vocab 256.0", "config_float_vocab")
    variant("registry entry renamed", "registry_renamed")
    variant("registry one entry short", "registry_too_short")
    variant("array descriptor dtype <f4 for buf_initialized", "descriptor_dtype_mismatch")
    variant("array descriptor nbytes one element too large", "descriptor_nbytes_mismatch")
    variant("one trailing byte after the arrays", "one_byte_appended")
    variant("first parameter byte flipped (array digest mismatch)", "first_parameter_byte_flipped")
    variant("a NaN parameter (honest digests)", "nan_parameter")
    variant("a -inf parameter (honest digests)", "infinite_parameter")
    variant("numeric_profile fixed15_v1", "numeric_profile_fixed15")

    huge = dict(samba_writer.example_config(), intermediate=2**30)
    metadata, arrays = samba_writer.build_state()
    metadata["config"], metadata["registry"] = huge, samba_writer.registry_entries(huge)
    row("config intermediate 2^30 with its honest registry (2^35 elements claimed)",
        cat.file("huge-intermediate", samba_writer.stream_bytes(metadata, arrays)))

    legacy = "file: Samba legacy JSON"
    for text, name in (
            ("truncated at half its length", "legacy_truncated"),
            ("trailing garbage after the JSON", "legacy_trailing_garbage"),
            ("a duplicate key", "legacy_duplicate_key"),
            ("an Infinity literal", "legacy_infinity_literal"),
            ("envelope schema v2", "legacy_wrong_schema"),
            ("wrong payload digest", "legacy_wrong_digest"),
            ("payload pretty-printed (non-canonical), digest of the canonical form",
             "legacy_strict_non_canonical_payload"),
            ("no exp_avg_sq descriptor", "legacy_missing_array"),
            ("descriptor dtype <f4 for buf_initialized", "legacy_dtype_mismatch"),
            ("a non-hex tensor string", "legacy_bad_hex"),
            ("parameters hex one element short", "legacy_short_hex"),
            ("registry offset past the end of the parameters", "legacy_offset_past_end"),
            ("registry entry renamed", "legacy_registry_renamed"),
            ("a NaN parameter", "legacy_nan_parameter")):
        path = cat.file(name, variants[name])
        cat.add(legacy, surface, text, lambda p=path: load(p), guard=path)


def _mlp_file_rows(cat):
    load = samebits.MLPInference.from_checkpoint
    surface = "MLPInference.from_checkpoint"
    variants = {name: data for name, data, _ in mlp_writer.broken_variants()}
    category = "file: MLP checkpoint"

    def row(text, path):
        cat.add(category, surface, text, lambda: load(path), guard=path)

    row("a path that does not exist", cat.tmp / "missing-mlp.ckpt")
    row("a directory", cat.tmp)
    cat.add(category, surface, "/dev/zero (endless zero bytes; must not read forever)", lambda: load("/dev/zero"))
    row("a Samba v2 archive (another kind, named)", cat.file("samba-kind.ckpt", samba_writer.stream_bytes()))
    row("a GGUF file (another kind, named)", cat.file("mlp-model.gguf", b"GGUF\x03\x00\x00\x00" + b"\x00" * 32))
    valid = cat.file("valid-mlp", mlp_writer.valid_bytes())
    cat.add(category, surface, "a valid file's path with an embedded NUL byte and junk after it",
            lambda: load(str(valid) + "\0junk"), guard=valid)
    for text, name in (
            ("an empty file", "empty_file"),
            ("truncated at half its length", "truncated"),
            ("32 KiB + 1 bytes (over the size bound)", "oversize_padding"),
            ("40,000 opening braces", "oversize_braces"),
            ("trailing garbage after the JSON", "trailing_garbage"),
            ("a duplicate key", "duplicate_envelope_key"),
            ("a NaN literal", "strict_nan_literal"),
            ("a UTF-8 byte-order mark", "strict_byte_order_mark"),
            ("nesting 2000 deep", "nesting_too_deep"),
            ("envelope schema v2", "wrong_envelope_schema"),
            ("one weight hex digit changed (digest mismatch)", "flipped_payload_byte"),
            ("weight1 descriptor shape [8, 16]", "wrong_tensor_shape"),
            ("bias1 descriptor dtype <f8", "wrong_dtype"),
            ("a NaN in bias1 (honest digest)", "nan_weight"),
            ("optimizer step -1", "step_negative")):
        row(text, cat.file(name, variants[name]))


def _array_rows(cat):
    blk = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1)
    m1 = samebits.Mamba1BlockInference(mamba1_weights())
    m2 = samebits.Mamba2BlockInference(mamba2_weights())
    m3 = samebits.Mamba3BlockInference(mamba3_weights())
    mlp = samebits.MLPInference(*(mlp_writer.default_weights()[n] for n in mlp_writer.NAMES))
    x = tokens((2, 5, D))
    category = "array"

    def refuse(surface, text, fn, arg):
        cat.add(category, surface, text, lambda: fn(arg), guard=arg if isinstance(arg, np.ndarray) else None)

    tf = "TransformerBlockInference.forward"
    refuse(tf, "x float64 (2, 5, 32)", blk.forward, x.astype(np.float64))
    refuse(tf, "x float16 (2, 5, 32)", blk.forward, x.astype(np.float16))
    refuse(tf, "x int32 (2, 5, 32)", blk.forward, np.ones((2, 5, D), np.int32))
    refuse(tf, "x bool (2, 5, 32)", blk.forward, np.ones((2, 5, D), bool))
    refuse(tf, "x object array of floats", blk.forward, x.astype(object))
    refuse(tf, "x str array", blk.forward, np.full((2, 5, D), "a"))
    refuse(tf, "x big-endian >f4", blk.forward, x.astype(">f4"))
    refuse(tf, "x a nested Python list", blk.forward, x.tolist())
    refuse(tf, "x None", blk.forward, None)
    refuse(tf, "x 0-d float32", blk.forward, np.ones((), np.float32))
    refuse(tf, "x 1-D (32,)", blk.forward, x[0, 0].copy())
    refuse(tf, "x 4-D (1, 2, 5, 32)", blk.forward, x[None].copy())
    refuse(tf, "x width 31 (d_model is 32)", blk.forward, x[:, :, :31].copy())
    refuse(tf, "x empty batch (0, 5, 32)", blk.forward, np.zeros((0, 5, D), np.float32))
    refuse(tf, "x empty sequence (2, 0, 32)", blk.forward, np.zeros((2, 0, D), np.float32))
    refuse(tf, "x with one NaN", blk.forward, with_nan(x, 17))
    refuse(tf, "x with one +inf", blk.forward, with_value(x, 3, np.inf))
    refuse(tf, "x with one -inf", blk.forward, with_value(x, 9, -np.inf))
    ts = "TransformerBlockInference.step"
    state = blk.allocate_state(2, 8)
    cat.add(category, ts, "x (2, 3, 32): step takes one position", lambda: blk.step(x[:, :3].copy(), state),
            guard=state)
    cat.add(category, ts, "x (2, 1, 32) with a NaN, into a fresh state",
            lambda: blk.step(with_nan(x[:, :1]), state), guard=state)

    # Legitimate layouts: accepted, and the bits must equal those of the C-contiguous copy.
    def same_bits_as(reference):
        def check(result):
            assert np.asarray(result).tobytes() == reference.tobytes(), "bits differ from the contiguous copy"
        return check

    big = tokens((2, 10, 2 * D), seed=9)
    for text, view in (("x a strided view (every other position and channel)", big[:, ::2, ::2]),
                       ("x with negative strides (reversed positions)", big[:, ::-2, :D]),
                       ("x in Fortran order", np.asfortranarray(big[:, :5, :D]))):
        cat.add(category, tf, text, lambda v=view: blk.forward(v), guard=view, expect="accept",
                check=same_bits_as(blk.forward(np.ascontiguousarray(view))),
                note="accepted: bits equal those of the C-contiguous copy (an input is read, never written)")

    m1f, m2f, m3f = "Mamba1BlockInference.forward", "Mamba2BlockInference.forward", "Mamba3BlockInference.forward"
    refuse(m1f, "x float64", m1.forward, x.astype(np.float64))
    refuse(m1f, "x with one NaN", m1.forward, with_nan(x, 40))
    refuse(m1f, "x width 64 (d_model is 32)", m1.forward, tokens((2, 5, 64)))
    refuse(m1f, "x a nested Python list", m1.forward, x.tolist())
    refuse(m2f, "x with one +inf", m2.forward, with_value(x, 0, np.inf))
    refuse(m2f, "x 2-D (5, 32)", m2.forward, x[0].copy())
    refuse(m2f, "x empty sequence (2, 0, 32)", m2.forward, np.zeros((2, 0, D), np.float32))
    refuse(m2f, "x uint8", m2.forward, np.zeros((2, 5, D), np.uint8))
    refuse(m3f, "x with one -inf", m3.forward, with_value(x, 5, -np.inf))
    refuse(m3f, "x 0-d float32", m3.forward, np.ones((), np.float32))
    refuse(m3f, "x None", m3.forward, None)
    refuse(m3f, "x int64", m3.forward, np.ones((2, 5, D), np.int64))
    refuse(m3f, "x empty batch (0, 5, 32)", m3.forward, np.zeros((0, 5, D), np.float32))
    s3 = m3.allocate_state(2)
    cat.add(category, "Mamba3BlockInference.step", "x (2, 2, 32): step takes one position",
            lambda: m3.step(x[:, :2].copy(), s3), guard=s3)

    mp = "MLPInference.predict_logits"
    rows = tokens((4, 8))
    refuse(mp, "X float64 (4, 8)", mlp.predict_logits, rows.astype(np.float64))
    refuse(mp, "X (4, 7)", mlp.predict_logits, rows[:, :7].copy())
    refuse(mp, "X (257, 8): more rows than 256", mlp.predict_logits, tokens((257, 8)))
    refuse(mp, "X (0, 8): no rows", mlp.predict_logits, np.zeros((0, 8), np.float32))
    refuse(mp, "X 3-D (1, 4, 8)", mlp.predict_logits, rows[None].copy())
    refuse(mp, "X with one NaN", mlp.predict_logits, with_nan(rows, 5))
    refuse(mp, "X with one +inf", mlp.predict_logits, with_value(rows, 7, np.inf))
    refuse(mp, "X a nested Python list", mlp.predict_logits, rows.tolist())
    refuse(mp, "X None", mlp.predict_logits, None)


def _weight_rows(cat):
    category = "array: weights"
    tw = transformer_weights()
    T = samebits.TransformerBlockInference

    def transformer(text, edit):
        weights = dict(tw)
        edit(weights)
        cat.add(category, "TransformerBlockInference(weights)", text, lambda: T(weights, n_heads=2, n_kv_heads=1),
                guard=tuple(v for v in weights.values() if isinstance(v, np.ndarray)))

    transformer("q_proj.weight float64", lambda w: w.update({"q_proj.weight": w["q_proj.weight"].astype(np.float64)}))
    transformer("down_proj.weight missing", lambda w: w.pop("down_proj.weight"))
    transformer("an extra key 'bias'", lambda w: w.update(bias=np.zeros(D, np.float32)))
    transformer("k_proj.weight transposed (32, 16)", lambda w: w.update({"k_proj.weight": w["k_proj.weight"].T.copy()}))
    transformer("a NaN in o_proj.weight", lambda w: w.update({"o_proj.weight": with_nan(w["o_proj.weight"], 11)}))
    transformer("gate_proj.weight a nested list",
                lambda w: w.update({"gate_proj.weight": w["gate_proj.weight"].tolist()}))
    cat.add(category, "TransformerBlockInference(weights)", "weights a list of arrays, not a dict",
            lambda: T(list(tw.values()), n_heads=2))
    bad = lowbit.pack(dict(tw, **{"up_proj.weight": with_nan(tw["up_proj.weight"], 2)}), "bfloat16")
    cat.add(category, "TransformerBlockInference(weights)", "weights packed to bfloat16 from a NaN up_proj.weight",
            lambda: T(bad, n_heads=2, n_kv_heads=1))

    w1, w2, w3 = mamba1_weights(), mamba2_weights(), mamba3_weights()
    x = tokens((1, 3, D))
    # docs/blocks.md §3-§5, step 1: a Mamba block refuses non-finite weights when it runs, before any arithmetic.
    cat.add(category, "Mamba1BlockInference(weights).forward", "a NaN in A_log",
            lambda: samebits.Mamba1BlockInference(dict(w1, A_log=with_nan(w1["A_log"], 3))).forward(x), guard=x)
    cat.add(category, "Mamba1BlockInference(weights)", "an extra key 'x'",
            lambda: samebits.Mamba1BlockInference(dict(w1, x=np.zeros(1, np.float32))))
    cat.add(category, "Mamba2BlockInference(weights)", "in_proj.weight (384, 32), one row short",
            lambda: samebits.Mamba2BlockInference(dict(w2, **{"in_proj.weight": w2["in_proj.weight"][:384].copy()})))
    cat.add(category, "Mamba2BlockInference(weights).forward", "an +inf in D",
            lambda: samebits.Mamba2BlockInference(dict(w2, D=np.array([np.inf], np.float32))).forward(x), guard=x)
    cat.add(category, "Mamba3BlockInference(weights).forward", "a NaN in dt_bias",
            lambda: samebits.Mamba3BlockInference(dict(w3, dt_bias=with_nan(w3["dt_bias"]))).forward(x), guard=x)
    cat.add(category, "Mamba3BlockInference(weights)", "weights a list, not a dict",
            lambda: samebits.Mamba3BlockInference(list(w3.values())))
    cat.add(category, "Mamba3BlockInference(weights)", "out_proj.weight float16",
            lambda: samebits.Mamba3BlockInference(
                dict(w3, **{"out_proj.weight": w3["out_proj.weight"].astype(np.float16)})))

    mw = mlp_writer.default_weights()
    M = samebits.MLPInference
    cat.add(category, "MLPInference(weights)", "weight1 float64",
            lambda: M(mw["weight1"].astype(np.float64), mw["bias1"], mw["weight2"], mw["bias2"]))
    cat.add(category, "MLPInference(weights)", "weight1 (8, 16), transposed",
            lambda: M(mw["weight1"].T.copy(), mw["bias1"], mw["weight2"], mw["bias2"]))
    cat.add(category, "MLPInference(weights)", "a NaN in bias1",
            lambda: M(mw["weight1"], with_nan(mw["bias1"]), mw["weight2"], mw["bias2"]))
    cat.add(category, "MLPInference(weights)", "bias2 a Python list",
            lambda: M(mw["weight1"], mw["bias1"], mw["weight2"], mw["bias2"].tolist()))

    cfg = samba_writer.example_config()
    config = samebits.SambaConfig.from_dict(cfg)
    sw = samba_writer.deterministic_weights(cfg)
    S = samebits.SambaInference
    for text, weights in (
            ("embed.weight float64", dict(sw, **{"embed.weight": sw["embed.weight"].astype(np.float64)})),
            ("a NaN in norm_f.weight", dict(sw, **{"norm_f.weight": with_nan(sw["norm_f.weight"])})),
            ("embed.weight (255, 32)", dict(sw, **{"embed.weight": sw["embed.weight"][:255].copy()})),
            ("norm_f.weight missing", {k: v for k, v in sw.items() if k != "norm_f.weight"}),
            ("an extra lm_head.weight with tied embeddings", dict(sw, **{"lm_head.weight": sw["embed.weight"]})),
            ("weights a list of arrays", list(sw.values()))):
        cat.add(category, "SambaInference(config, weights)", text, lambda w=weights: S(config, w))
    cat.add(category, "SambaInference(config, weights)", "config a plain dict, not a SambaConfig",
            lambda: S(cfg, sw))


def _state_buffer_rows(cat):
    category = "array: state buffers"
    blk = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((1, 3, D))
    fresh = blk.allocate_state(1, 8)
    n = np.asarray(fresh.k_cache).size

    def tstate(k, v=None, **fields):
        v = np.zeros(n, np.float32) if v is None else v
        options = dict(batch_size=1, n_kv_heads=1, head_dim=16, max_tokens=8, cached_tokens=0, window=0)
        options.update(fields)
        return samebits.TransformerState(options["batch_size"], options["n_kv_heads"], options["head_dim"],
                                         options["max_tokens"], k, v, options["cached_tokens"], options["window"])

    surface = "TransformerBlockInference.forward(x, TransformerState(...))"
    cat.add(category, "TransformerState(...)", "batch_size 'one'",
            lambda: samebits.TransformerState("one", 1, 16, 8, np.zeros(n, np.float32), np.zeros(n, np.float32)))
    backing = np.zeros(2 * n, np.float32)
    for text, state in (
            ("k_cache a strided view (every other float)", tstate(backing[::2])),
            ("k_cache with negative strides", tstate(np.zeros(n, np.float32)[::-1])),
            ("k_cache read-only", tstate(readonly(np.zeros(n, np.float32)))),
            ("k_cache float64", tstate(np.zeros(n, np.float64))),
            ("k_cache a Python list", tstate([0.0] * n)),
            ("k_cache one float short", tstate(np.zeros(n - 1, np.float32))),
            ("k_cache 2-D (8, 16)", tstate(np.zeros((8, 16), np.float32))),
            ("cached_tokens -1", tstate(np.zeros(n, np.float32), cached_tokens=-1)),
            ("cached_tokens 9 > max_tokens 8", tstate(np.zeros(n, np.float32), cached_tokens=9))):
        cat.add(category, surface, text, lambda s=state: blk.forward(x, s), guard=(state, x))

    m1 = samebits.Mamba1BlockInference(mamba1_weights())
    s1 = m1.allocate_state(2)
    cat.add(category, "Mamba1State(conv_window, h)", "conv_window float64",
            lambda: samebits.Mamba1State(np.zeros((2, 64, 4)), np.zeros((2, 64, 16), np.float32)))
    cat.add(category, "Mamba1State(conv_window, h)", "conv_window (2, 64, 3)",
            lambda: samebits.Mamba1State(np.zeros((2, 64, 3), np.float32), np.zeros((2, 64, 16), np.float32)))
    cat.add(category, "Mamba1State(conv_window, h)", "h (2, 64, 15)",
            lambda: samebits.Mamba1State(np.zeros((2, 64, 4), np.float32), np.zeros((2, 64, 15), np.float32)))
    cat.add(category, "Mamba1State.h = ...", "assign a float64 h", lambda: setattr(s1, "h", np.zeros((2, 64, 16))),
            guard=s1)
    cat.add(category, "Mamba1State.h = ...", "assign an h of batch 3",
            lambda: setattr(s1, "h", np.zeros((3, 64, 16), np.float32)),
            guard=s1)
    cat.add(category, "Mamba2State(...)", "conv_window with 300 channels (not 2*d_model + 256)",
            lambda: samebits.Mamba2State(np.zeros((1, 300, 4), np.float32), None, None, None))
    m2 = samebits.Mamba2BlockInference(mamba2_weights())
    s2 = m2.allocate_state(1)
    # buffered_tokens is a plain state field (as upstream); the call that reads the state judges it.
    x1 = tokens((1, 3, D))
    for value in (256, -1):
        s = m2.allocate_state(1)
        s.buffered_tokens = value
        cat.add(category, "Mamba2BlockInference.forward(x, state)", f"state.buffered_tokens = {value} (valid: 0..255)",
                lambda s=s: m2.forward(x1, s), guard=(s, x1))
    cat.add(category, "Mamba2State.buffer_dtraw = ...", "assign an int32 array",
            lambda: setattr(s2, "buffer_dtraw", np.zeros((1, 256, 1), np.int32)), guard=s2)
    m3 = samebits.Mamba3BlockInference(mamba3_weights())
    s3 = m3.allocate_state(1)
    zeros = {name: np.zeros(shape, np.float32) for name, shape in mamba3_piece_shapes(1, 1).items()}
    cat.add(category, "Mamba3State(...)", "theta (1, 1, 31), not 32 angles",
            lambda: samebits.Mamba3State(np.zeros((1, 1, 31), np.float32), *list(zeros.values())[1:]))
    cat.add(category, "Mamba3State(...)", "h of batch 2 with a theta of batch 1",
            lambda: samebits.Mamba3State(zeros["theta"], np.zeros((2, 1, 64, 128), np.float32),
                                         *list(zeros.values())[2:]))
    cat.add(category, "Mamba3State.theta = ...", "assign theta (1, 2, 32)",
            lambda: setattr(s3, "theta", np.zeros((1, 2, 32), np.float32)), guard=s3)
    s = m3.allocate_state(1)
    s.buffered_tokens = 65
    cat.add(category, "Mamba3BlockInference.forward(x, state)", "state.buffered_tokens = 65 (valid: 0..64)",
            lambda s=s: m3.forward(x1, s), guard=(s, x1))
    cat.add(category, "Mamba3State.set_input_states", "theta float64",
            lambda: s3.set_input_states(np.zeros((1, 1, 32)), zeros["h"], zeros["pending_k"], zeros["pending_v"]),
            guard=s3)
    cat.add(category, "Mamba3State.set_input_states", "k (1, 1, 64), not 128",
            lambda: s3.set_input_states(zeros["theta"], zeros["h"], np.zeros((1, 1, 64), np.float32),
                                        zeros["pending_v"]),
            guard=s3)


def _ids_rows(cat):
    model = samba_model()
    category = "ids"
    good = ids((2, 4))

    def forward(text, value, **options):
        cat.add(category, "SambaInference.forward", text, lambda: model.forward(value),
                guard=value if isinstance(value, np.ndarray) else None, **options)

    forward("a negative id (-1)", np.where(np.arange(8).reshape(2, 4) == 3, -1, good))
    forward("an id equal to vocab (256)", np.where(np.arange(8).reshape(2, 4) == 6, 256, good))
    forward("float ids 1.0", good.astype(np.float32))
    forward("bool ids", good > 100)
    forward("int64 ids 2^32 + 1 (would wrap to 1 as int32)", np.full((2, 4), 2**32 + 1, np.int64))
    forward("uint64 ids 2^63", np.full((2, 4), 2**63, np.uint64))
    forward("ids 1-D (4,)", good[0].copy())
    forward("ids 3-D (2, 4, 1)", good[..., None].copy())
    forward("ids (0, 4): empty batch", np.zeros((0, 4), np.int64))
    forward("ids (2, 0): empty sequence", np.zeros((2, 0), np.int64))
    forward("ids None", None)
    forward("ids a str", "hello")
    forward("ids a list of floats", [[1.5, 2.0]])
    forward("ids object array", good.astype(object))
    state = model.allocate_state(2, 8)
    cat.add(category, "SambaInference.step", "ids (2, 2): step takes one position",
            lambda: model.step(good[:, :2].copy(), state), guard=state)
    cat.add(category, "SambaInference.step", "an id equal to vocab (256)",
            lambda: model.step(np.array([1, 256]), state), guard=state)
    cat.add(category, "SambaInference.step", "ids float64 (2,)", lambda: model.step(np.array([1.0, 2.0]), state),
            guard=state)


def _state_rows(cat):
    category = "state"
    x1 = tokens((1, 3, D))
    blk = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1)
    windowed = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1, window=4)
    other = samebits.TransformerBlockInference(transformer_weights(nkv=2), n_heads=2, n_kv_heads=2)
    m1 = samebits.Mamba1BlockInference(mamba1_weights())
    m2 = samebits.Mamba2BlockInference(mamba2_weights())
    m3 = samebits.Mamba3BlockInference(mamba3_weights())

    def refuse(surface, text, run, state, given):
        """A row calling run(given, state); both must come back unchanged."""
        cat.add(category, surface, text, lambda: run(given, state), guard=(state, given))

    tf = "TransformerBlockInference.forward(x, state)"
    forward = blk.forward
    refuse(tf, "a state for batch 2, x of batch 1", forward, blk.allocate_state(2, 8), x1)
    refuse(tf, "a window-4 block's state into a full-causal block", forward, windowed.allocate_state(1, 8), x1)
    refuse(tf, "the state of a block with 2 kv heads (this one has 1)", forward, other.allocate_state(1, 8), x1)
    refuse(tf, "a Mamba1State", forward, m1.allocate_state(1), x1)
    cat.add(category, tf, "state=object()", lambda: blk.forward(x1, object()), guard=x1)
    s = blk.allocate_state(1, 4)
    blk.forward(x1, s)
    refuse(tf, "capacity exhausted: 3 of 4 positions used, 3 more given", forward, s, x1)
    refuse(tf, "allocate_state(1, max_tokens=9000): past the 8192 positions", forward, blk.allocate_state(1, 9000), x1)
    s = blk.allocate_state(1, 8)
    blk.forward(x1, s)
    s.k_cache[5] = np.nan  # inside the 3 cached positions (a slot not yet used is overwritten, never read)
    refuse(tf, "a NaN planted in the k_cache view (3 positions cached)", forward, s, x1)
    s = blk.allocate_state(1, 4)
    blk.forward(np.concatenate([x1, x1[:, :1]], axis=1), s)
    refuse("TransformerBlockInference.step", "capacity exhausted: 4 of 4 positions used", blk.step,
           s, x1[:, :1].copy())
    cat.add(category, "TransformerBlockInference.step", "state None", lambda: blk.step(x1[:, :1].copy(), None))

    m1f = "Mamba1BlockInference.forward(x, state)"
    refuse(m1f, "a state for batch 2, x of batch 1", m1.forward, m1.allocate_state(2), x1)
    refuse(m1f, "a Mamba2State", m1.forward, m2.allocate_state(1), x1)
    wide = {name: np.full(shape, 0.01, np.float32) for name, shape in
            (("norm.weight", (64,)), ("in_proj.weight", (256, 64)), ("conv1d.weight", (128, 1, 4)),
             ("conv1d.bias", (128,)), ("x_proj.weight", (36, 128)), ("dt_proj.weight", (128, 4)),
             ("dt_proj.bias", (128,)), ("A_log", (128, 16)), ("D", (128,)), ("out_proj.weight", (64, 128)))}
    refuse(m1f, "the state of a d_model-64 block (this one is 32)", m1.forward,
           samebits.Mamba1BlockInference(wide).allocate_state(1), x1)
    refuse(m1f, "an +inf planted in h", m1.forward, planted(m1.allocate_state(1), "h", (0, 3, 2), np.inf), x1)
    cat.add(category, "Mamba1BlockInference.step", "state None", lambda: m1.step(x1[:, :1].copy(), None))

    m2f = "Mamba2BlockInference.forward(x, state)"
    refuse(m2f, "a state for batch 2, x of batch 1", m2.forward, m2.allocate_state(2), x1)
    refuse(m2f, "a Mamba3State", m2.forward, m3.allocate_state(1), x1)
    refuse(m2f, "a NaN planted in buffer_xbc", m2.forward,
           planted(m2.allocate_state(1), "buffer_xbc", (0, 0, 0), np.nan), x1)
    refuse("Mamba2BlockInference.step", "a -inf planted in conv_window", m2.step,
           planted(m2.allocate_state(1), "conv_window", (0, 1, 2), -np.inf), x1[:, :1].copy())

    m3wide = samebits.Mamba3BlockInference(mamba3_weights(64))
    m3f = "Mamba3BlockInference.forward(x, state)"
    refuse(m3f, "a state for batch 2, x of batch 1", m3.forward, m3.allocate_state(2), x1)
    refuse(m3f, "the state of a d_model-64 block (2 heads; this one has 1)", m3.forward, m3wide.allocate_state(1), x1)
    refuse(m3f, "a NaN planted in theta", m3.forward, planted(m3.allocate_state(1), "theta", (0, 0, 4), np.nan), x1)
    s = m3.allocate_state(1)
    m3.forward(x1, s)
    s.set_input_states(np.zeros((1, 1, 32), np.float32), np.zeros((1, 1, 64, 128), np.float32),
                       np.zeros((1, 1, 128), np.float32), np.zeros((1, 1, 64), np.float32))
    refuse(m3f, "input states set on a mid-sequence state (3 tokens in)", m3.forward, s, x1)
    refuse(m3f, "a Mamba1State", m3.forward, m1.allocate_state(1), x1)
    cat.add(category, "Mamba3BlockInference.step", "state None", lambda: m3.step(x1[:, :1].copy(), None))

    model = samba_model()
    sf = "SambaInference.forward(ids, state)"
    one = ids((1, 3))
    refuse(sf, "a state for batch 2, ids of batch 1", model.forward, model.allocate_state(2, 8), one)
    mamba_only = samba_model(samba_writer.config_dict(256, 32, ["mamba3"]))
    refuse(sf, "the state of a one-layer stack (this one has 2)", model.forward, mamba_only.allocate_state(1, 8), one)
    swapped = samba_model(samba_writer.config_dict(256, 32, ["attention", "mamba3"], n_heads=2, intermediate=64))
    refuse(sf, "the state of an attention/mamba3 stack (this one is mamba3/attention)", model.forward,
           swapped.allocate_state(1, 8), one)
    regrouped = samba_model(samba_writer.config_dict(256, 32, ["mamba3", "attention"], n_heads=4, n_kv_heads=4,
                                                     head_dim=8, intermediate=64))
    refuse(sf, "the state of a stack with 4 kv heads of 8 (this one: 2 of 16; same cache size)", model.forward,
           regrouped.allocate_state(1, 8), one)
    s = model.allocate_state(1, 4)
    model.forward(one, s)
    refuse(sf, "capacity exhausted: 3 of 4 positions used, 3 more given", model.forward, s, one)
    cat.add(category, sf, "state=object()", lambda: model.forward(one, object()), guard=one)
    cat.add(category, "SambaState(...)", "batch_size 'two'", lambda: samebits.SambaState("two", 8, []))
    cat.add(category, "SambaState(...)", "layers None", lambda: samebits.SambaState(1, 8, None))
    built = samebits.SambaState(1, 8, [object(), object()])
    cat.add(category, sf, "a hand-built SambaState(1, 8, [object(), object()])", lambda: model.forward(one, built),
            guard=one)
    s = model.allocate_state(1, 8)
    s.layers[0].h[0, 0, 1, 2] = np.nan
    refuse(sf, "a NaN planted in the mamba3 layer's h", model.forward, s, one)
    s = model.allocate_state(1, 8)
    model.forward(one, s)
    s.layers[1].k_cache[3] = np.inf  # inside the cached positions
    refuse(sf, "an +inf planted in the attention layer's k_cache (3 positions cached)", model.forward, s, one)
    s = model.allocate_state(1, 8)
    s.layers[1] = model.allocate_state(2, 8).layers[1]
    refuse(sf, "layers[1] taken from a batch-2 state", model.forward, s, one)
    s = model.allocate_state(1, 8)
    s.layers[1] = windowed.allocate_state(1, 8)
    refuse(sf, "layers[1] replaced by a windowed TransformerState", model.forward, s, one)
    s = model.allocate_state(1, 8)
    s.layers[0] = m1.allocate_state(1)
    refuse(sf, "layers[0] replaced by a Mamba1State", model.forward, s, one)
    s = model.allocate_state(1, 8)
    s.layers[1].cached_tokens = 99
    refuse(sf, "layers[1].cached_tokens 99 > max_tokens 8", model.forward, s, one)
    s = model.allocate_state(1, 4)
    model.forward(np.concatenate([one, one[:, :1]], axis=1), s)
    refuse("SambaInference.step", "capacity exhausted: 4 of 4 positions used", model.step, s,
           np.array([1]))
    cat.add(category, "SambaInference.step", "state None", lambda: model.step(np.array([1]), None))


def _lengths_rows(cat):
    category = "lengths"
    blk = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1)
    x = tokens((2, 4, D))
    tf = "TransformerBlockInference.forward(lengths=)"
    for text, lengths in (
            ("[0, 4]: an empty row", [0, 4]),
            ("[5, 4]: longer than L = 4", [5, 4]),
            ("[-1, 4]: negative", [-1, 4]),
            ("[4]: one entry for a batch of 2", [4]),
            ("[4, 4, 4]: three entries for a batch of 2", [4, 4, 4]),
            ("['3', 4]: a str entry", ["3", 4]),
            ("[3.0, 4]: a float entry", [3.0, 4]),
            ("[True, 4]: a bool entry", [True, 4]),
            ("[None, 4]", [None, 4]),
            ("4: an int, not a sequence", 4),
            ("np.array([2.5, 3.0])", np.array([2.5, 3.0]))):
        cat.add(category, tf, text, lambda v=lengths: blk.forward(x, lengths=v), guard=x)
    s = blk.allocate_state(2, 8)
    cat.add(category, tf, "[4, 2] with a state", lambda: blk.forward(x, s, lengths=[4, 2]), guard=(s, x))
    m1 = samebits.Mamba1BlockInference(mamba1_weights())
    cat.add(category, "Mamba1BlockInference.forward(lengths=)", "[0, 4]", lambda: m1.forward(x, lengths=[0, 4]),
            guard=x)
    s1 = m1.allocate_state(2)
    cat.add(category, "Mamba1BlockInference.forward(lengths=)", "[4, 2] with a state",
            lambda: m1.forward(x, s1, lengths=[4, 2]), guard=(s1, x))
    m2 = samebits.Mamba2BlockInference(mamba2_weights())
    cat.add(category, "Mamba2BlockInference.forward(lengths=)", "[4]: one entry for a batch of 2",
            lambda: m2.forward(x, lengths=[4]), guard=x)
    m3 = samebits.Mamba3BlockInference(mamba3_weights())
    cat.add(category, "Mamba3BlockInference.forward(lengths=)", "[4, 9]: longer than L = 4",
            lambda: m3.forward(x, lengths=[4, 9]), guard=x)
    s3 = m3.allocate_state(2)
    cat.add(category, "Mamba3BlockInference.forward(lengths=)", "[4, 2] with a state",
            lambda: m3.forward(x, s3, lengths=[4, 2]), guard=(s3, x))
    model = samba_model()
    tok = ids((2, 4))
    sf = "SambaInference.forward(lengths=)"
    cat.add(category, sf, "[0, 4]", lambda: model.forward(tok, lengths=[0, 4]), guard=tok)
    cat.add(category, sf, "[2.0, 4]: a float entry", lambda: model.forward(tok, lengths=[2.0, 4]), guard=tok)
    cat.add(category, sf, "[4, -3]", lambda: model.forward(tok, lengths=[4, -3]), guard=tok)
    ss = model.allocate_state(2, 8)
    cat.add(category, sf, "[4, 2] with a state", lambda: model.forward(tok, ss, lengths=[4, 2]), guard=(ss, tok))


def _argument_rows(cat):
    category = "argument"
    for text, n in (("0", 0), ("-1", -1), ("10**9 (far past any machine)", 10**9), ("2**63", 2**63),
                    ("'2' (a str)", "2"), ("2.0 (a float)", 2.0), ("True", True), ("None", None)):
        cat.add(category, "set_num_threads", text, lambda v=n: samebits.set_num_threads(v))

    blk = samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1)
    m1 = samebits.Mamba1BlockInference(mamba1_weights())
    m2 = samebits.Mamba2BlockInference(mamba2_weights())
    m3 = samebits.Mamba3BlockInference(mamba3_weights())
    model = samba_model()
    for surface, text, call in (
            ("TransformerBlockInference.allocate_state", "batch_size 0", lambda: blk.allocate_state(0, 8)),
            ("TransformerBlockInference.allocate_state", "batch_size -1", lambda: blk.allocate_state(-1, 8)),
            ("TransformerBlockInference.allocate_state", "max_tokens 0", lambda: blk.allocate_state(1, 0)),
            ("TransformerBlockInference.allocate_state", "batch_size 'two'", lambda: blk.allocate_state("two", 8)),
            ("Mamba1BlockInference.allocate_state", "batch_size 0", lambda: m1.allocate_state(0)),
            ("Mamba2BlockInference.allocate_state", "batch_size -1", lambda: m2.allocate_state(-1)),
            ("Mamba3BlockInference.allocate_state", "batch_size 0", lambda: m3.allocate_state(0)),
            ("Mamba3BlockInference.allocate_state", "batch_size -5", lambda: m3.allocate_state(-5)),
            ("SambaInference.allocate_state", "batch_size 0", lambda: model.allocate_state(0, 8)),
            ("SambaInference.allocate_state", "max_tokens -1", lambda: model.allocate_state(1, -1)),
            ("SambaInference.allocate_state", "max_tokens None", lambda: model.allocate_state(1, None)),
            ("SambaInference.allocate_state", "batch_size 1.5 (a float)", lambda: model.allocate_state(1.5, 8)),
            ("SambaInference.allocate_state", "batch_size True", lambda: model.allocate_state(True, 8)),
            ("Mamba1BlockInference.allocate_state", "batch_size 2.0 (a float)", lambda: m1.allocate_state(2.0)),
            ("Mamba3BlockInference.allocate_state", "batch_size 1.0 (a float)", lambda: m3.allocate_state(1.0)),
            ("TransformerBlockInference.allocate_state", "max_tokens 8.0 (a float)", lambda: blk.allocate_state(1, 8.0)),
            ("SambaInference.generate", "max_new_tokens 0", lambda: model.generate([1], 0)),
            ("SambaInference.generate", "max_new_tokens 4.0 (a float)", lambda: model.generate([1], 4.0)),
            ("SambaInference.generate", "an empty list of ids", lambda: model.generate([], 4)),
            ("SambaInference.generate", "ids past the vocabulary", lambda: model.generate([10**6], 4)),
            ("SambaInference.generate", "float32 ids", lambda: model.generate(np.zeros(3, np.float32), 4)),
            ("SambaInference.generate", "temperature -1", lambda: model.generate([1], 4, temperature=-1.0)),
            ("SambaInference.generate", "temperature nan", lambda: model.generate([1], 4, temperature=float("nan"))),
            ("SambaInference.generate", "top_k -3", lambda: model.generate([1], 4, top_k=-3)),
            ("SambaInference.generate", "top_p 0", lambda: model.generate([1], 4, top_p=0.0)),
            ("SambaInference.generate", "min_p 2", lambda: model.generate([1], 4, min_p=2.0)),
            ("SambaInference.generate", "repetition_penalty 0", lambda: model.generate([1], 4, repetition_penalty=0.0)),
            ("SambaInference.generate", "repetition_window -1", lambda: model.generate([1], 4, repetition_window=-1)),
            ("SambaInference.generate", "seed -1", lambda: model.generate([1], 4, seed=-1)),
            ("SambaInference.generate", "stop [1] (not text)", lambda: model.generate([1], 4, stop=[1])),
            ("SambaInference.generate", "a str prompt on a model whose vocab is not 256",
             lambda: model.generate("x", 4) if model.config.vocab != 256 else model.generate("x", 4, top_p=2.0))):
        cat.add(category, surface, text, call)
    huge = 2**44  # every request below is at least 2^50 bytes: past any address space, so it always fails
    for surface, text, call in (
            ("TransformerBlockInference.allocate_state", "batch_size 2^44", lambda: blk.allocate_state(huge, 8)),
            ("TransformerBlockInference.allocate_state", "max_tokens 2^44", lambda: blk.allocate_state(1, huge)),
            ("TransformerBlockInference.allocate_state", "batch_size 2^63 (past int64)",
             lambda: blk.allocate_state(2**63, 8)),
            ("Mamba1BlockInference.allocate_state", "batch_size 2^44", lambda: m1.allocate_state(huge)),
            ("Mamba2BlockInference.allocate_state", "batch_size 2^44", lambda: m2.allocate_state(huge)),
            ("Mamba3BlockInference.allocate_state", "batch_size 2^44", lambda: m3.allocate_state(huge)),
            ("SambaInference.allocate_state", "batch_size 2^44", lambda: model.allocate_state(huge, 8)),
            ("SambaInference.allocate_state", "max_tokens 2^44", lambda: model.allocate_state(1, huge)),
            ("TransformerBlockInference(window=2^44).allocate_state", "batch 1, max_tokens 8 (a ring of 2^44 slots)",
             lambda: samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1,
                                                        window=huge).allocate_state(1, 8))):
        cat.add(category, surface, text, call, allowed=ALLOCATION)
    # Sizes whose product overflows 64 bits must be refused by arithmetic, never wrap to a small buffer.
    for surface, text, call in (
            ("TransformerBlockInference.allocate_state", "(2^31, 2^33): 2^68 floats",
             lambda: blk.allocate_state(2**31, 2**33)),
            ("TransformerBlockInference.allocate_state", "(2^62, 4): wraps int64 when multiplied",
             lambda: blk.allocate_state(2**62, 4)),
            ("Mamba1BlockInference.allocate_state", "batch_size 2^62", lambda: m1.allocate_state(2**62)),
            ("Mamba2BlockInference.allocate_state", "batch_size 2^60", lambda: m2.allocate_state(2**60)),
            ("Mamba3BlockInference.allocate_state", "batch_size 2^62", lambda: m3.allocate_state(2**62)),
            ("TransformerBlockInference(window=2^62).allocate_state", "batch 4, max_tokens 8",
             lambda: samebits.TransformerBlockInference(transformer_weights(), n_heads=2, n_kv_heads=1,
                                                        window=2**62).allocate_state(4, 8))):
        cat.add(category, surface, text, call)

    matrix = tokens((4, 6))
    for surface, text, call in (
            ("lowbit.pack", "format 'int4'", lambda: lowbit.pack({"w": matrix}, "int4")),
            ("lowbit.pack", "weights a list", lambda: lowbit.pack([matrix], "int8")),
            ("lowbit.pack_one", "a 1-D tensor", lambda: lowbit.pack_one(matrix[0].copy(), "int8")),
            ("lowbit.pack_one", "a float64 matrix", lambda: lowbit.pack_one(matrix.astype(np.float64), "bfloat16")),
            ("lowbit.pack_one", "a Python object", lambda: lowbit.pack_one(object(), "int8")),
            ("lowbit.BF16Weight", "bits float32", lambda: lowbit.BF16Weight(matrix)),
            ("lowbit.BF16Weight", "bits uint16 1-D", lambda: lowbit.BF16Weight(np.zeros(4, np.uint16))),
            ("lowbit.Int8Weight", "exponents of shape (3,) for 4 rows",
             lambda: lowbit.Int8Weight(np.zeros((4, 6), np.int8), np.zeros(3, np.int32))),
            ("lowbit.Int8Weight", "codes uint8",
             lambda: lowbit.Int8Weight(np.zeros((4, 6), np.uint8), np.zeros(4, np.int32))),
            ("lowbit.widen_bf16", "bits float32", lambda: lowbit.widen_bf16(matrix)),
            ("lowbit.format_of", "one bfloat16 and one int8 tensor",
             lambda: lowbit.format_of([lowbit.pack_one(matrix, "bfloat16"), lowbit.pack_one(matrix, "int8")]))):
        cat.add(category, surface, text, call, guard=matrix)

    # docs/formats.md §5.2 defines quantizing non-finite values: NaN -> code 0, +-inf -> +-127 (absmax exponent 128).
    poisoned = np.array([[np.nan, 1.0, -2.0, 0.5], [np.inf, 1.0, -np.inf, 0.0]], np.float32)

    def codes_as_specified(packed):
        # Hand-derived from docs/formats.md §5.2: row 0 absmax 2 (field 128) -> e = -5, codes x * 32 with NaN -> 0;
        # row 1 absmax inf (field 255) -> e = 122, +-inf -> +-127, 1 * 2^-122 rounds to 0.
        assert packed.codes.tolist() == [[0, 32, -64, 16], [127, 0, -127, 0]], packed.codes.tolist()
        assert packed.exponents.tolist() == [-5, 122], packed.exponents.tolist()

    cat.add(category, "lowbit.pack_one", "int8 of rows holding NaN, +inf and -inf",
            lambda: lowbit.pack_one(poisoned, "int8"),
            guard=poisoned, expect="accept", check=codes_as_specified,
            note="accepted: docs/formats.md §5.2 defines it (NaN -> code 0, +-inf -> +-127); a model then refuses the "
                 "+-inf row, which materializes to +-inf")
    x = tokens((1, 3, D))
    cat.add(category, "Mamba1BlockInference(weights).forward", "in_proj.weight packed int8 from a matrix holding +inf",
            lambda: samebits.Mamba1BlockInference(dict(
                mamba1_weights(), **{"in_proj.weight": lowbit.pack_one(
                    np.where(np.arange(128 * 32).reshape(128, 32) == 0, np.inf, mamba1_weights()["in_proj.weight"]
                             ).astype(np.float32), "int8")})).forward(x), guard=x)

    T = samebits.TransformerBlockInference
    tw = transformer_weights()
    tc = "TransformerBlockInference(...)"
    for text, options in (
            ("n_heads 0", dict(n_heads=0)),
            ("n_heads 3 (does not divide d_model 32)", dict(n_heads=3)),
            ("n_heads -2", dict(n_heads=-2)),
            ("n_kv_heads 2 with weights for 1", dict(n_heads=2, n_kv_heads=2)),
            ("window -1", dict(n_heads=2, n_kv_heads=1, window=-1)),
            ("window 'big'", dict(n_heads=2, n_kv_heads=1, window="big")),
            ("rope_theta -5000", dict(n_heads=2, n_kv_heads=1, rope_theta=-5000.0)),
            ("qk_norm True", dict(n_heads=2, n_kv_heads=1, qk_norm=True)),
            ("numeric_mode 'fast'", dict(n_heads=2, n_kv_heads=1, numeric_mode="fast")),
            ("an unknown keyword dropout=0.1", dict(n_heads=2, n_kv_heads=1, dropout=0.1)),
            ("n_heads not given", dict())):
        cat.add(category, tc, text, lambda o=options: T(tw, **o))
    cat.add(category, tc, "n_kv_heads 3 for n_heads 2, with k/v weights shaped for 3 kv heads",
            lambda: T(transformer_weights(nkv=3), n_heads=2, n_kv_heads=3))
    cat.add(category, "TransformerBlockInference.forward", "an unknown keyword lenghts=[2]",
            lambda: blk.forward(tokens((1, 2, D)), lenghts=[2]))
    cat.add(category, "Mamba1BlockInference(...)", "an unknown keyword d_state=32",
            lambda: samebits.Mamba1BlockInference(mamba1_weights(), d_state=32))
    cat.add(category, "Mamba2BlockInference(...)", "dt_limit ('low', 'high')",
            lambda: samebits.Mamba2BlockInference(mamba2_weights(), dt_limit=("low", "high")))
    cat.add(category, "Mamba2BlockInference(...)", "dt_limit 0.5 (not a pair)",
            lambda: samebits.Mamba2BlockInference(mamba2_weights(), dt_limit=0.5))

    C = samebits.SambaConfig
    sc = "SambaConfig(...)"
    for text, call, allowed in (
            ("vocab 1", lambda: C(1, 32, ["mamba3"]), REFUSALS),
            ("d_model 33 with a mamba3 layer", lambda: C(256, 33, ["mamba3"]), REFUSALS),
            ("layer kind 'lstm'", lambda: C(256, 32, ["lstm"]), REFUSALS),
            ("layers [] (none)", lambda: C(256, 32, []), REFUSALS),
            ("an attention layer without n_heads", lambda: C(256, 32, ["attention"], intermediate=64), REFUSALS),
            ("dropout 1.5", lambda: C(256, 32, ["mamba3"], dropout=1.5), REFUSALS),
            ("norm_eps NaN", lambda: C(256, 32, ["mamba3"], norm_eps=float("nan")), REFUSALS),
            ("norm_eps 1e300 (past float32; upstream's float32 rounding raises OverflowError)",
             lambda: C(256, 32, ["mamba3"], norm_eps=1e300), REFUSALS + (OverflowError,)),
            ("vocab 'many'", lambda: C("many", 32, ["mamba3"]), REFUSALS),
            ("from_dict({}) (docs/api.md: a missing key is a KeyError)", lambda: C.from_dict({}), REFUSALS + (KeyError,)),
            ("from_dict(None)", lambda: C.from_dict(None), REFUSALS)):
        cat.add(category, sc, text, call, allowed=allowed)

    # docs/formats.md §1: the config does not check n_heads % n_kv_heads; the model built from it must.
    odd = C(256, 32, ["attention"], n_heads=2, n_kv_heads=3, intermediate=64)
    cat.add(category, "SambaInference(config, weights)", "a config with n_kv_heads 3 for n_heads 2",
            lambda: samebits.SambaInference(odd, {n: np.full(s, 0.01, np.float32) for n, s in odd.registry()}))

    for name, block in (("TransformerBlockInference", blk), ("Mamba1BlockInference", m1),
                        ("Mamba2BlockInference", m2), ("Mamba3BlockInference", m3)):
        cat.add(category, f"{name}.backward", "any call (inference is forward only)",
                lambda b=block: b.backward(None, None))
    cat.add(category, "SambaInference.loss", "any call (inference is forward only)", lambda: model.loss(None, None))
    cat.add(category, "SambaInference.train_step", "any call", lambda: model.train_step(None, None))


def cli_binary():
    """The installed `samebits` console script of this interpreter's environment."""
    scripts = Path(sysconfig.get_path("scripts")) / "samebits"
    if scripts.exists():
        return str(scripts)
    found = shutil.which("samebits")
    if found is None:
        raise FileNotFoundError("the samebits console script is not installed (pip install .)")
    return found


def _cli_rows(cat):
    binary = cli_binary()
    stream = cat.file("cli-small.ckpt", samba_writer.stream_bytes())
    other_vocab = samba_writer.config_dict(100, 32, ["mamba3"])
    vocab100 = cat.file("cli-vocab100.ckpt", samba_writer.stream_bytes(*samba_writer.build_state(other_vocab)))
    broken = cat.file("cli-broken.ckpt", {n: d for n, d, _ in samba_writer.broken_variants()}["nan_parameter"])
    mlp = cat.file("cli-mlp.ckpt", mlp_writer.valid_bytes())
    short_text = cat.file("cli-one-byte.txt", b"A")
    bad_rows = cat.file("cli-rows.txt", b"1 2 3\n")
    nan_rows = cat.file("cli-nan-rows.txt", b"nan 0 0 0 0 0 0 0\n")
    notes = cat.file("cli-notes.txt", b"In the beginning God created the heaven and the earth.\n")
    empty = cat.file("cli-empty.ckpt", b"")

    def run(*args, env=None):
        def call():
            out = subprocess.run([binary, *map(str, args)], capture_output=True, timeout=ROW_TIMEOUT_S,
                                 stdin=subprocess.DEVNULL, env=None if env is None else {**os.environ, **env})
            decode = lambda data: data.decode("utf-8", "replace")  # noqa: E731
            return CliResult(out.returncode, decode(out.stdout), decode(out.stderr))
        return call

    for text, args, guard in (
            ("no arguments", (), None),
            ("an unknown command 'frobnicate'", ("frobnicate",), None),
            ("an unknown flag --bogus on generate", ("generate", stream, "--prompt", "x", "--bogus"), stream),
            ("--threads 0", ("--threads", "0", "--version"), None),
            ("--threads abc", ("--threads", "abc", "--version"), None),
            ("--threads 100000", ("--threads", "100000", "--version"), None),
            ("--threads with no value", ("--threads",), None),
            ("info on a missing file", ("info", cat.tmp / "missing.ckpt"), None),
            ("info on a directory", ("info", cat.tmp), None),
            ("info on a file with a NaN parameter", ("info", broken), broken),
            ("info with two files", ("info", stream, stream), stream),
            ("generate on a missing file", ("generate", cat.tmp / "missing.ckpt", "--prompt", "x"), None),
            ("generate with no --prompt", ("generate", stream), stream),
            ("generate --max-tokens 0", ("generate", stream, "--prompt", "x", "--max-tokens", "0"), stream),
            ("generate --max-tokens -5", ("generate", stream, "--prompt", "x", "--max-tokens", "-5"), stream),
            ("generate --max-tokens 99999", ("generate", stream, "--prompt", "x", "--max-tokens", "99999"), stream),
            ("generate --max-tokens ten", ("generate", stream, "--prompt", "x", "--max-tokens", "ten"), stream),
            ("generate --max-tokens with no value", ("generate", stream, "--prompt", "x", "--max-tokens"), stream),
            ("generate --temperature -1", ("generate", stream, "--prompt", "x", "--temperature", "-1"), stream),
            ("generate --temperature nan", ("generate", stream, "--prompt", "x", "--temperature", "nan"), stream),
            ("generate --top-p 0", ("generate", stream, "--prompt", "x", "--top-p", "0"), stream),
            ("generate on a vocab-100 model", ("generate", vocab100, "--prompt", "x"), vocab100),
            ("generate on a file with a NaN parameter", ("generate", broken, "--prompt", "x"), broken),
            ("generate on an MLP checkpoint", ("generate", mlp, "--prompt", "x"), mlp),
            ("verify --length 1", ("verify", stream, "--length", "1"), stream),
            ("verify --batch 0", ("verify", stream, "--batch", "0"), stream),
            ("eval on a 1-byte text file", ("eval", stream, short_text), stream),
            ("eval on a missing text file", ("eval", stream, cat.tmp / "missing.txt"), stream),
            ("mlp-predict on a missing file", ("mlp-predict", cat.tmp / "missing.ckpt"), None),
            ("mlp-predict on a Samba archive", ("mlp-predict", stream), stream),
            ("mlp-predict --input with a row of 3 values", ("mlp-predict", mlp, "--input", bad_rows), mlp),
            ("mlp-predict --input with a NaN value", ("mlp-predict", mlp, "--input", nan_rows), mlp),
            ("mlp-predict --input on a missing file", ("mlp-predict", mlp, "--input", cat.tmp / "missing.txt"), mlp),
            ("generate on a text file", ("generate", notes, "--prompt", "x"), notes),
            ("info on a text file", ("info", notes), notes),
            ("info on an empty file", ("info", empty), empty),
            ("verify on an MLP checkpoint", ("verify", mlp), mlp),
            ("mlp-predict on a text file", ("mlp-predict", notes), notes),
            ("mlp-predict --input on a checkpoint", ("mlp-predict", mlp, "--input", mlp), mlp),
            ("eval on a directory", ("eval", stream, cat.tmp), stream),
            ("eval with the checkpoint where the text belongs", ("eval", stream), stream),
            ("generate --prompt-file on a missing file", ("generate", stream, "--prompt-file", cat.tmp / "missing.txt"),
             stream),
            ("generate with both --prompt and --prompt-file", ("generate", stream, "-p", "x", "-f", notes), stream),
            ("generate --seed given twice", ("generate", stream, "-p", "x", "--seed", "1", "-s", "2"), stream),
            ("generate --ignore-eos on a byte-level model", ("generate", stream, "-p", "x", "--ignore-eos"), stream),
            ("generate --min-p 2", ("generate", stream, "-p", "x", "--min-p", "2"), stream),
            ("--simd neon", ("--simd", "neon", "--version"), None),
            ("--threads after the command and before it", ("--threads", "1", "generate", stream, "-p", "x", "-t", "2"),
             stream)):
        cat.add("command line", "samebits " + (args[0] if args and not str(args[0]).startswith("-") else "(global)"),
                text, run(*args), guard=guard, expect="cli")
    for variable, value in (("SAMEBITS_NUM_THREADS", "abc"), ("SAMEBITS_NUM_THREADS", "0"), ("SAMEBITS_SIMD", "neon")):
        cat.add("command line", "samebits (environment)", f"{variable}={value}", run("--version", env={variable: value}),
                expect="cli")


def _tokenizer_rows(cat):
    """samebits.models.Tokenizer (docs/tokenizer.md): its files, ids and arguments."""
    from samebits.models import Tokenizer

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "tokenizer" / "smollm2"
    base_text = (fixtures / "tokenizer.json").read_bytes()
    base = json.loads(base_text)
    load = Tokenizer.from_pretrained
    surface = "models.Tokenizer.from_pretrained"
    category = "file: tokenizer.json"

    def row(text, path, **options):
        cat.add(category, surface, text, lambda: load(path), guard=path, **options)

    def edited(text, name, edit):
        doc = json.loads(base_text)
        edit(doc)
        row(text, cat.file(name + ".json", json.dumps(doc).encode()))

    def directory(name, files):
        d = cat.tmp / name
        d.mkdir()
        for file_name, data in files.items():
            (d / file_name).write_bytes(data)
        return d

    row("a directory with tokenizer.model and no tokenizer.json", directory("sentencepiece", {"tokenizer.model": b"x"}))
    row("/dev/zero (a device; must not read forever)", Path("/dev/zero"))
    row("an empty file", cat.file("empty.json", b""))
    row("truncated at half its length", cat.file("half.json", base_text[: len(base_text) // 2]))
    row("nesting 2000 deep", cat.file("deep.json", b"[" * 2000 + b"]" * 2000))
    row("a JSON array, not an object", cat.file("array.json", b"[]"))
    edited("model.type Unigram", "unigram", lambda d: d["model"].update(type="Unigram"))
    edited("model.byte_fallback true", "fallback", lambda d: d["model"].update(byte_fallback=True))
    edited("model.dropout 0.1", "dropout", lambda d: d["model"].update(dropout=0.1))
    edited("a vocabulary entry spelled with U+2581 (SentencePiece)", "metaspace",
           lambda d: d["model"]["vocab"].update({"\u2581the": 60000}))
    edited("vocabulary id -1", "negative", lambda d: d["model"]["vocab"].update(the=-1))
    edited("vocabulary id 2^31", "huge", lambda d: d["model"]["vocab"].update(the=2 ** 31))
    edited("two entries with one id", "shared", lambda d: d["model"]["vocab"].update(the=5))
    edited("a merge 'a b c' (not a pair)", "triple", lambda d: d["model"]["merges"].insert(0, "a b c"))
    edited("a merge whose result is not in the vocabulary", "orphan", lambda d: d["model"]["merges"].insert(0, "q z"))
    edited("a merge repeated", "repeat", lambda d: d["model"]["merges"].append(d["model"]["merges"][0]))
    edited("normalizer Lowercase", "lower", lambda d: d.update(normalizer={"type": "Lowercase"}))
    edited("pre_tokenizer Metaspace", "meta", lambda d: d.update(pre_tokenizer={"type": "Metaspace"}))
    edited("pre_tokenizer null", "nopre", lambda d: d.update(pre_tokenizer=None))
    edited("a Split regex that is not a known spelling", "regex", lambda d: d.update(pre_tokenizer={
        "type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel"}]}))
    edited("post_processor RobertaProcessing", "roberta", lambda d: d.update(post_processor={"type": "RobertaProcessing"}))
    edited("an added token with lstrip true", "lstrip", lambda d: d["added_tokens"][0].update(lstrip=True))
    edited("an added token whose content is a lone surrogate", "surrogate",
           lambda d: d["added_tokens"][0].update(content="\ud800"))
    edited("truncation set", "truncation", lambda d: d.update(truncation={"max_length": 8}))
    row("tokenizer_config.json add_bos_token \"yes\"",
        directory("badconfig", {"tokenizer.json": base_text, "tokenizer_config.json": b'{"add_bos_token": "yes"}'}))
    row("tokenizer_config.json not JSON",
        directory("notjson", {"tokenizer.json": base_text, "tokenizer_config.json": b"{add_bos_token: no}"}))
    row("tokenizer_config.json chat_template 7 (not a string or list)",
        directory("chatint", {"tokenizer.json": base_text, "tokenizer_config.json": b'{"chat_template": 7}'}))
    row("tokenizer_config.json chat_template list entry without a template",
        directory("chatlist", {"tokenizer.json": base_text,
                               "tokenizer_config.json": b'{"chat_template": [{"name": "default"}]}'}))
    row("tokenizer_config.json chat_template with a lone surrogate",
        directory("chatsurrogate", {"tokenizer.json": base_text,
                                    "tokenizer_config.json": b'{"chat_template": "\\ud800"}'}))
    row("chat_template.jinja not UTF-8",
        directory("chatjinja", {"tokenizer.json": base_text, "chat_template.jinja": b"{{ '\xff' }}"}))
    del base

    tok = load(fixtures)
    for text, ids in (("a bool id", [5, True]), ("a float id", [1.0]), ("id n_vocab (49152)", [5, 49152]),
                      ("id -1", [-1]), ("id 2^40", [1 << 40]), ("a str id", ["5"])):
        cat.add("ids", "models.Tokenizer.decode", text, lambda v=ids: tok.decode(v), guard=ids)
    cat.add("ids", "models.Tokenizer.stream_decoder().push", "id 2^20 (no token)",
            lambda: tok.stream_decoder().push(1 << 20))
    cat.add("argument", "models.Tokenizer.encode", "text 3 (an int)", lambda: tok.encode(3))
    cat.add("argument", "models.Tokenizer.encode", "a str with a lone surrogate", lambda: tok.encode("a\ud800"))
    cat.add("argument", "models.Tokenizer.encode", "add_special_tokens 1 (an int)", lambda: tok.encode("x", 1))
    cat.add("argument", "models.Tokenizer.encode_bytes", "a str", lambda: tok.encode_bytes("x"))
    import jinja2

    cat.add("template", "models.Tokenizer.apply_chat_template", "a template reaching Python internals (sandbox)",
            lambda: tok.apply_chat_template([{"role": "user", "content": "x"}],
                                            chat_template="{{ ''.__class__.__mro__[1].__subclasses__() }}"),
            allowed=(jinja2.exceptions.SecurityError,))
    cat.add("template", "models.Tokenizer.apply_chat_template", "a template that is not Jinja",
            lambda: tok.apply_chat_template([{"role": "user", "content": "x"}], chat_template="{% for %}"))
    cat.add("template", "models.Tokenizer.apply_chat_template", "messages a str",
            lambda: tok.apply_chat_template("hello", chat_template="{{ messages }}"))
    cat.add("template", "ChatTemplate.recognize (native)", "a template of no supported family",
            lambda: __import__("samebits._native", fromlist=["native"]).native().ChatTemplateEngine.recognize(
                "[INST] {{ messages }}", "", ""))

    def repaired(result):
        assert result == tok.encode("a\ufffd\ufffdb", add_special_tokens=False), result

    cat.add("argument", "models.Tokenizer.encode_bytes", "ill-formed UTF-8 b'a\\xff\\xfeb'",
            lambda: tok.encode_bytes(b"a\xff\xfeb"), expect="accept", check=repaired,
            note="accepted: docs/tokenizer.md §3 repairs each ill-formed subpart to U+FFFD, as tokenizers sees it")

    def one_word(result):
        assert tok.decode(result) == "a" * 1_000_000

    cat.add("argument", "models.Tokenizer.encode", "one word of 10^6 letters (must not be quadratic)",
            lambda: tok.encode("a" * 1_000_000), expect="accept", check=one_word,
            note="accepted: merging uses a priority queue (docs/tokenizer.md §5.4); the text decodes back")


def _causal_lm_rows(cat):
    """CausalLM (docs/models.md §15-§19): hostile config files and checkpoints, ids, states and generate."""
    from test_causal_lm import family, write_model

    category = "causal_lm"
    config, tensors = family("llama_tied")
    good_dir = write_model(cat.tmp / "causal_lm_good", config, tensors)
    model = samebits.CausalLM.load(good_dir, max_positions=16)
    other = samebits.CausalLM.load(good_dir, max_positions=16)

    def load_dir(name, text, why, weights=tensors, **options):
        d = cat.tmp / f"causal_lm_{name}"
        write_model(d, config, weights)
        (d / "config.json").write_text(text)
        cat.add(category, "CausalLM.load", why, lambda: samebits.CausalLM.load(d, **options), guard=d / "config.json")

    good = json.dumps(config)
    load_dir("not_json", good[:-5], "config.json truncated (not JSON)")
    load_dir("list", "[1, 2]", "config.json a list, not an object")
    load_dir("no_type", json.dumps(dict(config, model_type=None)), "model_type null")
    load_dir("mixtral", json.dumps(dict(config, model_type="mixtral")), "model_type 'mixtral' (not a family)")
    load_dir("huge", json.dumps(dict(config, num_hidden_layers=2**31 - 1)),
             "num_hidden_layers 2^31 - 1 with 2 layers of tensors")
    load_dir("too_huge", json.dumps(dict(config, num_hidden_layers=2**63 - 1)), "num_hidden_layers 2^63 - 1")
    load_dir("bool", json.dumps(dict(config, hidden_size=True)), "hidden_size true")
    load_dir("yarn", json.dumps(dict(config, rope_scaling={"rope_type": "yarn", "factor": 4.0})),
             "rope_scaling yarn")
    load_dir("heads", json.dumps(dict(config, head_dim=16)), "num_attention_heads * head_dim != hidden_size")
    load_dir("eps", good.replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN'), "rms_norm_eps NaN")
    load_dir("fp8", good, "weight_format 'fp8'", weight_format="fp8")
    load_dir("loader", good, "loader 'hf'", loader="hf")
    load_dir("positions", good, "max_positions 0", max_positions=0)
    nan = dict(tensors)
    nan["model.norm.weight"] = with_nan(tensors["model.norm.weight"], 3)
    load_dir("nan", good, "a NaN in model.norm.weight", weights=nan)
    small = dict(tensors)
    small["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"][:63].copy()
    load_dir("embed", good, "embedding of 63 rows for vocab_size 64", weights=small)
    gone = dict(tensors)
    del gone["model.layers.1.mlp.down_proj.weight"]
    load_dir("missing", good, "a planned tensor missing", weights=gone)
    cat.add(category, "CausalLM.load", "a directory that does not exist",
            lambda: samebits.CausalLM.load(cat.tmp / "causal_lm_nowhere"), allowed=REFUSALS + (FileNotFoundError,))

    ids_ok = ids((2, 4), vocab=64)

    def forward(text, value, state=None):
        guard = tuple(g for g in (value if isinstance(value, np.ndarray) else None, state) if g is not None)
        cat.add(category, "CausalLM.forward", text, lambda: model.forward(value, state), guard=guard or None)

    forward("an id equal to vocab (64)", np.where(np.arange(8).reshape(2, 4) == 6, 64, ids_ok))
    forward("a negative id (-1)", np.where(np.arange(8).reshape(2, 4) == 1, -1, ids_ok))
    forward("int64 ids 2^32 + 1 (would wrap to 1 as int32)", np.full((2, 4), 2**32 + 1, np.int64))
    forward("float ids", ids_ok.astype(np.float32))
    forward("bool ids", ids_ok > 30)
    forward("ids 1-D (4,)", ids_ok[0].copy())
    forward("ids (0, 4): empty batch", np.zeros((0, 4), np.int64))
    forward("ids None", None)
    forward("ids a str", "hello")
    forward("ids (2, 17): past max_positions 16", ids((2, 17), vocab=64))
    state = model.allocate_state(2, 8)
    model.forward(ids_ok, state)
    forward("a state of another model", ids_ok, other.allocate_state(2, 8))
    forward("a state of 3 rows for B = 2", ids_ok, model.allocate_state(3, 8))
    forward("4 + 5 positions into a state of 8", ids((2, 5), vocab=64), state)
    forward("a SambaState in place of a CausalLMState", ids_ok, samba_model().allocate_state(2, 8))
    cat.add(category, "CausalLM.step", "ids (2, 2): a step takes one position",
            lambda: model.step(ids_ok[:, :2].copy(), state), guard=state)
    cat.add(category, "CausalLM.step", "state None", lambda: model.step(ids_ok[:, 0].copy(), None))
    foreign = other.allocate_state(2, 8)
    cat.add(category, "CausalLMState.clone", "a clone of another model's state (a clone keeps its owner)",
            lambda: model.forward(ids_ok, foreign.clone()), guard=foreign)
    cat.add(category, "CausalLM.reset_state", "a state of another model",
            lambda: model.reset_state(other.allocate_state(1, 4)))
    cat.add(category, "CausalLM.allocate_state", "max_tokens 17 past max_positions 16",
            lambda: model.allocate_state(1, 17))
    cat.add(category, "CausalLM.allocate_state", "batch_size 0", lambda: model.allocate_state(0, 4))
    cat.add(category, "CausalLM.generate", "greedy=1 (not a bool)", lambda: model.generate(ids_ok, 2, greedy=1))
    cat.add(category, "CausalLM.generate", "temperature with greedy=True",
            lambda: model.generate(ids_ok, 2, temperature=0.5))
    cat.add(category, "CausalLM.generate", "greedy=False, top_p 0", lambda: model.generate(ids_ok, 2, greedy=False,
                                                                                           top_p=0.0, seed=1))
    cat.add(category, "CausalLM.generate", "stop 1.5 (not an id)", lambda: model.generate(ids_ok, 2, stop=1.5))
    cat.add(category, "CausalLM.generate", "max_new_tokens -1", lambda: model.generate(ids_ok, -1))
    cat.add(category, "CausalLM.generate", "4 prompt + 13 new tokens past max_positions 16",
            lambda: model.generate(ids_ok, 13))


def _gguf_rows(cat):
    import struct

    from samebits import _gguf

    u32 = lambda v: struct.pack("<I", v)  # noqa: E731
    qv = (b"general.quantization_version", 4, u32(2))
    f32 = (b"w", [4], 0, struct.pack("<4f", 1, 2, 3, 4))
    q4_0 = lambda d: (b"w", [32], 2, struct.pack("<H", d) + bytes(16))  # noqa: E731
    missing_ok = REFUSALS + (FileNotFoundError,)
    category = "file: GGUF"

    def read(text, path, allowed=REFUSALS):
        cat.add(category, "samebits._gguf.read", text, lambda: _gguf.read(path), guard=path, allowed=allowed)

    def file(text, name, data):
        read(text, cat.file(name + ".gguf", data))

    read("a path that does not exist", cat.tmp / "missing.gguf", allowed=missing_ok)
    read("a directory", cat.tmp)
    cat.add(category, "samebits._gguf.read", "/dev/zero (not a regular file)", lambda: _gguf.read("/dev/zero"))
    file("an empty file", "empty", b"")
    file("magic GGUX", "magic", b"GGUX" + gguf_bytes([qv])[4:])
    file("GGUF version 1", "v1", gguf_bytes([qv], version=1))
    file("GGUF version 4", "v4", gguf_bytes([qv], version=4))
    file("a big-endian (byte-swapped) file", "big-endian", b"GGUF" + struct.pack(">IQQ", 3, 0, 0))
    file("tensor_count 2^62", "tensor-count", b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 0))
    file("metadata_kv_count 2^64 - 1", "kv-count", b"GGUF" + struct.pack("<IQQ", 3, 0, (1 << 64) - 1))
    file("a key length past the end of the file", "key-length",
         b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 40) + b"k" * 8)
    file("an empty key", "empty-key", gguf_bytes([(b"", 4, u32(0))]))
    file("a duplicate key", "duplicate-key", gguf_bytes([qv, qv]))
    file("value type 13", "value-type", gguf_bytes([(b"k", 13, u32(0))]))
    file("an array of arrays", "nested-array", gguf_bytes([(b"k", 9, u32(9) + struct.pack("<Q", 0))]))
    file("an array count of 2^31", "array-count", gguf_bytes([(b"k", 9, u32(0) + struct.pack("<Q", 1 << 31))]))
    file("a string length past the end of the file", "string-length",
         gguf_bytes([(b"k", 8, struct.pack("<Q", 1 << 40))]))
    file("a BOOL byte 2", "bool", gguf_bytes([(b"k", 7, b"\x02")]))
    file("general.alignment 3", "alignment-3", gguf_bytes([(b"general.alignment", 4, u32(3))]))
    file("general.alignment as UINT64", "alignment-u64",
         gguf_bytes([(b"general.alignment", 10, struct.pack("<Q", 32))]))
    file("a 64-byte tensor name", "long-name", gguf_bytes([qv], [(b"n" * 64, [4], 0, f32[3])]))
    file("n_dims 5", "n-dims", gguf_bytes([qv], [(b"w", [1, 1, 1, 1, 4], 0, f32[3])]))
    file("a zero dimension", "zero-dim", gguf_bytes([qv], [(b"w", [4, 0], 0, f32[3])]))
    file("dimensions whose product wraps to 4 in 64 bits", "dims-wrap",
         gguf_bytes([qv], [(b"w", [4194305, 4194305, 211106198978564], 0, f32[3])]))
    file("a tensor of type IQ2_XXS", "iq2-xxs", gguf_bytes([qv], [(b"w", [256], 16, bytes(66))]))
    file("a tensor of type Q8_K", "q8-k", gguf_bytes([qv], [(b"w", [256], 15, bytes(292))]))
    file("a tensor of type MXFP4", "mxfp4", gguf_bytes([qv], [(b"w", [32], 39, bytes(17))]))
    file("a tensor of removed type 4", "removed-type", gguf_bytes([qv], [(b"w", [32], 4, bytes(20))]))
    file("a tensor of type 43 (unknown)", "unknown-type", gguf_bytes([qv], [(b"w", [32], 43, bytes(20))]))
    file("a Q4_0 row of 16 elements (half a block)", "partial-block", gguf_bytes([qv], [(b"w", [16], 2, bytes(18))]))
    file("two tensors with the same name", "duplicate-tensor", gguf_bytes([qv], [f32, f32]))
    swapped = bytearray(gguf_bytes([qv], [f32, (b"v", [4], 0, f32[3])]))
    at = swapped.find(struct.pack("<Q", 1) + b"v") + 9 + 4 + 8 + 4
    swapped[at] = 0  # the second tensor claims offset 0: it overlaps the first
    file("a tensor offset overlapping the previous tensor", "overlap", bytes(swapped))
    file("a tensor past the end of the file", "truncated-data", gguf_bytes([qv], [f32])[:-20])
    file("64 bytes of trailing garbage", "trailing", gguf_bytes([qv], [f32]) + b"\xff" * 64)
    file("general.type 'adapter'", "adapter",
         gguf_bytes([qv, (b"general.type", 8, struct.pack("<Q", 7) + b"adapter")]))
    file("split.count 2 (a multi-file model)", "split", gguf_bytes([qv, (b"split.count", 2, struct.pack("<H", 2))]))
    file("quantized tensors without general.quantization_version", "no-qv", gguf_bytes([], [q4_0(0x3C00)]))

    nan_scale = cat.file("nan-scale.gguf", gguf_bytes([qv], [q4_0(0x7E00)]))
    inf_f16 = cat.file("inf-f16.gguf", gguf_bytes([qv], [(b"w", [2], 1, b"\x00\x3c\x00\x7c")]))
    valid = cat.file("valid.gguf", gguf_bytes([qv], [f32]))
    for text, path, name, allowed in (
            ("a Q4_0 block with a NaN scale", nan_scale, "w", REFUSALS),
            ("an F16 infinity", inf_f16, "w", REFUSALS),
            ("a tensor name the file lacks", valid, "nope", REFUSALS + (KeyError,)),
            ("a tensor name that is not a str", valid, 3, REFUSALS)):
        cat.add(category, "samebits._gguf.tensor", text, lambda p=path, n=name: _gguf.tensor(p, n), guard=path,
                allowed=allowed)
    data = np.zeros(36, np.uint8)
    for text, call in (
            ("type 'Q8_K' (refused by name)", lambda: _gguf.dequantize("Q8_K", data, 0)),
            ("type 39 (MXFP4)", lambda: _gguf.dequantize(39, data, 32)),
            ("36 bytes for 32 Q4_0 elements", lambda: _gguf.dequantize("Q4_0", data, 32)),
            ("a count of 16 for Q4_0 (half a block)", lambda: _gguf.dequantize("Q4_0", data[:18], 16)),
            ("a negative count", lambda: _gguf.dequantize("Q4_0", data[:18], -32)),
            ("int8 data", lambda: _gguf.dequantize("Q4_0", data.view(np.int8)[:18], 32)),
            ("an F32 NaN", lambda: _gguf.dequantize("F32", np.array([np.nan], np.float32).view(np.uint8), 1)),
            ("a Q6_K block with an infinite scale",
             lambda: _gguf.dequantize("Q6_K", np.concatenate([np.zeros(208, np.uint8), [0, 0x7C]]).astype(np.uint8),
                                      256))):
        cat.add("arrays: GGUF blocks", "samebits._gguf.dequantize", text, call, guard=data)

    binary = cli_binary()
    for text, path in (("info on a GGUF with a NaN scale", nan_scale),
                       ("info on a GGUF with an IQ2_XXS tensor",
                        cat.file("cli-iq2.gguf", gguf_bytes([qv], [(b"w", [256], 16, bytes(66))]))),
                       ("info on a truncated GGUF", cat.file("cli-truncated.gguf", gguf_bytes([qv], [f32])[:-20]))):
        def call(p=path):
            out = subprocess.run([binary, "info", str(p)], capture_output=True, timeout=ROW_TIMEOUT_S,
                                 stdin=subprocess.DEVNULL)
            decode = lambda data: data.decode("utf-8", "replace")  # noqa: E731
            return CliResult(out.returncode, decode(out.stdout), decode(out.stderr))
        cat.add("command line", "samebits info", text, call, guard=path, expect="cli")


def _gguf_model_rows(cat):
    """GGUF files as models and tokenizers (docs/gguf.md §10-§12): hostile hyper-parameters, tensor sets and
    tokenizer metadata, each refused naming the file, the key or tensor, and the problem."""
    import struct

    from gguf_model_writer import gguf, write_gguf
    from test_causal_lm import family
    from test_gguf_tokenizer import write_vocab

    config, tensors = family("llama_tied")
    category = "file: GGUF model"

    def model(text, name, edit=None, extra=None, **options):
        c, t = dict(config), dict(tensors)
        if edit:
            edit(c, t)
        path = cat.tmp / f"gguf_model_{name}.gguf"
        write_gguf(path, c, t, extra=extra)
        cat.add(category, "CausalLM.load", text, lambda: samebits.CausalLM.load(path, **options), guard=path)

    def arch(text, name):
        path = cat.tmp / f"gguf_model_{name}.gguf"
        w = gguf.GGUFWriter(str(path), name)
        w.add_tensor("token_embd.weight", np.ones((8, 32), np.float32))
        w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
        cat.add(category, "CausalLM.load", text, lambda: samebits.CausalLM.load(path), guard=path)

    arch("architecture 'mamba' (refused by name: ssm_a holds A, not A_log)", "mamba")
    arch("architecture 'mamba2' (refused by name)", "mamba2")
    arch("architecture 'gemma' (not supported)", "gemma")
    model("head_count_kv 3 (does not divide head_count 4)", "kv3", extra={"{A}.attention.head_count_kv": 3})
    model("key_length 16 (head_count*key_length != embedding_length)", "key16",
          extra={"{A}.attention.key_length": 16})
    model("rope.dimension_count 4 on llama (half the head)", "rope-dim", extra={"{A}.rope.dimension_count": 4})
    model("rope.scaling.type 'yarn'", "yarn", extra={"{A}.rope.scaling.type": "yarn"})
    model("rope.scaling.factor 4.0", "rope-factor", extra={"{A}.rope.scaling.factor": 4.0})
    model("expert_count 8 (mixture of experts)", "experts", extra={"{A}.expert_count": 8})
    model("a tensor the architecture does not use", "extra-tensor",
          lambda c, t: t.__setitem__("blk.0.attn_qkv.weight", np.ones((96, 32), np.float32)))
    model("rope_freqs.weight (llama3 frequency factors)", "rope-freqs",
          lambda c, t: t.__setitem__("rope_freqs.weight", np.ones(4, np.float32)))
    model("a missing ffn_down tensor", "missing", lambda c, t: t.pop("model.layers.1.mlp.down_proj.weight"))
    model("a layer-2 tensor in a 2-layer model", "layer-2",
          lambda c, t: t.__setitem__("model.layers.2.input_layernorm.weight", np.ones(32, np.float32)))
    model("a NaN in attn_q.weight", "nan",
          lambda c, t: t.__setitem__("model.layers.0.self_attn.q_proj.weight",
                                     np.full_like(t["model.layers.0.self_attn.q_proj.weight"], np.nan)))
    model("loader 'mojolearn' on a GGUF file", "mojolearn", loader="mojolearn")

    from samebits.models import Tokenizer
    base = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "tokenizer" / "smollm2" /
                       "tokenizer.json").read_bytes())
    category = "file: GGUF tokenizer"

    def vocab(text, name, pre="smollm", **options):
        path = Path(write_vocab(cat.tmp / f"gguf_vocab_{name}.gguf", base, pre, **options))
        cat.add(category, "models.Tokenizer.from_pretrained", text, lambda: Tokenizer.from_pretrained(path), guard=path)

    vocab("tokenizer.ggml.model 'llama' (SentencePiece, refused by name)", "spm", model="llama")
    vocab("tokenizer.ggml.model 'bert'", "bert", model="bert")
    vocab("tokenizer.ggml.pre 'default' (llama.cpp's legacy split)", "default", pre="default")
    vocab("tokenizer.ggml.pre absent", "no-pre", pre=None)
    vocab("tokenizer.ggml.pre 'falcon' (not supported)", "falcon", pre="falcon")
    vocab("a BYTE-type token in a gpt2 vocabulary", "byte-type", types_override={300: 6})
    vocab("token type 0 (not a known type)", "type-0", types_override={300: 0})
    vocab("a merge without a space", "merge", merges=["ab"])
    vocab("a merge naming a part outside the byte table", "merge-part", merges=["a \u2581b"])
    vocab("add_space_prefix true", "prefix", extra={"tokenizer.ggml.add_space_prefix": lambda w, k: w.add_bool(k, True)})
    vocab("eot_token_id 49152 (outside the tokens)", "eot",
          extra={"tokenizer.ggml.eot_token_id": lambda w, k: w.add_uint32(k, 49152)})
    vocab("two tokens with the same text", "dup", edit=lambda tokens: tokens.__setitem__(300, tokens[301]))
    vocab("an empty token", "empty", edit=lambda tokens: tokens.__setitem__(300, ""))
    no_tok = cat.tmp / "gguf_vocab_none.gguf"
    w = gguf.GGUFWriter(str(no_tok), "llama")
    w.add_uint32("x", struct.unpack("<I", b"GGUF")[0])
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    cat.add(category, "models.Tokenizer.from_pretrained", "a GGUF file without tokenizer keys",
            lambda: Tokenizer.from_pretrained(no_tok), guard=no_tok)


def _state_file_rows(cat):
    """Saved decode states (docs/formats.md §9): each file refused by name; the file itself is the guard (a
    load makes a new state, so nothing else exists to change)."""
    model = samba_model(samba_writer.config_dict(256, D, ["mamba3", "attention"], n_heads=2, intermediate=64))
    state = model.allocate_state(1, 8)
    model.forward(ids((1, 3)), state)
    good = cat.tmp / "good.state"
    state.save(good, model)
    data = good.read_bytes()
    load = samebits.SambaState.load
    surface, category = "SambaState.load", "file: saved state"

    def row(text, path, target=model, allowed=REFUSALS):
        cat.add(category, surface, text, lambda: load(path, target), guard=path, allowed=allowed)

    row("a path that does not exist", cat.tmp / "missing.state", allowed=REFUSALS + (FileNotFoundError,))
    row("a directory", cat.tmp, allowed=REFUSALS + (IsADirectoryError,))
    row("/dev/zero (not a regular file)", Path("/dev/zero"))
    row("an empty file", cat.file("empty.state", b""))
    row("a Samba checkpoint (another kind of file)", cat.file("kind.state", samba_writer.stream_bytes()))
    row("truncated inside the header", cat.file("short.state", data[:40]))
    row("truncated by 9 bytes", cat.file("cut.state", data[:-9]))
    row("one trailing byte", cat.file("trailing.state", data + b"\0"))
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    row("one payload bit flipped (checksum)", cat.file("flipped.state", bytes(flipped)))
    for text, name, edit in (
            ("version 1 (before the fingerprint covered every tensor)", "version1",
             state_edits.header(8, (1).to_bytes(4, "little"))),
            ("version 3", "version", state_edits.header(8, (3).to_bytes(4, "little"))),
            ("kind Mamba3State for a SambaState", "kind", state_edits.header(12, (4).to_bytes(4, "little"))),
            ("another model's fingerprint", "fingerprint", state_edits.header(16, b"0" * 64)),
            ("batch 0", "batch0", state_edits.counter("batch", 0)),
            ("batch 2^40 (rows the arrays do not hold)", "batch_huge", state_edits.counter("batch", 2**40)),
            ("max_tokens beyond the KV arrays", "max_tokens", state_edits.counter("max_tokens", 9)),
            ("cached_tokens past max_tokens", "cached", state_edits.counter("layer.1.cached_tokens", 9)),
            ("buffered_tokens 65 (Mamba-3 chunk is 64)", "buffered", state_edits.counter("layer.0.buffered_tokens", 65)),
            ("pending 2", "pending", state_edits.counter("layer.0.pending", 2)),
            ("a NaN in layer.0.theta", "nan", state_edits.array_value("layer.0.theta", 3, 0, float("nan"))),
            ("an extent of 2^62 (size past the file)", "extent", state_edits.array_extent("layer.0.h", 2**62)),
            ("an entry this kind does not define", "extra", state_edits.extra_counter("surprise", 1))):
        row(text + " (honest checksum)", cat.file(name + ".state", state_edits.rewrite(data, edit)))
    cat.add(category, surface, "a valid file's path with an embedded NUL byte", lambda: load(str(good) + "\0x", model),
            guard=good)
    other = samba_model(samba_writer.config_dict(256, D, ["mamba3", "attention"], n_heads=2, intermediate=64,
                                                 tie_embeddings=False))
    row("a valid file loaded into another model", good, target=other)
    row("a valid file loaded into a Mamba-1 block (wrong model class)", good,
        target=samebits.Mamba1BlockInference(mamba1_weights()))


BUILDERS = (_samba_file_rows, _mlp_file_rows, _array_rows, _weight_rows, _state_buffer_rows, _ids_rows, _state_rows,
            _lengths_rows, _argument_rows, _cli_rows, _tokenizer_rows, _causal_lm_rows, _gguf_rows,
            _gguf_model_rows, _state_file_rows)


def build(tmp):
    """Every row, in table order, with its files written under `tmp`."""
    cat = Catalogue(tmp)
    for builder in BUILDERS:
        builder(cat)
    return cat.rows


# ------------------------------------------------------------------------------------ running a row

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def clean(text, tmp):
    """A message made deterministic: the run's temporary directory and object addresses replaced."""
    text = text.replace(str(tmp), TMP_PLACEHOLDER)
    return _ADDRESS.sub(" at 0x…", text)


def _first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def run_row(row, tmp):
    """The outcome of one row as a JSON-ready dict (never raises)."""
    outcome = {"category": row.category, "surface": row.surface, "input": row.input, "expect": row.expect}
    try:
        before = snapshot(row.guard)
    except Exception as exc:  # noqa: BLE001 - a catalogue bug, reported as such
        outcome.update(result="setup-error", error_type=type(exc).__name__, message=clean(str(exc), tmp))
        return outcome
    try:
        value = row.call()
    except BaseException as exc:  # noqa: BLE001 - the point is to see every exception type
        outcome.update(error_type=type(exc).__name__, message=clean(_first_line(str(exc)), tmp),
                       result="refused" if isinstance(exc, row.allowed) else "wrong-exception")
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
    else:
        if row.expect == "cli":
            line = _first_line(value.stderr) or _first_line(
                next((ln for ln in value.stdout.splitlines() if "REFUSED" in ln), ""))
            refused = value.code in CLI_REFUSAL_CODES and bool(line)
            outcome.update(error_type=f"exit {value.code}", message=clean(line, tmp),
                           result="refused" if refused else ("crash" if value.code < 0 or value.code == 3 else
                                                             "silent-acceptance"))
        elif row.expect == "accept":
            try:
                row.check(value)
            except Exception as exc:  # noqa: BLE001
                outcome.update(error_type="accepted", message=clean(f"CHECK FAILED: {exc}", tmp), result="check-failed")
            else:
                outcome.update(error_type="accepted", message=row.note, result="accepted")
        else:
            outcome.update(error_type="(none)", message=f"returned {type(value).__name__}", result="silent-acceptance")
    try:
        after = snapshot(row.guard)
        outcome["unchanged"] = None if before is None else (before == after)
    except Exception as exc:  # noqa: BLE001
        outcome["unchanged"] = False
        outcome["message"] += f" [snapshot after the call failed: {exc}]"
    return outcome


def main():
    """Runs every row and prints one JSON line per row, flushed, so a crash or hang shows as missing rows."""
    tmp = Path(tempfile.mkdtemp(prefix="samebits-hostile-"))
    try:
        rows = build(tmp)
        print(json.dumps({"rows": len(rows)}), flush=True)
        threads = samebits.get_num_threads()
        for index, row in enumerate(rows):
            faulthandler.dump_traceback_later(ROW_TIMEOUT_S, exit=True)
            outcome = run_row(row, tmp)
            faulthandler.cancel_dump_traceback_later()
            samebits.set_num_threads(threads)  # a thread-count row must not leak into the next rows
            outcome["index"] = index + 1
            print(json.dumps(outcome), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    faulthandler.enable()
    main()
