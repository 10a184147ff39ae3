"""Test-only writer of SmallMLPTrainer checkpoint files, built from the format rules of docs/formats.md §4.

It is not mojolearn's writer: it spells the layout out from the spec (canonical JSON of the envelope plus one
newline, payload hashed over its canonical JSON, tensors as hex of little-endian float32/int32) so that the
reader under test can be checked against files produced independently of it. `broken_variants()` returns the
refusal table: each entry is a file that must be refused, with the message the reader must give.
"""
import hashlib
import json
import struct
from pathlib import Path

import numpy as np

from nested_edits import delete_key as _delete, set_key as _set

FILE_SCHEMA = "mojolearn.small-mlp-checkpoint.v1"
STATE_SCHEMA = "mojolearn.small-mlp-trainer.v1"
ARITHMETIC_PROFILE = "mojolearn.neural-training.fp32.v1"
FILE_LIMIT = 32768
NAMES = ("weight1", "bias1", "weight2", "bias2")
SHAPES = ((16, 8), (16,), (3, 16), (3,))
MOMENTS = 195
MAX_STEP = 2**31 - 1


def canonical(value):
    """docs/formats.md §3.12: the exact json.dumps arguments the format is defined by, as ASCII bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def round_f32(value):
    """One round-to-nearest-even to binary32 and back to a Python float."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def default_weights():
    """docs/goldens.md §5: each tensor is (arange(size) % 7 - 3) / 32 in float32, reshaped."""
    return {name: ((np.arange(int(np.prod(shape))) % 7 - 3) / 32).astype(np.float32).reshape(shape)
            for name, shape in zip(NAMES, SHAPES)}


def default_moments():
    m = ((np.arange(MOMENTS) % 5 - 2) / 64).astype(np.float32)
    v = ((np.arange(MOMENTS) % 3) / 128).astype(np.float32)
    flags = np.ones(4, dtype=np.int32)
    return m, v, flags


def default_config():
    """The trainer's defaults lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, float32-rounded."""
    return {"lr": round_f32(1e-3), "beta1": round_f32(0.9), "beta2": round_f32(0.999),
            "eps": round_f32(1e-8), "weight_decay": round_f32(0.01)}


def default_schedule():
    return {"batch_size": 32, "dataset": "synthetic-blobs-v1", "order": [0, 1, 2], "seed": 18446744073709551615}


def descriptor(array, dtype="<f4"):
    array = np.asarray(array)
    return {"dtype": dtype, "shape": list(array.shape),
            "hex": np.ascontiguousarray(array, dtype=dtype).tobytes().hex()}


def build_payload(weights=None, *, step=5, config=None, data_schedule=None, numeric_mode="identical",
                  m=None, v=None, flags=None):
    weights = default_weights() if weights is None else weights
    dm, dv, dflags = default_moments()
    return {
        "architecture": [8, 16, 3],
        "config": default_config() if config is None else config,
        "data_schedule": default_schedule() if data_schedule is None else data_schedule,
        "numeric_mode": numeric_mode,
        "optimizer": {"flags": descriptor(dflags if flags is None else flags, "<i4"), "kind": "AdamW",
                      "m": descriptor(dm if m is None else m), "step": step,
                      "v": descriptor(dv if v is None else v)},
        "parameter_order": list(NAMES),
        "schema": STATE_SCHEMA,
        "weights": {name: descriptor(np.asarray(weights[name], dtype=np.float32)) for name in NAMES},
    }


def build_envelope(payload, *, arithmetic_profile=None):
    envelope = {"schema": FILE_SCHEMA, "payload": payload,
                "payload_sha256": hashlib.sha256(canonical(payload)).hexdigest()}
    if arithmetic_profile is not None:
        envelope["arithmetic_profile"] = arithmetic_profile
    return envelope


def encode(envelope):
    return canonical(envelope) + b"\n"


def valid_bytes(weights=None, *, arithmetic_profile=None, **overrides):
    return encode(build_envelope(build_payload(weights, **overrides), arithmetic_profile=arithmetic_profile))


