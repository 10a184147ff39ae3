#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses under fuzz/corpus/<harness>/.

Checkpoint seeds come from the test writers (tests/python/samba_checkpoint_writer.py and
mlp_checkpoint_writer.py): valid files and the hostile ones the tests use, over tiny configs so the whole
corpus stays near 1 MB. The binary harnesses (lowbit, weights, state) read a FuzzedDataProvider, which
takes its integers from the end of the input, one byte for each small range: a run of 0xFF bytes there
picks the usual branch everywhere (right names, unperturbed shapes, no poison), so `selector + 0xFF...`
seeds build valid models. Files named regression_* (reproducers of fixed bugs) are left in place.
Run from anywhere: python3 fuzz/make_corpus.py
"""
import hashlib
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))

import mlp_checkpoint_writer as mlp  # noqa: E402
import samba_checkpoint_writer as samba  # noqa: E402
from gguf_layout import gguf_bytes  # noqa: E402

CORPUS = ROOT / "fuzz" / "corpus"

# Two attention layers of width 4: 148 parameters, files of a few KB.
TINY = samba.config_dict(5, 4, ["attention", "attention"], n_heads=2, intermediate=4)
# The smallest stacks with a Mamba-3 layer (d_model 32): about 250 KB (v2) and 400 KB (legacy).
MAMBA_ATTENTION = samba.config_dict(3, 32, ["mamba3", "attention"], n_heads=2, intermediate=4)
MAMBA_ONLY = samba.config_dict(2, 32, ["mamba3"], tie_embeddings=False)


def _tiny_state(**options):
    return samba.build_state(TINY, **options)


def stream_seeds():
    """(name, bytes): valid v2 archives and the refusal classes of the writer's stream table, over TINY."""
    samba.example_config = lambda: dict(TINY)  # the writer's helpers default to its example config
    metadata, arrays = _tiny_state()
    good = samba.stream_bytes(metadata, arrays)
    header = samba.canonical(samba.stream_header(metadata, arrays))
    length = len(header)
    body_at = 17 + 8 + length + 32
    n = arrays["parameters"].size
    untied = dict(TINY, tie_embeddings=False)
    wide = dict(TINY, vocab=2**30)
    edit = lambda *a: samba.stream_bytes(metadata, arrays, edit=a[0])  # noqa: E731
    set_ = samba._set
    delete = samba._delete
    return [
        ("valid_tiny", good),
        ("valid_untied", samba.stream_bytes(*samba.build_state(untied))),
        ("valid_mamba_attention", samba.stream_bytes(*samba.build_state(MAMBA_ATTENTION))),
        ("valid_null_profile", edit(set_("state", "numeric_profile", None))),
        ("valid_extra_config_key", edit(set_("state", "config", "rope_theta", 10000.0))),
        ("bad_magic_version", b"MOJOLEARN-SAMBA\x03\n" + good[17:]),
        ("magic_only", samba.MAGIC),
        ("header_length_zero", samba.stream_bytes(metadata, arrays, length=0)),
        ("header_length_over_limit", samba.stream_bytes(metadata, arrays, length=samba.HEADER_LIMIT + 1)),
        ("header_length_huge", samba.stream_bytes(metadata, arrays, length=2**64 - 1)),
        ("header_length_off_by_one", samba.stream_bytes(metadata, arrays, length=length + 1)),
        ("header_digest_flipped", samba._flip(good, body_at - 1)),
        ("header_not_json", samba.stream_bytes(metadata, arrays, header=b"this is not json")),
        ("header_nan_literal", samba.stream_bytes(metadata, arrays, header=samba._replace_once(
            header, b'"max_norm":1.0', b'"max_norm":NaN'))),
        ("header_pretty", samba.stream_bytes(metadata, arrays, header=samba._pretty(
            samba.stream_header(metadata, arrays)))),
        ("envelope_not_object", samba.stream_bytes(metadata, arrays, header=b"[1,2,3]")),
        ("envelope_extra_key", edit(set_("comment", "x"))),
        ("state_wrong_profile", edit(set_("state", "profile", "mojolearn.samba-stack.fp16.v1"))),
        ("config_missing_key", edit(delete("state", "config", "dropout"))),
        ("config_unknown_kind", edit(set_("state", "config", "layers", ["attention", "mamba2"]))),
        ("config_float_vocab", edit(set_("state", "config", "vocab", 5.0))),
        ("config_huge_vocab", edit(set_("state", "config", "vocab", 2**70))),
        ("config_dropout_one", edit(set_("state", "config", "dropout", 1.0))),
        ("config_odd_head_dim", edit(set_("state", "config", "head_dim", 3))),
        ("registry_too_short", edit(lambda e: e["state"]["registry"].pop())),
        ("registry_index_overflow", samba._with_config(wide, registry=samba.registry_entries(wide))),
        ("registry_size_incremented", edit(set_("state", "registry", 0, "size", 21))),
        ("registry_float_offset", edit(set_("state", "registry", 0, "offset", 0.0))),
        ("t_negative", samba._with_state(t=-1)),
        ("optimizer_not_object", samba._with_state(optimizer=["adamw"])),
        ("numeric_mode_unknown", samba._with_state(numeric_mode="unknown")),
        ("arrays_three", edit(lambda e: e["arrays"].pop())),
        ("descriptor_nbytes_mismatch", edit(set_("arrays", 1, "nbytes", 4 * n + 4))),
        ("descriptor_huge_shape", edit(set_("arrays", 0, "shape", [2**62]))),
        ("descriptors_swapped", edit(lambda e: e["arrays"].insert(0, e["arrays"].pop(1)))),
        ("truncated_one_byte", good[:-1]),
        ("truncated_to_header", good[:body_at]),
        ("one_byte_appended", good + b"\x00"),
        ("parameter_byte_flipped", samba._flip(good, body_at)),
        ("last_byte_flipped", samba._flip(good, len(good) - 1)),
        ("nan_parameter", samba.stream_bytes(*samba._poisoned(3, 0x7FC00000, TINY))),
        ("infinite_parameter", samba.stream_bytes(*samba._poisoned(n - 1, 0xFF800000, TINY))),
        ("numeric_profile_fixed15", edit(set_("state", "numeric_profile", "fixed15_v1"))),
        ("numeric_profile_not_string", edit(set_("state", "numeric_profile", 1))),
    ]


