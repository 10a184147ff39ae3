"""Test-only writer of Samba checkpoints (streamed v2 archive and legacy JSON), built from docs/formats.md §1 and §3.

It is not mojolearn's writer: it spells the layouts out from the spec (the SambaConfig rules, the registry,
canonical JSON via Python's own json.dumps, SHA-256 digests, little-endian arrays, exact sizes) so the readers
under test are checked against files produced independently of them. `broken_variants()` is the refusal
table (file bytes and the message the reader must give); `valid_variants()` lists files that must load,
with the weights they hold.
"""
import copy
import hashlib
import json
import math
import struct
from pathlib import Path

import numpy as np

from nested_edits import delete_key as _delete, set_key as _set

MAGIC = b"MOJOLEARN-SAMBA\x02\n"
STREAM_SCHEMA = "mojolearn.samba-stream.v2"
STATE_SCHEMA = "mojolearn.samba-stack-state.v1"
PROFILE = "mojolearn.samba-stack.fp32.v1"
LEGACY_SCHEMA = "mojolearn.samba-stack-json-checkpoint.v1"
HEADER_LIMIT = 1024 * 1024
LEGACY_LIMIT = 256 * 1024 * 1024
ARRAYS = (("parameters", "<f4"), ("exp_avg", "<f4"), ("exp_avg_sq", "<f4"), ("buf_initialized", "<i4"))
KINDS = ("mamba3", "attention")

MAMBA3_NAMES = ("block_norm.weight", "in_proj.weight", "dt_bias", "B_norm.weight", "C_norm.weight", "B_bias",
                "C_bias", "D", "out_proj.weight")