def write_valid(path, weights=None, **overrides):
    """Writes a valid checkpoint (default weights unless given) and returns its path. `overrides` are
    build_payload's keywords (step, config, data_schedule, numeric_mode, m, v, flags) plus
    arithmetic_profile for the optional envelope key."""
    data = valid_bytes(weights, **overrides)
    if len(data) > FILE_LIMIT:
        raise ValueError("test writer: checkpoint exceeds its size bound")
    path = Path(path)
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------------------------- variants

def _rehashed(mutate, *, arithmetic_profile=None):
    """A file whose payload was changed by `mutate(payload)` and then hashed honestly, so the refusal
    must come from the state checks rather than the integrity check."""
    payload = build_payload()
    mutate(payload)
    return encode(build_envelope(payload, arithmetic_profile=arithmetic_profile))


def _envelope_bytes(mutate):
    envelope = build_envelope(build_payload())
    mutate(envelope)
    return encode(envelope)


def _with_words(name, index, word, dtype="<f4"):
    """Payload mutation: set one 32-bit little-endian word of a tensor descriptor to `word`."""
    def mutate(payload):
        where = payload["weights"] if name in NAMES else payload["optimizer"]
        raw = bytearray(bytes.fromhex(where[name]["hex"]))
        raw[4 * index:4 * index + 4] = struct.pack("<I", word & 0xFFFFFFFF)
        where[name]["hex"] = raw.hex()
    return mutate


def _edit_hex(name, edit):
    """Payload mutation: replace a weight descriptor's hex string by edit(hex)."""
    def mutate(payload):
        payload["weights"][name]["hex"] = edit(payload["weights"][name]["hex"])
    return mutate


def _nested(depth):
    value = 0
    for _ in range(depth):
        value = {"k": value}
    return value


MLP = "MLPInference checkpoint "
TRAINER = "SmallMLPTrainer "