def legacy_seeds():
    """(name, bytes): valid legacy files and the refusal classes of the writer's legacy table, over TINY."""
    samba.example_config = lambda: dict(TINY)
    metadata, arrays = _tiny_state()
    good = samba.legacy_bytes(metadata, arrays)
    n = arrays["parameters"].size
    set_ = samba._set
    legacy = lambda e, **k: samba.legacy_bytes(metadata, arrays, edit=e, **k)  # noqa: E731
    reversed_bytes, _ = samba._legacy_reversed_layout(TINY)
    return [
        ("valid_tiny", good),
        ("valid_mamba_only", samba.legacy_bytes(*samba.build_state(MAMBA_ONLY))),
        ("valid_uppercase_hex", legacy(lambda p: p["parameters"].update(hex=p["parameters"]["hex"].upper()))),
        ("valid_two_dimensional", legacy(lambda p: p["parameters"].update(shape=[4, n // 4]))),
        ("valid_reversed_layout", reversed_bytes),
        ("truncated", good[:len(good) // 2]),
        ("trailing_garbage", good + b"{}"),
        ("duplicate_key", samba._replace_once(good, b'"t":3}', b'"t":3,"t":4}')),
        ("not_object", b"[1,2,3]\n"),
        ("extra_envelope_key", good[:-2] + b',"zzz":1}\n'),
        ("wrong_digest", samba.legacy_bytes(metadata, arrays, digest=hashlib.sha256(b"other").hexdigest())),
        ("edited_without_rehash", legacy(set_("t", 4), rehash=False)),
        ("missing_array", legacy(samba._delete("exp_avg_sq"))),
        ("dtype_mismatch", legacy(set_("buf_initialized", "dtype", "<f4"))),
        ("bad_hex", legacy(lambda p: p["exp_avg"].update(hex="zz" + p["exp_avg"]["hex"][2:]))),
        ("short_hex", legacy(lambda p: p["parameters"].update(hex=p["parameters"]["hex"][:-8]))),
        ("huge_shape", legacy(set_("parameters", "shape", [2**40, 2**40]))),
        ("negative_shape", legacy(set_("parameters", "shape", [-1]))),
        ("state_schema", legacy(set_("schema", "mojolearn.samba-stack-state.v0"))),
        ("config_missing", legacy(samba._delete("config"))),
        ("registry_renamed", legacy(set_("registry", 19, "name", "norm.weight"))),
        ("offset_past_end", legacy(set_("registry", 19, "offset", n))),
        ("offset_huge", legacy(set_("registry", 0, "offset", 2**63 - 1))),
        ("size_negative", legacy(set_("registry", 0, "size", -4))),
        ("nan_parameter", samba.legacy_bytes(*samba._poisoned(7, 0xFFC00000, TINY))),
        ("numeric_profile", legacy(set_("numeric_profile", "fixed15_v1"))),
    ]


def mlp_seeds():
    seeds = [("valid_" + name, data) for name, data, _ in mlp.valid_variants()]
    seeds += [("refused_" + name, data) for name, data, _ in mlp.broken_variants() if len(data) <= 40000]
    return seeds


def json_seeds():
    """Documents for the JSON harness: edge cases of the strict parser and real checkpoint headers."""
    metadata, arrays = samba.build_state(TINY)
    docs = [
        b"{}", b"[]", b"null", b"true", b"0", b"-0", b"-0.0", b"1e400", b"1E-400", b"123456789012345678901234567890",
        b"9" * 4300, b"9" * 4301, b"1.5e308", b"5e-324", b"0.1", b"[1,2.5,-3e10,\"x\"]",
        b'"\\ud800"', b'"\\ud83d\\ude00"', b'"\\u0000\\n\\t\\"\\\\/"', "\"h\u00e9\u20ac\U0001F600\"".encode("utf-8"),
        b'{"a":1,"a":2}', b'{"b":1,"a":[{"c":null}]}', b"[" * 512 + b"]" * 512, b"[" * 513 + b"]" * 513,
        b"\xef\xbb\xbf{}", b'"\xc0\xaf"', b'"\xed\xa0\x80"', b"NaN", b"Infinity", b"[1,]", b"{\"a\" 1}",
        b" \t\r\n[ 1 , 2 ] \n", b"01", b"1.", b".5", b"-", b"\"\x01\"",
        samba.canonical(samba.stream_header(metadata, arrays)),
        mlp.canonical(mlp.build_envelope(mlp.build_payload())),
    ]
    return [("doc_%02d" % i, d) for i, d in enumerate(docs)]


def provider_seeds(selectors, length):
    """FuzzedDataProvider inputs: each selector byte last (read first), then `length` bytes of one filler."""
    seeds = []
    for selector in selectors:
        for filler in (0xFF, 0x01, 0x7F):
            seeds.append(("select_%d_fill_%02x" % (selector, filler), bytes([filler]) * length + bytes([selector])))
    return seeds


def lowbit_seeds():
    seeds = provider_seeds([0, 1], 16384)
    # A 4 x 4 int8 matrix read from an ordinary stream: codes, exponents and shape from the tail.
    seeds.append(("int8_small", bytes(range(256)) * 8 + struct.pack("<4B", 3, 4, 4, 1)))
    return seeds


def safetensors_file(tensors, extra=b""):
    """A .safetensors file as writers lay it out: names sorted, compact JSON padded to 8, payloads in order."""
    header, data, entries = [], b"", sorted(tensors.items())
    for name, (dtype, shape, payload) in entries:
        header.append('"%s":{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}'
                      % (name, dtype, json.dumps(shape, separators=(",", ":")), len(data), len(data) + len(payload)))
        data += payload
    text = (b"{" + extra + (b"," if extra and header else b"") + ",".join(header).encode() + b"}")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    valid = safetensors_file({
        "a.f32": ("F32", [2, 2], f32), "b.bf16": ("BF16", [2], b"\x80\x3f\x01\x80"),
        "c.f16": ("F16", [2], b"\x00\x3c\x01\x00"), "d.i32": ("I32", [1], b"\x07\0\0\0"),
        "e.i64": ("I64", [], b"\xff" * 8), "f.f64": ("F64", [1], b"\0" * 8), "g.empty": ("F32", [0, 3], b""),
    }, extra=b'"__metadata__":{"format":"pt"}')
    seeds = [
        ("valid", valid),
        ("metadata_only", safetensors_file({}, extra=b'"__metadata__":{"x":NaN}')),
        ("short", b"\x07\0\0\0\0\0\0"),
        ("huge_header", struct.pack("<Q", 104857601) + b"{}"),
        ("truncated", struct.pack("<Q", 64) + b"{}"),
        ("size_mismatch", safetensors_file({"t": ("F32", [3], f32[:8])})),
        ("offsets_outside", struct.pack("<Q", 56) + b'{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}'),
        ("duplicate_key", safetensors_file({"t": ("F32", [1], f32[:4])}, extra=b'"t":{"dtype":"I32","shape":[],'
                                                                                 b'"data_offsets":[0,4]}')),
    ]
    return seeds


def tokenizer_seeds():
    """fuzz_tokenizer: selector 0 + a tokenizer.json (valid and refused), selectors 1-4 + texts."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 256
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(extra)
            extra += 1
    vocab = {table[b]: b for b in range(256)}
    vocab.update({"th": 256, "the": 257})
    flags = {"normalized": False, "special": True, "lstrip": False, "rstrip": False, "single_word": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    doc = {"added_tokens": [dict(flags, id=258, content="<s>")],
           "normalizer": None, "pre_tokenizer": byte_level,
           "post_processor": None, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": vocab, "merges": ["t h", "th e"]}}
    docs = [doc, dict(doc, normalizer={"type": "NFC"}),
            dict(doc, pre_tokenizer={"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": False},
                {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": True},
                dict(byte_level, use_regex=True)]}),
            dict(doc, model=dict(doc["model"], type="Unigram")), dict(doc, post_processor={"type": "RobertaProcessing"})]
    seeds = [("json_%d" % i, b"\x00" + json.dumps(d).encode()) for i, d in enumerate(docs)]
    texts = [b"The theme of the 12 caf\xc3\xa9s", b"<s>hello<s> <x> don't IT'S", b"a\xffb\xc3\xe2\x82 \xf0\x9f\x98\x80",
             "e\u0301 \u1100\u1161 \u3000 \u2028x 123456 \u0661\u0662".encode(), b"  \r\n\t  end  "]
    for selector in range(1, 5):
        seeds += [("text_%d_%d" % (selector, i), bytes([selector]) + t) for i, t in enumerate(texts)]
    return seeds


def hf_config_seeds():
    """config.json documents of every family (transformers 4.x and 5.x spellings) and near misses."""
    llama = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 48, "num_hidden_layers": 2, "vocab_size": 64, "rms_norm_eps": 1e-05,
             "tie_word_embeddings": True}
    docs = {
        "llama": llama,
        "llama3_scaling": dict(llama, rope_theta=500000.0, attention_bias=True, mlp_bias=True,
                               rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
        "mistral": dict(llama, model_type="mistral", sliding_window=4096),
        "qwen2_window": dict(llama, model_type="qwen2", sliding_window=4, use_sliding_window=True,
                             max_window_layers=1),
        "qwen3_5x": dict(llama, model_type="qwen3", head_dim=8, layer_types=["sliding_attention", "full_attention"],
                         rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6,
                                          "partial_rotary_factor": 0.5}),
        "phi3": dict(llama, model_type="phi3", partial_rotary_factor=0.75, original_max_position_embeddings=4096),
        "mixtral": dict(llama, model_type="mixtral", num_local_experts=8),
        "huge_layers": dict(llama, num_hidden_layers=2147483647),
        "mamba": {"model_type": "mamba", "hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 64,
                  "time_step_rank": "auto", "layer_norm_epsilon": 1e-05},
    }
    seeds = [(name, json.dumps(doc).encode()) for name, doc in docs.items()]
    seeds.append(("mamba2_inf", b'{"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 1, '
                                b'"vocab_size": 8, "num_heads": 2, "time_step_limit": [0.0, Infinity]}'))
    seeds.append(("mamba2_5x_inf", b'{"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 1, '
                                   b'"vocab_size": 8, "time_step_limit": [0.0, {"__float__": "Infinity"}]}'))
    return seeds


def gguf_seeds():
    u32 = lambda v: struct.pack("<I", v)  # noqa: E731
    kvs = [(b"general.architecture", 8, struct.pack("<Q", 5) + b"llama"), (b"general.quantization_version", 4, u32(2)),
           (b"x.ints", 9, u32(5) + struct.pack("<Q", 2) + struct.pack("<ii", -1, 7)),
           (b"x.strs", 9, u32(8) + struct.pack("<Q", 1) + struct.pack("<Q", 3) + b"a b"),
           (b"x.bool", 7, b"\1"), (b"x.f64", 12, struct.pack("<d", 0.1))]
    q4k = struct.pack("<ee", 0.5, -0.25) + bytes(range(12)) + bytes((i * 37) & 255 for i in range(128))
    q6k = bytes((i * 11) & 255 for i in range(208)) + struct.pack("<e", 0.125)
    tensors = [(b"a.f32", [2, 2], 0, struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)),
               (b"b.f16", [2], 1, b"\x00\x3c\x01\x80"), (b"c.bf16", [2], 30, b"\x80\x3f\x01\x80"),
               (b"d.q4_0", [32], 2, struct.pack("<e", -1.5) + bytes(range(16))),
               (b"e.q8_0", [32, 1], 8, struct.pack("<e", 2.0) + bytes(range(32))),
               (b"f.q4_k", [256], 12, q4k), (b"g.q6_k", [256], 14, q6k)]
    valid = gguf_bytes(kvs, tensors)
    return [
        ("valid", valid),
        ("valid_v2", gguf_bytes(kvs, tensors, version=2)),
        ("aligned_8", gguf_bytes(kvs + [(b"general.alignment", 4, u32(8))], tensors, alignment=8)),
        ("no_tensors", gguf_bytes(kvs, [])),
        ("big_endian", b"GGUF" + struct.pack(">IQQ", 3, 0, 0)),
        ("nested_array", gguf_bytes([(b"k", 9, u32(9) + struct.pack("<Q", 0))], [])),
        ("iq2_xxs", gguf_bytes(kvs, [(b"t", [256], 16, bytes(66))])),
        ("nan_scale", gguf_bytes(kvs, [(b"t", [32], 2, b"\x00\x7e" + bytes(16))])),
        ("truncated", valid[:len(valid) // 2]),
    ]


def gguf_model_seeds():
    """Tiny GGUF models with a tokenizer: llama (tied, Q/K permuted rows), phi3 (fused), a mamba (refused)."""
    u32 = lambda v: struct.pack("<I", v)  # noqa: E731
    f32 = lambda v: struct.pack("<f", v)  # noqa: E731
    text = lambda t: struct.pack("<Q", len(t)) + t  # noqa: E731
    strings = lambda items: u32(8) + struct.pack("<Q", len(items)) + b"".join(text(i) for i in items)  # noqa: E731
    tokens = [b"a", b"b", b"ab", b"\xc4\xa0", b"1", b"2", b"<|s|>"]
    tokenizer = [(b"tokenizer.ggml.model", 8, text(b"gpt2")), (b"tokenizer.ggml.pre", 8, text(b"smollm")),
                 (b"tokenizer.ggml.tokens", 9, strings(tokens)),
                 (b"tokenizer.ggml.token_type", 9, u32(5) + struct.pack("<Q", 7) + struct.pack("<7i", 1, 1, 1, 1, 1, 1, 3)),
                 (b"tokenizer.ggml.merges", 9, strings([b"a b"])), (b"tokenizer.ggml.bos_token_id", 4, u32(6)),
                 (b"tokenizer.ggml.eos_token_id", 4, u32(6)), (b"tokenizer.ggml.add_bos_token", 7, b"\1"),
                 (b"tokenizer.chat_template", 8, text(b"{{ messages }}"))]

    def model(arch, layer):
        a = arch.encode()
        kvs = [(b"general.architecture", 8, text(a))] + [
            (a + b"." + k, 4, u32(v)) for k, v in ((b"context_length", 16), (b"embedding_length", 8), (b"block_count", 1),
                                                    (b"feed_forward_length", 8), (b"attention.head_count", 2),
                                                    (b"attention.head_count_kv", 1))]
        kvs.append((a + b".attention.layer_norm_rms_epsilon", 6, f32(1e-5)))
        ts = [(b"token_embd.weight", [8, 7], 0, struct.pack("<56f", *[(i % 9 - 4) / 8 for i in range(56)])),
              (b"output_norm.weight", [8], 0, struct.pack("<8f", *[1.0] * 8))]
        for name, ne in layer:
            n = ne[0] * (ne[1] if len(ne) > 1 else 1)
            ts.append((b"blk.0." + name, ne, 0, struct.pack("<%df" % n, *[((i * 7) % 11 - 5) / 16 for i in range(n)])))
        return gguf_bytes(kvs + tokenizer, ts)

    norms = [(b"attn_norm.weight", [8]), (b"ffn_norm.weight", [8])]
    llama = norms + [(b"attn_q.weight", [8, 8]), (b"attn_k.weight", [8, 4]), (b"attn_v.weight", [8, 4]),
                     (b"attn_output.weight", [8, 8]), (b"ffn_gate.weight", [8, 8]), (b"ffn_up.weight", [8, 8]),
                     (b"ffn_down.weight", [8, 8])]
    phi3 = norms + [(b"attn_qkv.weight", [8, 16]), (b"attn_output.weight", [8, 8]), (b"ffn_up.weight", [8, 16]),
                    (b"ffn_down.weight", [8, 8])]
    return [("llama", model("llama", llama)), ("phi3", model("phi3", phi3)), ("mamba", model("mamba", norms)),
            ("llama_missing", model("llama", llama[:-1]))]


def file_kind_seeds():
    """One file of each kind file-kind detection tells apart, and near misses."""
    return [("empty", b""), ("text", b"In the beginning\n"), ("binary", b"\x00\x01\x02"),
            ("gguf", b"GGUF\x03\x00\x00\x00"), ("samba_archive", b"MOJOLEARN-SAMBA\x02\n{}"),
            ("safetensors", struct.pack("<Q", 2) + b"{}"), ("json", b'  {"a": 1}'),
            ("samba_json", b'{"x":1,"schema":"mojolearn.samba-stack-json-checkpoint.v1"}'),
            ("mlp", b'{"payload":{"architecture":[8,16,3]}}'), ("almost_gguf", b"GGU")]


def state_file(kind, entries, fingerprint=b"0" * 64):
    """A saved state (docs/formats.md §9): header, entries (name, counter int or (shape, float list)), SHA-256."""
    body = struct.pack("<I", len(entries))
    for name, value in entries:
        body += struct.pack("<H", len(name)) + name.encode()
        if isinstance(value, int):
            body += struct.pack("<Bq", 0, value)
        else:
            shape, floats = value
            body += struct.pack("<BB", 1, len(shape)) + struct.pack("<%dq" % len(shape), *shape)
            body += struct.pack("<%df" % len(floats), *floats)
    head = b"SBSTATE\n" + struct.pack("<II", 2, kind) + fingerprint + struct.pack("<Q", len(body))
    return head + body + hashlib.sha256(head + body).digest()


def _zeros(shape):
    count = 1
    for extent in shape:
        count *= extent
    return (shape, [0.0] * count)


def _kv(prefix, batch, n_kv, head_dim, max_tokens, window, cached):
    shape = [batch, n_kv, window or max_tokens, head_dim]
    ramp = [0.25 * (i % 7) for i in range(batch * n_kv * (window or max_tokens) * head_dim)]
    return [(prefix + "batch", batch), (prefix + "n_kv_heads", n_kv), (prefix + "head_dim", head_dim),
            (prefix + "max_tokens", max_tokens), (prefix + "window", window), (prefix + "cached_tokens", cached),
            (prefix + "k_cache", (shape, ramp)), (prefix + "v_cache", (shape, ramp))]


def _mamba3(prefix, batch, heads, buffered):
    shapes = [("theta", [batch, heads, 32]), ("h", [batch, heads, 64, 128]), ("buffer_qrot", [batch, 64, heads, 128]),
              ("buffer_krot", [batch, 64, heads, 128]), ("buffer_v", [batch, 64, heads, 64]),
              ("buffer_dt", [batch, 64, heads]), ("buffer_sig", [batch, 64, heads]), ("buffer_adt", [batch, 64, heads]),
              ("pending_k", [batch, heads, 128]), ("pending_v", [batch, heads, 64])]
    return ([(prefix + "batch", batch), (prefix + "buffered_tokens", buffered), (prefix + "pending", 0)]
            + [(prefix + name, _zeros(shape)) for name, shape in shapes])


def state_file_seeds():
    """fuzz_state_file: a selector byte (0 full KV, 1 windowed KV, 2 Mamba-1, 3 Mamba-2, 4 Mamba-3, 5 Samba)
    and a file for that tiny model, its fingerprint zeros (the harness retries with the honest one). No
    Mamba-2 seed: its open-chunk buffers alone are 330 KB; the other seeds' containers reach its reader."""
    mamba1 = [("batch", 1), ("conv_window", _zeros([1, 4, 4])), ("h", _zeros([1, 4, 16]))]
    samba_stack = ([("batch", 1), ("max_tokens", 3), ("layers", 2)] + _mamba3("layer.0.", 1, 1, 2)
                   + _kv("layer.1.", 1, 2, 16, 3, 0, 2))
    return [("full", b"\x00" + state_file(1, _kv("", 2, 1, 2, 4, 0, 3))),
            ("windowed", b"\x01" + state_file(1, _kv("", 1, 1, 2, 9, 2, 5))),
            ("mamba1", b"\x02" + state_file(2, mamba1)),
            ("mamba3", b"\x04" + state_file(4, _mamba3("", 1, 1, 1))),
            ("samba", b"\x05" + state_file(5, samba_stack)),
            ("wrong_kind", b"\x00" + state_file(2, mamba1)),
            ("truncated", b"\x02" + state_file(2, mamba1)[:-40]),
            ("short", b"\x00SBSTATE\n")]


def write(name, seeds):
    # Generated seeds are rewritten; reproducers of fixed bugs (regression_*) are committed by hand and kept.
    target = CORPUS / name
    target.mkdir(parents=True, exist_ok=True)
    for old in target.iterdir():
        if not old.name.startswith("regression_"):
            old.unlink()
    for seed_name, data in seeds:
        (target / seed_name).write_bytes(data)
    return sum(len(d) for _, d in seeds), len(seeds)


def chat_template_seeds():
    """fuzz_chat_template: selector 0 + a tokenizer_config.json, selector 1 + a template of each family."""
    configs = {
        "config_string": {"chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                                           "<|im_end|>\n{% endfor %}"},
        "config_list": {"chat_template": [{"name": "tool_use", "template": "x"},
                                          {"name": "default", "template": "<|user|>"}]},
        "config_bad": {"chat_template": 7},
    }
    seeds = [(name, b"\x00" + json.dumps(doc).encode()) for name, doc in configs.items()]
    seeds.append(("chatml", b"\x01{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                            b"{{ '<|im_start|>system\\nYou are kind.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
                            b"message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                            b"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"))
    seeds.append(("llama3", b"\x01{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}"
                            b"<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>{% endfor %}"))
    seeds.append(("phi3", b"\x01{% for m in messages %}<|user|><|assistant|><|end|>{% endfor %}{{ eos_token }}"))
    return seeds


def main():
    total = 0
    for name, seeds in (
            ("samba_stream", stream_seeds()),
            ("samba_legacy", legacy_seeds()),
            ("mlp_checkpoint", mlp_seeds()),
            ("json", json_seeds()),
            ("lowbit", lowbit_seeds()),
            ("weights", provider_seeds(range(6), 1024)),
            ("state", provider_seeds(range(8), 1024)),
            ("safetensors", safetensors_seeds()),
            ("tokenizer", tokenizer_seeds()),
            ("hf_config", hf_config_seeds()),
            ("gguf", gguf_seeds()),
            ("gguf_model", gguf_model_seeds()),
            ("file_kind", file_kind_seeds()),
            ("state_file", state_file_seeds()),
            ("chat_template", chat_template_seeds())):
        size, count = write(name, seeds)
        total += size
        print("%-15s %3d seeds %9d bytes" % (name, count, size))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