ATTENTION_NAMES = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_proj.weight", "k_proj.weight",
                   "v_proj.weight", "o_proj.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def canonical(value):
    """docs/formats.md §3.12: the exact json.dumps arguments every Samba format is defined by, as ASCII bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def round_f32(value):
    """One round-to-nearest-even to binary32 and back (mojolearn's _round_f32)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


# ------------------------------------------------------------------------------------ config and registry

def config_dict(vocab, d_model, layers, n_heads=None, n_kv_heads=None, head_dim=None, intermediate=None,
                tie_embeddings=True, norm_eps=1e-5, dropout=0.0):
    """SambaConfig(...).to_dict() for a valid config: defaults filled only when an attention layer exists."""
    if "attention" in layers:
        head_dim = d_model // n_heads if head_dim is None else head_dim
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    return {"vocab": vocab, "d_model": d_model, "layers": list(layers), "n_heads": n_heads,
            "n_kv_heads": n_kv_heads, "head_dim": head_dim, "intermediate": intermediate,
            "tie_embeddings": tie_embeddings, "norm_eps": round_f32(norm_eps), "dropout": round_f32(dropout)}


def example_config():
    """The worked example of docs/formats.md §1.6: 20 tensors, 34,530 parameters."""
    return config_dict(256, 32, ["mamba3", "attention"], n_heads=2, intermediate=64)


def block_shapes(cfg, kind):
    dm = cfg["d_model"]
    if kind == "mamba3":
        di = 2 * dm
        nh = di // 64
        dip = 2 * di + 2 * 128 + 3 * nh + 32
        shapes = [(dm,), (dip, dm), (nh,), (128,), (128,), (nh, 128), (nh, 128), (nh,), (dm, di)]
        return list(zip(MAMBA3_NAMES, shapes))
    qw, kw, it = cfg["n_heads"] * cfg["head_dim"], cfg["n_kv_heads"] * cfg["head_dim"], cfg["intermediate"]
    shapes = [(dm,), (dm,), (qw, dm), (kw, dm), (kw, dm), (dm, qw), (it, dm), (it, dm), (dm, it)]
    return list(zip(ATTENTION_NAMES, shapes))


def registry(cfg):
    """[(name, shape)] in stack order (docs/formats.md §1.6)."""
    out = [("embed.weight", (cfg["vocab"], cfg["d_model"]))]
    for i, kind in enumerate(cfg["layers"]):
        out.extend(("layers.%d.%s" % (i, name), shape) for name, shape in block_shapes(cfg, kind))
    out.append(("norm_f.weight", (cfg["d_model"],)))
    if not cfg["tie_embeddings"]:
        out.append(("lm_head.weight", (cfg["vocab"], cfg["d_model"])))
    return out


def registry_entries(cfg):
    """The state's `registry` list: name, offset, shape, size with element offsets."""
    entries, offset = [], 0
    for name, shape in registry(cfg):
        size = math.prod(shape)
        entries.append({"name": name, "offset": offset, "shape": list(shape), "size": size})
        offset += size
    return entries


def deterministic_weights(cfg, seed=20260917):
    """A weight dict for any config: one numpy stream per tensor, norms near 1, everything else small."""
    weights = {}
    for index, (name, shape) in enumerate(registry(cfg)):
        rng = np.random.default_rng([seed, index])
        values = rng.standard_normal(shape) * 0.05
        if name.endswith("norm.weight") or name.endswith("layernorm.weight") or name == "norm_f.weight":
            values = values + 1.0
        weights[name] = values.astype(np.float32)
    return weights


def flat_parameters(cfg, weights):
    return np.concatenate([np.ascontiguousarray(weights[name], dtype=np.float32).reshape(-1)
                           for name, _ in registry(cfg)])


# ------------------------------------------------------------------------------------ the state

def default_optimizer():
    return {"accumulation_steps": 1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-08, "kind": "adamw",
            "lr": round_f32(5e-4), "max_norm": 1.0, "weight_decay": 0.01}


def default_schedule():
    return {"kind": "cosine", "min_lr": 0.0, "peak_lr": round_f32(1e-3), "total_steps": 64, "warmup_steps": 8}


def build_state(cfg=None, weights=None, *, t=3, optimizer=None, schedule="default", rng=None,
                numeric_mode="identical", moments=None, flags=None):
    """(metadata, arrays): the state dictionary of docs/formats.md §3.4 split into its JSON part and its four arrays."""
    cfg = example_config() if cfg is None else cfg
    weights = deterministic_weights(cfg) if weights is None else weights
    parameters = flat_parameters(cfg, weights)
    n = parameters.size
    count = len(registry(cfg))
    if moments is None:
        moments = (((np.arange(n) % 11) - 5) / 1024).astype(np.float32), ((np.arange(n) % 7) / 4096).astype(np.float32)
    metadata = {
        "config": cfg,
        "numeric_mode": numeric_mode,
        "optimizer": default_optimizer() if optimizer is None else optimizer,
        "profile": PROFILE,
        "registry": registry_entries(cfg),
        "rng": {"counter": 11, "seed": 7} if rng is None else rng,
        "schedule": default_schedule() if schedule == "default" else schedule,
        "schema": STATE_SCHEMA,
        "t": t,
    }
    arrays = {"parameters": parameters, "exp_avg": moments[0], "exp_avg_sq": moments[1],
              "buf_initialized": np.ones(count, dtype=np.int32) if flags is None else flags}
    return metadata, arrays


def raw_bytes(array, dtype):
    return np.ascontiguousarray(array, dtype=dtype).reshape(-1).tobytes()


def stream_descriptors(arrays):
    out = []
    for name, dtype in ARRAYS:
        raw = raw_bytes(arrays[name], dtype)
        out.append({"dtype": dtype, "name": name, "nbytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
                    "shape": [len(raw) // 4]})
    return out


# ------------------------------------------------------------------------------------ streamed v2 archive

def stream_header(metadata, arrays, edit=None):
    # A deep copy: edits of one variant never leak into the metadata the next one is built from.
    envelope = {"arrays": stream_descriptors(arrays), "schema": STREAM_SCHEMA, "state": copy.deepcopy(metadata)}
    if edit is not None:
        edit(envelope)
    return envelope


def stream_bytes(metadata=None, arrays=None, *, edit=None, header=None, digest=None, length=None, body=None):
    """The archive of docs/formats.md §3.2. `edit(envelope)` changes the header value before it is encoded (and
    honestly hashed); `header` replaces the encoded header bytes, `digest` the 32 digest bytes, `length` the
    stored header length and `body` the array bytes."""
    if metadata is None:
        metadata, arrays = build_state()
    if header is None:
        header = canonical(stream_header(metadata, arrays, edit))
    if digest is None:
        digest = hashlib.sha256(header).digest()
    if body is None:
        body = b"".join(raw_bytes(arrays[name], dtype) for name, dtype in ARRAYS)
    return MAGIC + struct.pack("<Q", len(header) if length is None else length) + header + digest + body


def write_stream(path, cfg=None, weights=None, **state_options):
    """Writes a valid archive and returns its path."""
    data = stream_bytes(*build_state(cfg, weights, **state_options))
    Path(path).write_bytes(data)
    return Path(path)


# ------------------------------------------------------------------------------------ legacy JSON

def legacy_descriptor(array, dtype):
    array = np.asarray(array)
    return {"dtype": dtype, "hex": raw_bytes(array, dtype).hex(), "shape": list(array.shape)}


def legacy_payload(metadata, arrays):
    payload = copy.deepcopy(metadata)
    for name, dtype in ARRAYS:
        payload[name] = legacy_descriptor(arrays[name], dtype)
    return payload


def legacy_bytes(metadata=None, arrays=None, *, edit=None, rehash=True, digest=None):
    """The legacy file of docs/formats.md §3.11: canonical envelope + one newline. `edit(payload)` changes the
    payload first; with rehash=False the stored digest stays that of the unedited payload."""
    if metadata is None:
        metadata, arrays = build_state()
    payload = legacy_payload(metadata, arrays)
    honest = hashlib.sha256(canonical(payload)).hexdigest()
    if edit is not None:
        edit(payload)
    if rehash:
        honest = hashlib.sha256(canonical(payload)).hexdigest()
    envelope = {"payload": payload, "payload_sha256": honest if digest is None else digest, "schema": LEGACY_SCHEMA}
    return canonical(envelope) + b"\n"


def write_legacy(path, cfg=None, weights=None, **state_options):
    data = legacy_bytes(*build_state(cfg, weights, **state_options))
    Path(path).write_bytes(data)
    return Path(path)


# ------------------------------------------------------------------------------------ variants

STREAM = "Samba checkpoint "
STACK = "samebits.SambaStack: "
INFERENCE = "samebits.SambaInference: "
CONFIG = "samebits.SambaConfig: "
PROFILE_STATE = "samebits: samebits.SambaInference state "


def _flip(data, at):
    data = bytearray(data)
    data[at] ^= 0x01
    return bytes(data)


def _with_state(**overrides):
    """A valid-looking archive whose state was built with other options (honestly hashed throughout)."""
    return stream_bytes(*build_state(**overrides))


def _with_config(cfg, **overrides):
    metadata, arrays = build_state(example_config())
    metadata["config"] = cfg
    for key, value in overrides.items():
        metadata[key] = value
    return stream_bytes(metadata, arrays)


def _poisoned(index, word, cfg=None):
    """Archive whose parameter `index` holds the float32 bit pattern `word`, hashed honestly."""
    metadata, arrays = build_state(cfg)
    parameters = arrays["parameters"].copy()
    parameters.view(np.uint32)[index] = word
    arrays = dict(arrays, parameters=parameters)
    return metadata, arrays


def _replace_once(data, old, new):
    if data.count(old) != 1:
        raise AssertionError("test writer: %r occurs %d times" % (old, data.count(old)))
    return data.replace(old, new)


def _pretty(value):
    return json.dumps(value, indent=1, sort_keys=True).encode("ascii")


def stream_variants():
    """[(name, bytes, message)] of broken v2 archives, each read through the dispatching reader."""
    metadata, arrays = build_state()
    good = stream_bytes(metadata, arrays)
    header = canonical(stream_header(metadata, arrays))
    length = len(header)
    body_at = 17 + 8 + length + 32
    n = arrays["parameters"].size
    offsets = {e["name"]: e["offset"] for e in registry_entries(example_config())}
    untied = config_dict(256, 32, ["mamba3", "attention"], n_heads=2, intermediate=64, tie_embeddings=False)
    wide = dict(example_config(), vocab=2**26)  # embed alone is 2^31 elements: past the int32 bound
    empty = dict(example_config(), intermediate=0)
    return [
        # dispatch: a wrong magic is not an archive, so the legacy JSON reader refuses it
        ("bad_magic_version", b"MOJOLEARN-SAMBA\x03\n" + good[17:], STACK + "checkpoint is not valid JSON"),
        ("empty_file", b"", STACK + "checkpoint is not valid JSON"),
        # 2-4: header length and digest
        ("magic_only", MAGIC, STREAM + "truncated header length"),
        ("short_header_length", MAGIC + b"\x01\x00\x00", STREAM + "truncated header length"),
        ("header_length_zero", stream_bytes(metadata, arrays, length=0), STREAM + "header length exceeds limit"),
        ("header_length_over_limit", stream_bytes(metadata, arrays, length=HEADER_LIMIT + 1),
         STREAM + "header length exceeds limit"),
        ("header_length_huge", stream_bytes(metadata, arrays, length=2**64 - 1),
         STREAM + "header length exceeds limit"),
        ("header_length_past_end", MAGIC + struct.pack("<Q", 5000) + header[:1000],
         STREAM + "header integrity mismatch"),
        ("header_length_off_by_one", stream_bytes(metadata, arrays, length=length + 1),
         STREAM + "header integrity mismatch"),
        ("header_digest_last_byte_flipped", _flip(good, 17 + 8 + length + 31), STREAM + "header integrity mismatch"),
        ("header_byte_flipped", _flip(good, 17 + 8 + 100), STREAM + "header integrity mismatch"),
        ("header_without_digest", good[:17 + 8 + length + 10], STREAM + "header integrity mismatch"),
        # 5: JSON (strict) and canonical spelling
        ("header_not_json", stream_bytes(metadata, arrays, header=b"this is not json"),
         STREAM + "header is not valid JSON"),
        ("header_duplicate_key", stream_bytes(metadata, arrays, header=_replace_once(
            header, b'"t":3}}', b'"t":3,"t":3}}')), STREAM + "header is not valid JSON"),
        ("header_nan_literal", stream_bytes(metadata, arrays, header=_replace_once(
            header, b'"max_norm":1.0', b'"max_norm":NaN')), STREAM + "header is not valid JSON"),
        ("header_non_canonical", stream_bytes(metadata, arrays, header=_pretty(stream_header(metadata, arrays))),
         STREAM + "header integrity mismatch"),
        ("header_unsorted_keys", stream_bytes(metadata, arrays, header=json.dumps(
            stream_header(metadata, arrays), separators=(",", ":")).encode("ascii")),
         STREAM + "header integrity mismatch"),
        # 6: envelope
        ("envelope_not_object", stream_bytes(metadata, arrays, header=b"[1,2,3]"), STREAM + "stream schema mismatch"),
        ("envelope_extra_key", stream_bytes(metadata, arrays, edit=_set("comment", "x")),
         STREAM + "stream schema mismatch"),
        ("envelope_wrong_schema", stream_bytes(metadata, arrays, edit=_set("schema", "mojolearn.samba-stream.v3")),
         STREAM + "stream schema mismatch"),
        # 7a: state schema/profile
        ("state_not_object", stream_bytes(metadata, arrays, edit=_set("state", [1])), STREAM + "state schema mismatch"),
        ("state_wrong_schema",
         stream_bytes(metadata, arrays, edit=_set("state", "schema", "mojolearn.samba-stack-state.v2")),
         STREAM + "state schema mismatch"),
        ("state_wrong_profile",
         stream_bytes(metadata, arrays, edit=_set("state", "profile", "mojolearn.samba-stack.fp16.v1")),
         STREAM + "state schema mismatch"),
        # 7b: config
        ("config_missing_key", stream_bytes(metadata, arrays, edit=_delete("state", "config", "dropout")),
         CONFIG + "from_dict is missing the key 'dropout'"),
        ("config_not_object", stream_bytes(metadata, arrays, edit=_set("state", "config", [256, 32])),
         CONFIG + "from_dict takes a dict with the ten config keys, not list"),
        ("config_mamba_width", _with_config(dict(example_config(), d_model=48, n_heads=3)),
         CONFIG + "a mamba3 layer needs d_model to be a multiple of 32 (Mamba3Block)"),
        ("config_unknown_kind", _with_config(dict(example_config(), layers=["mamba3", "mamba2"])),
         CONFIG + "layer kind 'mamba2'; the kinds are ('mamba3', 'attention')"),
        ("config_float_vocab", _with_config(dict(example_config(), vocab=256.0)),
         CONFIG + "vocab must be an integer, not float"),
        ("config_dropout_one", _with_config(dict(example_config(), dropout=1.0)), CONFIG + "dropout must be in [0, 1)"),
        # 7c-7e: registry
        ("registry_too_short", stream_bytes(metadata, arrays, edit=lambda e: e["state"]["registry"].pop()),
         STREAM + "registry length mismatch"),
        ("registry_not_list", stream_bytes(metadata, arrays, edit=_set("state", "registry", {})),
         STREAM + "registry length mismatch"),
        ("registry_untied_config", _with_config(untied), STREAM + "registry length mismatch"),
        ("registry_empty_tensor", _with_config(empty, registry=registry_entries(empty)),
         STREAM + "registry has an empty tensor"),
        ("registry_index_overflow", _with_config(wide, registry=registry_entries(wide)),
         STREAM + "registry mismatch or index overflow"),
        ("registry_size_incremented", stream_bytes(metadata, arrays, edit=_set("state", "registry", 0, "size", 8193)),
         STREAM + "registry mismatch or index overflow"),
        ("registry_renamed", stream_bytes(metadata, arrays, edit=_set("state", "registry", 1, "name",
                                                                      "layers.0.block_norm")),
         STREAM + "registry mismatch or index overflow"),
        ("registry_float_offset", stream_bytes(metadata, arrays, edit=_set("state", "registry", 0, "offset", 0.0)),
         STREAM + "registry mismatch or index overflow"),
        ("registry_extra_entry_key", stream_bytes(metadata, arrays, edit=_set("state", "registry", 3, "dtype", "<f4")),
         STREAM + "registry mismatch or index overflow"),
        # 7f: optimizer, RNG, mode, schedule containers
        ("t_negative", _with_state(t=-1), STREAM + "state metadata mismatch"),
        ("t_bool", _with_state(t=True), STREAM + "state metadata mismatch"),
        ("t_float", _with_state(t=3.0), STREAM + "state metadata mismatch"),
        ("t_missing", stream_bytes(metadata, arrays, edit=_delete("state", "t")), STREAM + "state metadata mismatch"),
        ("optimizer_kind_sgd", _with_state(optimizer=dict(default_optimizer(), kind="sgd")),
         STREAM + "state metadata mismatch"),
        ("optimizer_kind_capitalized", _with_state(optimizer=dict(default_optimizer(), kind="AdamW")),
         STREAM + "state metadata mismatch"),
        ("optimizer_not_object", _with_state(optimizer=["adamw"]), STREAM + "state metadata mismatch"),
        ("rng_not_object", _with_state(rng=[11, 7]), STREAM + "state metadata mismatch"),
        ("rng_missing", stream_bytes(metadata, arrays, edit=_delete("state", "rng")),
         STREAM + "state metadata mismatch"),
        ("numeric_mode_unknown", _with_state(numeric_mode="unknown"), STREAM + "state metadata mismatch"),
        ("schedule_not_object", _with_state(schedule="cosine"), STREAM + "state metadata mismatch"),
        # 7g-7h: array descriptors
        ("arrays_three", stream_bytes(metadata, arrays, edit=lambda e: e["arrays"].pop()),
         STREAM + "array registry mismatch"),
        ("arrays_not_list", stream_bytes(metadata, arrays, edit=_set("arrays", {})),
         STREAM + "array registry mismatch"),
        ("descriptor_nbytes_mismatch", stream_bytes(metadata, arrays, edit=_set("arrays", 1, "nbytes", 4 * n + 4)),
         STREAM + "array descriptor mismatch"),
        ("descriptor_shape_mismatch", stream_bytes(metadata, arrays, edit=_set("arrays", 0, "shape", [n - 1])),
         STREAM + "array descriptor mismatch"),
        ("descriptor_dtype_mismatch", stream_bytes(metadata, arrays, edit=_set("arrays", 3, "dtype", "<f4")),
         STREAM + "array descriptor mismatch"),
        ("descriptor_float_nbytes", stream_bytes(metadata, arrays, edit=_set("arrays", 2, "nbytes", float(4 * n))),
         STREAM + "array descriptor mismatch"),
        ("descriptor_uppercase_digest", stream_bytes(metadata, arrays, edit=lambda e: e["arrays"][0].update(
            sha256=e["arrays"][0]["sha256"].upper())), STREAM + "array descriptor mismatch"),
        ("descriptor_extra_key", stream_bytes(metadata, arrays, edit=_set("arrays", 0, "order", "C")),
         STREAM + "array descriptor mismatch"),
        ("descriptors_swapped",
         stream_bytes(metadata, arrays, edit=lambda e: e["arrays"].insert(0, e["arrays"].pop(1))),
         STREAM + "array descriptor mismatch"),
        # 8-10: exact size and array digests
        ("truncated_one_byte", good[:-1], STREAM + "truncated or trailing array data"),
        ("truncated_inside_header_digest", good[:body_at - 1], STREAM + "header integrity mismatch"),
        ("truncated_to_header", good[:body_at], STREAM + "truncated or trailing array data"),
        ("one_byte_appended", good + b"\x00", STREAM + "truncated or trailing array data"),
        ("first_parameter_byte_flipped", _flip(good, body_at), STREAM + "array integrity mismatch: parameters"),
        ("exp_avg_byte_flipped", _flip(good, body_at + 4 * n + 17), STREAM + "array integrity mismatch: exp_avg"),
        ("exp_avg_sq_byte_flipped", _flip(good, body_at + 8 * n), STREAM + "array integrity mismatch: exp_avg_sq"),
        ("last_file_byte_flipped", _flip(good, len(good) - 1), STREAM + "array integrity mismatch: buf_initialized"),
        # inference checks after the container: finite weights, numeric profile
        ("nan_parameter", stream_bytes(*_poisoned(offsets["layers.0.dt_bias"], 0x7FC00000)),
         INFERENCE + "layers.0.dt_bias is not finite"),
        ("infinite_parameter", stream_bytes(*_poisoned(offsets["norm_f.weight"] + 31, 0xFF800000)),
         INFERENCE + "norm_f.weight is not finite"),
        ("nan_in_untied_head", stream_bytes(*_poisoned(len(flat_parameters(untied, deterministic_weights(untied))) - 1,
                                                       0x7F800001, untied)),
         INFERENCE + "lm_head.weight is not finite"),
        ("numeric_profile_fixed15", stream_bytes(metadata, arrays, edit=_set("state", "numeric_profile", "fixed15_v1")),
         PROFILE_STATE + "was written under numeric profile 'fixed15_v1' and this object computes under 'fp32_v1'"),
        ("numeric_profile_int8", stream_bytes(metadata, arrays, edit=_set("state", "numeric_profile", "int8_v1")),
         PROFILE_STATE + "numeric_profile='int8_v1' is not offered"),
        ("numeric_profile_unknown", stream_bytes(metadata, arrays, edit=_set("state", "numeric_profile", "fp16_v1")),
         PROFILE_STATE + "numeric_profile='fp16_v1' is not a registered numeric profile; "
         "registered: fp32_v1, fixed15_v1"),
        ("numeric_profile_not_string", stream_bytes(metadata, arrays, edit=_set("state", "numeric_profile", 1)),
         PROFILE_STATE + "numeric_profile must be a profile name (a str), got int"),
    ]


def legacy_variants():
    """[(name, bytes, message)] of broken legacy JSON files."""
    metadata, arrays = build_state()
    good = legacy_bytes(metadata, arrays)
    payload = legacy_payload(metadata, arrays)
    n = arrays["parameters"].size
    pretty = _pretty(payload)
    pretty_envelope = ('{"payload":' + pretty.decode("ascii") + ',"payload_sha256":"%s","schema":"%s"}\n')
    return [
        ("legacy_truncated", good[:len(good) // 2], STACK + "checkpoint is not valid JSON"),
        ("legacy_trailing_garbage", good + b"{}", STACK + "checkpoint is not valid JSON"),
        ("legacy_duplicate_key", _replace_once(good, b'"t":3}', b'"t":3,"t":4}'),
         STACK + "checkpoint is not valid JSON"),
        ("legacy_infinity_literal", _replace_once(good, b'"max_norm":1.0', b'"max_norm":Infinity'),
         STACK + "checkpoint is not valid JSON"),
        ("legacy_not_object", b"[1,2,3]\n", STACK + "checkpoint schema mismatch"),
        ("legacy_wrong_schema",
         _replace_once(good, LEGACY_SCHEMA.encode(), b"mojolearn.samba-stack-json-checkpoint.v2"),
         STACK + "checkpoint schema mismatch"),
        ("legacy_extra_envelope_key", good[:-2] + b',"zzz":1}\n', STACK + "checkpoint schema mismatch"),
        ("legacy_wrong_digest", legacy_bytes(metadata, arrays, digest=hashlib.sha256(b"other").hexdigest()),
         STACK + "checkpoint integrity mismatch"),
        ("legacy_edited_without_rehash", legacy_bytes(metadata, arrays, edit=_set("t", 4), rehash=False),
         STACK + "checkpoint integrity mismatch"),
        # mojolearn re-encodes before hashing and would take this file; samebits hashes the raw bytes and
        # refuses a payload that is not its own canonical encoding (Open point 8.5)
        ("legacy_strict_non_canonical_payload",
         (pretty_envelope % (hashlib.sha256(canonical(payload)).hexdigest(), LEGACY_SCHEMA)).encode("ascii"),
         STACK + "checkpoint integrity mismatch"),
        ("legacy_non_canonical_payload_raw_hash",
         (pretty_envelope % (hashlib.sha256(pretty).hexdigest(), LEGACY_SCHEMA)).encode("ascii"),
         STACK + "checkpoint integrity mismatch"),
        ("legacy_missing_array", legacy_bytes(metadata, arrays, edit=_delete("exp_avg_sq")),
         STACK + "checkpoint payload has no tensor descriptor for exp_avg_sq"),
        ("legacy_dtype_mismatch", legacy_bytes(metadata, arrays, edit=_set("buf_initialized", "dtype", "<f4")),
         STACK + "checkpoint tensor dtype mismatch"),
        ("legacy_bad_hex", legacy_bytes(metadata, arrays, edit=lambda p: p["exp_avg"].update(
            hex="zz" + p["exp_avg"]["hex"][2:])), STACK + "checkpoint tensor exp_avg is not hexadecimal"),
        ("legacy_short_hex", legacy_bytes(metadata, arrays, edit=lambda p: p["parameters"].update(
            hex=p["parameters"]["hex"][:-8])),
         "samebits: %d bytes do not fill shape (%d,) of <f4 (%d bytes)" % (4 * n - 4, n, 4 * n)),
        ("legacy_state_schema", legacy_bytes(metadata, arrays, edit=_set("schema", "mojolearn.samba-stack-state.v0")),
         INFERENCE + "checkpoint schema/profile mismatch"),
        ("legacy_config_missing", legacy_bytes(metadata, arrays, edit=_delete("config")),
         CONFIG + "from_dict takes a dict with the ten config keys, not None"),
        ("legacy_registry_renamed", legacy_bytes(metadata, arrays, edit=_set("registry", 19, "name", "norm.weight")),
         INFERENCE + "checkpoint registry differs from its config's"),
        ("legacy_registry_shape", legacy_bytes(metadata, arrays, edit=_set("registry", 0, "shape", [32, 256])),
         INFERENCE + "checkpoint registry differs from its config's"),
        ("legacy_registry_short", legacy_bytes(metadata, arrays, edit=lambda p: p["registry"].pop()),
         INFERENCE + "checkpoint registry differs from its config's"),
        ("legacy_offset_past_end", legacy_bytes(metadata, arrays, edit=_set("registry", 19, "offset", n)),
         "samebits: 0 bytes do not fill shape (32,) of <f4 (128 bytes)"),
        ("legacy_nan_parameter", legacy_bytes(*_poisoned(8192 + 5, 0xFFC00000)),
         INFERENCE + "layers.0.block_norm.weight is not finite"),
        ("legacy_numeric_profile", legacy_bytes(metadata, arrays, edit=_set("numeric_profile", "fixed15_v1")),
         PROFILE_STATE + "was written under numeric profile 'fixed15_v1'"),
    ]


def broken_variants():
    """Every broken file of both formats: [(name, bytes, expected message)]."""
    return stream_variants() + legacy_variants()


# ------------------------------------------------------------------------------------ valid files

def _special_weights(cfg):
    weights = deterministic_weights(cfg)
    weights["embed.weight"][0, 0] = np.float32(1e-45)     # smallest subnormal
    weights["embed.weight"][0, 1] = np.float32(-0.0)
    weights["norm_f.weight"][3] = np.float32(-3.4028235e38)
    return weights


def _legacy_reversed_layout(cfg):
    """A legacy file whose flat parameters hold the tensors in reverse order, with offsets saying so:
    mojolearn's SambaInference slices by the stored offsets, and so does samebits."""
    metadata, arrays = build_state(cfg)
    weights = deterministic_weights(cfg)
    entries = registry_entries(cfg)
    offset, pieces = 0, []
    for entry in reversed(entries):
        entry["offset"] = offset
        pieces.append(weights[entry["name"]].reshape(-1))
        offset += entry["size"]
    metadata["registry"] = entries
    arrays = dict(arrays, parameters=np.concatenate(pieces))
    return legacy_bytes(metadata, arrays), weights


def valid_variants():
    """[(name, bytes, config dict, weights)] of files that must load with exactly these weights."""
    example = example_config()
    untied = config_dict(256, 32, ["mamba3", "attention"], n_heads=2, intermediate=64, tie_embeddings=False)
    mamba_only = config_dict(100, 64, ["mamba3", "mamba3"], norm_eps=1e-6)
    attention_only = config_dict(7, 24, ["attention", "attention", "attention"], n_heads=4, n_kv_heads=2,
                                 intermediate=40, dropout=0.1)
    explicit_head_dim = config_dict(50, 64, ["attention", "mamba3"], n_heads=2, head_dim=32, n_kv_heads=1,
                                    intermediate=96)
    metadata, arrays = build_state()
    upper = legacy_bytes(metadata, arrays, edit=lambda p: p["parameters"].update(hex=p["parameters"]["hex"].upper()))
    spaced = legacy_bytes(metadata, arrays, edit=lambda p: p["parameters"].update(
        hex=" ".join(p["parameters"]["hex"][i:i + 8] for i in range(0, len(p["parameters"]["hex"]), 8))))
    half = arrays["parameters"].size // 2
    two_d = legacy_bytes(metadata, arrays, edit=lambda p: p["parameters"].update(shape=[2, half]))
    reversed_bytes, reversed_weights = _legacy_reversed_layout(example)
    extra_config_key = stream_bytes(metadata, arrays, edit=_set("state", "config", "rope_theta", 10000.0))
    out = [
        ("example_stream", stream_bytes(metadata, arrays), example, deterministic_weights(example)),
        ("example_legacy", legacy_bytes(metadata, arrays), example, deterministic_weights(example)),
        ("legacy_uppercase_hex", upper, example, deterministic_weights(example)),
        ("legacy_spaced_hex", spaced, example, deterministic_weights(example)),
        ("legacy_two_dimensional_parameters", two_d, example, deterministic_weights(example)),
        ("legacy_reversed_layout", reversed_bytes, example, reversed_weights),
        ("stream_extra_config_key_ignored", extra_config_key, example, deterministic_weights(example)),
        ("stream_explicit_fp32_profile", stream_bytes(metadata, arrays, edit=_set("state", "numeric_profile", " fp32_v1 ")),
         example, deterministic_weights(example)),
        ("stream_null_numeric_profile", stream_bytes(metadata, arrays, edit=_set("state", "numeric_profile", None)),
         example, deterministic_weights(example)),
    ]
    for name, cfg, options in (
            ("untied", untied, {}),
            ("mamba_only", mamba_only, {"schedule": None, "numeric_mode": "fast"}),
            ("attention_only_gqa", attention_only, {"t": 2**70, "rng": {"counter": 2**32 - 1, "seed": 2**64 - 1}}),
            ("explicit_head_dim", explicit_head_dim, {"numeric_mode": "deterministic", "t": 0}),
            ("special_values", example, {})):
        weights = _special_weights(cfg) if name == "special_values" else deterministic_weights(cfg)
        state = build_state(cfg, weights, **options)
        out.append(("stream_" + name, stream_bytes(*state), cfg, weights))
        out.append(("legacy_" + name, legacy_bytes(*state), cfg, weights))
    return out


if __name__ == "__main__":
    # Self-check against docs/formats.md §3.8: the example header is 2,731 bytes and the file 417,228 bytes.
    metadata, arrays = build_state()
    header = canonical(stream_header(metadata, arrays))
    data = stream_bytes(metadata, arrays)
    print("header %d bytes, file %d bytes, sha256 %s" % (len(header), len(data), hashlib.sha256(data).hexdigest()))
    names = [name for name, _, _ in broken_variants()]
    assert len(names) == len(set(names))
    print("%d broken variants, %d valid variants" % (len(names), len(valid_variants())))