def broken_variants():
    """[(name, file bytes, expected message substring)] for every refusal class of docs/formats.md §4.3.
    The expected texts are the full messages (mojolearn's sentences). Names starting with "strict_" are
    files mojolearn's own reader lets through or refuses with another text (a BOM, NaN/Infinity literals,
    float overflow, a float in a shape list; docs/formats.md §3.13 and §8.4): samebits refuses them."""
    good = valid_bytes()
    text = good.decode("ascii")
    variants = [
        # 1. size bound
        ("oversize_padding", good + b" " * (FILE_LIMIT + 1 - len(good)), MLP + "exceeds its size bound"),
        ("oversize_braces", b"{" * 40000, MLP + "exceeds its size bound"),
        # 2. bounded JSON
        ("empty_file", b"", MLP + "is not valid bounded JSON"),
        ("not_json", b"this is not a checkpoint\n", MLP + "is not valid bounded JSON"),
        ("truncated", good[:len(good) // 2], MLP + "is not valid bounded JSON"),
        ("trailing_garbage", good + b"{}", MLP + "is not valid bounded JSON"),
        ("duplicate_envelope_key", ('{"schema":"x",' + text[1:]).encode("ascii"), MLP + "is not valid bounded JSON"),
        ("duplicate_schedule_key", _replace_once(good, b'"batch_size":32,', b'"batch_size":32,"batch_size":32,'),
         MLP + "is not valid bounded JSON"),
        ("strict_byte_order_mark", b"\xef\xbb\xbf" + good, MLP + "is not valid bounded JSON"),
        ("invalid_utf8", _replace_once(good, b"synthetic-blobs-v1", b"synthetic-blobs-\xff1"),
         MLP + "is not valid bounded JSON"),
        ("strict_nan_literal", _replace_once(good, b'"lr":0.0010000000474974513', b'"lr":NaN'),
         MLP + "is not valid bounded JSON"),
        ("strict_infinity_literal", _replace_once(good, b'"step":5', b'"step":Infinity'),
         MLP + "is not valid bounded JSON"),
        ("strict_float_overflow", _replace_once(good, b'"lr":0.0010000000474974513', b'"lr":1e999'),
         MLP + "is not valid bounded JSON"),
        ("raw_control_character", _replace_once(good, b"synthetic-blobs-v1", b"synthetic\tblobs-v1"),
         MLP + "is not valid bounded JSON"),
        ("nesting_too_deep", ('{"payload":' + '{"x":' * 2000 + "0" + "}" * 2000
                              + ',"payload_sha256":"0","schema":"' + FILE_SCHEMA + '"}\n').encode("ascii"),
         MLP + "is not valid bounded JSON"),
        # 3. envelope keys
        ("envelope_not_object", b"[1,2,3]\n", MLP + "envelope mismatch"),
        ("extra_envelope_key", _envelope_bytes(_set("comment", "hello")), MLP + "envelope mismatch"),
        ("missing_envelope_key", _envelope_bytes(_delete("payload_sha256")), MLP + "envelope mismatch"),
        # 4. schema
        ("wrong_envelope_schema", _envelope_bytes(_set("schema", "mojolearn.small-mlp-checkpoint.v2")),
         MLP + "schema mismatch"),
        ("envelope_schema_not_string", _envelope_bytes(_set("schema", 1)), MLP + "schema mismatch"),
        # 5. integrity
        ("wrong_payload_hash", _envelope_bytes(_set("payload_sha256", hashlib.sha256(b"other").hexdigest())),
         MLP + "integrity mismatch"),
        ("uppercase_payload_hash", _envelope_bytes(lambda e: e.update(payload_sha256=e["payload_sha256"].upper())),
         MLP + "integrity mismatch"),
        ("flipped_payload_byte", _flip_weight_hex_digit(good), MLP + "integrity mismatch"),
        # 6. arithmetic profile
        ("arithmetic_profile_mismatch",
         _rehashed(lambda p: None, arithmetic_profile="mojolearn.neural-training.fp16.v1"),
         MLP + "arithmetic profile mismatch"),
        ("arithmetic_profile_not_string", _envelope_bytes(_set("arithmetic_profile", 1)),
         MLP + "arithmetic profile mismatch"),
        # 7. payload decoding
        ("payload_not_object", encode(build_envelope([1, 2, 3])), TRAINER + "checkpoint payload must be an object"),
        ("missing_weights", _rehashed(_delete("weights")), TRAINER + "checkpoint state is incomplete"),
        ("missing_optimizer", _rehashed(_delete("optimizer")), TRAINER + "checkpoint state is incomplete"),
        ("optimizer_not_object", _rehashed(_set("optimizer", [1])), TRAINER + "checkpoint state is incomplete"),
        ("missing_moment_v", _rehashed(_delete("optimizer", "v")), TRAINER + "checkpoint state is incomplete"),
        ("weights_missing_bias2", _rehashed(_delete("weights", "bias2")),
         TRAINER + "checkpoint parameter registry mismatch"),
        ("weights_not_object", _rehashed(_set("weights", [])), TRAINER + "checkpoint parameter registry mismatch"),
        ("wrong_tensor_shape", _rehashed(_set("weights", "weight1", "shape", [8, 16])),
         TRAINER + "checkpoint tensor descriptor mismatch"),
        ("strict_float_tensor_shape", _rehashed(_set("weights", "bias1", "shape", [16.0])),
         TRAINER + "checkpoint tensor descriptor mismatch"),
        ("wrong_dtype", _rehashed(_set("weights", "bias1", "dtype", "<f8")),
         TRAINER + "checkpoint tensor descriptor mismatch"),
        ("flags_as_float", _rehashed(_set("optimizer", "flags", "dtype", "<f4")),
         TRAINER + "checkpoint tensor descriptor mismatch"),
        ("descriptor_extra_key", _rehashed(_set("weights", "weight2", "order", "C")),
         TRAINER + "checkpoint tensor descriptor mismatch"),
        ("hex_not_string", _rehashed(_set("weights", "bias2", "hex", [0, 0, 0])),
         TRAINER + "checkpoint tensor descriptor mismatch"),
        ("wrong_hex_length", _rehashed(_edit_hex("bias2", lambda h: h + "00")),
         TRAINER + "checkpoint tensor length mismatch"),
        ("bad_hex", _rehashed(_edit_hex("bias2", lambda h: "zz" + h[2:])),
         TRAINER + "checkpoint tensor is not hexadecimal"),
        ("non_ascii_hex", _rehashed(_edit_hex("bias2", lambda h: "\u00e9" + h[1:])),
         TRAINER + "checkpoint tensor is not hexadecimal"),
        ("hex_with_spaces", _rehashed(_edit_hex("bias2", lambda h: "  " + h[2:])),
         TRAINER + "checkpoint tensor byte count mismatch"),
        # 8. state validation
        ("unknown_payload_key", _rehashed(_set("comment", "x")), TRAINER + "state has missing or unknown fields"),
        ("missing_config", _rehashed(_delete("config")), TRAINER + "state has missing or unknown fields"),
        ("wrong_state_schema", _rehashed(_set("schema", "mojolearn.small-mlp-trainer.v2")),
         TRAINER + "state schema/architecture/mode/order mismatch"),
        ("wrong_architecture", _rehashed(_set("architecture", [8, 32, 3])),
         TRAINER + "state schema/architecture/mode/order mismatch"),
        ("wrong_numeric_mode", _rehashed(_set("numeric_mode", "fast")),
         TRAINER + "state schema/architecture/mode/order mismatch"),
        ("wrong_parameter_order", _rehashed(_set("parameter_order", ["bias1", "weight1", "weight2", "bias2"])),
         TRAINER + "state schema/architecture/mode/order mismatch"),
        ("nan_weight", _rehashed(_with_words("bias1", 3, 0x7FC00000)), TRAINER + "bias1 must be finite"),
        ("infinite_weight", _rehashed(_with_words("weight2", 47, 0xFF800000)), TRAINER + "weight2 must be finite"),
        ("config_extra_key", _rehashed(_set("config", "momentum", 0.5)),
         TRAINER + "state optimizer configuration mismatch"),
        ("config_bool", _rehashed(_set("config", "lr", True)), TRAINER + "lr must be a finite float32 scalar"),
        ("config_text", _rehashed(_set("config", "beta2", "fast")), TRAINER + "beta2 must be a scalar"),
        ("config_beyond_float32", _rehashed(_set("config", "eps", 1e39)), TRAINER + "eps must be finite float32"),
        ("config_zero_lr", _rehashed(_set("config", "lr", 0.0)),
         TRAINER + "requires lr > 0, eps > 0 and weight_decay >= 0"),
        ("config_negative_decay", _rehashed(_set("config", "weight_decay", -0.01)),
         TRAINER + "requires lr > 0, eps > 0 and weight_decay >= 0"),
        ("beta_one", _rehashed(_set("config", "beta1", 1.0)), TRAINER + "betas must remain in [0, 1) in float32"),
        ("beta_rounds_to_one", _rehashed(_set("config", "beta2", 0.99999999)),
         TRAINER + "betas must remain in [0, 1) in float32"),
        ("optimizer_kind", _rehashed(_set("optimizer", "kind", "adamw")), TRAINER + "state optimizer mismatch"),
        ("optimizer_extra_key", _rehashed(_set("optimizer", "lr", 0.001)), TRAINER + "state optimizer mismatch"),
        ("step_as_float", _rehashed(_set("optimizer", "step", 5.0)), TRAINER + "step must be an integer"),
        ("step_as_bool", _rehashed(_set("optimizer", "step", True)), TRAINER + "step must be an integer"),
        ("step_negative", _rehashed(_set("optimizer", "step", -1)), TRAINER + "step is outside its supported range"),
        ("step_too_large", _rehashed(_set("optimizer", "step", MAX_STEP + 1)),
         TRAINER + "step is outside its supported range"),
        ("nan_moment", _rehashed(_with_words("m", 100, 0x7FC00000)), TRAINER + "m must be finite"),
        ("negative_v", _rehashed(_with_words("v", 7, 0xBF800000)),
         TRAINER + "state requires nonnegative v and binary flags"),
        ("flag_two", _rehashed(_with_words("flags", 2, 2)), TRAINER + "state requires nonnegative v and binary flags"),
        ("flag_negative", _rehashed(_with_words("flags", 0, -1)),
         TRAINER + "state requires nonnegative v and binary flags"),
        ("schedule_empty", _rehashed(_set("data_schedule", {})),
         TRAINER + "data_schedule must be a nonempty JSON object"),
        ("schedule_not_object", _rehashed(_set("data_schedule", [1, 2])),
         TRAINER + "data_schedule must be a nonempty JSON object"),
        ("schedule_too_deep", _rehashed(_set("data_schedule", _nested(9))), TRAINER + "data_schedule is too complex"),
        ("schedule_too_many_nodes", _rehashed(_set("data_schedule", {"a": [[0] * 100, [0] * 30]})),
         TRAINER + "data_schedule is too complex"),
        ("schedule_long_list", _rehashed(_set("data_schedule", {"a": [0] * 129})),
         TRAINER + "data_schedule list is too large"),
        ("schedule_many_keys", _rehashed(_set("data_schedule", {"k%03d" % i: 0 for i in range(129)})),
         TRAINER + "data_schedule object is too large"),
        ("schedule_long_key", _rehashed(_set("data_schedule", {"k" * 2049: 0})),
         TRAINER + "data_schedule object is too large"),
        ("schedule_long_string", _rehashed(_set("data_schedule", {"s": "x" * 2049})),
         TRAINER + "data_schedule string is too large"),
        ("schedule_huge_integer", _rehashed(_set("data_schedule", {"n": 2**4096})),
         TRAINER + "data_schedule integer is too large"),
        ("schedule_over_2048_bytes", _rehashed(_set("data_schedule", {"a": "x" * 1100, "b": "y" * 1100})),
         TRAINER + "data_schedule exceeds 2048 bytes"),
    ]
    return variants


def _replace_once(data, old, new):
    """bytes.replace that insists the text to replace is there exactly once (a silent no-op would turn a
    broken variant into a valid file)."""
    if data.count(old) != 1:
        raise AssertionError("test writer: %r occurs %d times" % (old, data.count(old)))
    return data.replace(old, new)


def _flip_weight_hex_digit(good):
    """Changes one hex digit inside weight1 without re-hashing the payload."""
    marker = b'"weight1":{"dtype":"<f4","hex":"'
    at = good.index(marker) + len(marker) + 5
    digit = good[at:at + 1]
    return good[:at] + (b"0" if digit != b"0" else b"1") + good[at + 1:]


def valid_variants():
    """[(name, file bytes, weights dict)] of files that must load."""
    weights = default_weights()
    good = valid_bytes()
    rng = np.random.default_rng(20260915)
    random_weights = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in zip(NAMES, SHAPES)}
    subnormal = default_weights()
    subnormal["bias1"][0] = np.float32(1e-45)
    subnormal["weight2"][1, 2] = np.float32(-1e-40)
    subnormal["bias2"][2] = np.float32(-0.0)
    pretty_payload = build_payload()
    pretty = json.dumps(build_envelope(pretty_payload), indent=2, sort_keys=False).encode("ascii") + b"\n"
    return [
        ("default", good, weights),
        ("with_arithmetic_profile", valid_bytes(arithmetic_profile=ARITHMETIC_PROFILE), weights),
        ("padded_to_size_bound", good + b" " * (FILE_LIMIT - len(good)), weights),
        ("random_weights", valid_bytes(random_weights), random_weights),
        ("subnormal_and_negative_zero_weights", valid_bytes(subnormal), subnormal),
        ("step_zero_flags_zero", valid_bytes(step=0, flags=np.zeros(4, dtype=np.int32)), weights),
        ("step_max", valid_bytes(step=MAX_STEP), weights),
        ("integer_weight_decay", valid_bytes(config={**default_config(), "weight_decay": 0}), weights),
        ("schedule_at_bounds", valid_bytes(data_schedule=_nested(8)), weights),
        # Whitespace and key order differ from canonical; the hash is over the canonical re-encoding.
        ("non_canonical_layout", pretty, weights),
    ]


if __name__ == "__main__":
    # Self-check of the writer: the default file's payload hash matches its canonical payload, the file
    # is canonical, and every variant is within the size rules where it should be.
    data = valid_bytes()
    envelope = json.loads(data)
    assert hashlib.sha256(canonical(envelope["payload"])).hexdigest() == envelope["payload_sha256"]
    assert canonical(envelope) + b"\n" == data
    assert len(data) <= FILE_LIMIT
    names = [name for name, _, _ in broken_variants()]
    assert len(names) == len(set(names)) >= 15
    print("default file: %d bytes, sha256 %s" % (len(data), hashlib.sha256(data).hexdigest()))
    print("payload_sha256", envelope["payload_sha256"])
    print("%d broken variants, %d valid variants" % (len(names), len(valid_variants())))
