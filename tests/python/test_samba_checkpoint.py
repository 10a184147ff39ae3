"""Samba checkpoint reader through the binding: every broken file of the independent test writer is refused
with its message, valid files of both formats load with the exact weight bits, and the example archive has
the sizes and header text docs/formats.md §3.8 gives."""
import hashlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import samebits
from samebits._samba_config import read_samba_checkpoint
from samba_checkpoint_writer import (LEGACY_LIMIT, MAGIC, broken_variants, build_state, canonical, config_dict,
                                     deterministic_weights, example_config, legacy_bytes, registry, registry_entries,
                                     stream_bytes, stream_header, valid_variants, write_legacy, write_stream)

BROKEN = broken_variants()
VALID = valid_variants()


def read(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return read_samba_checkpoint(path)


@pytest.mark.parametrize("name,data,expected", BROKEN, ids=[name for name, _, _ in BROKEN])
def test_broken_checkpoint_is_refused_with_its_message(tmp_path, name, data, expected):
    with pytest.raises(ValueError) as refused:
        read(tmp_path, name, data)
    assert str(refused.value).startswith(expected), (str(refused.value), expected)


def test_refusal_table_is_complete_and_each_file_is_really_broken():
    names = [name for name, _, _ in BROKEN]
    assert len(names) == len(set(names)) and len(names) >= 25
    good = {stream_bytes(), legacy_bytes()}
    assert not any(data in good for _, data, _ in BROKEN)
    # every class the issue lists is in the table
    for wanted in ("bad_magic_version", "header_length_zero", "header_length_over_limit", "header_length_past_end",
                   "header_digest_last_byte_flipped", "first_parameter_byte_flipped", "truncated_one_byte",
                   "one_byte_appended", "descriptor_nbytes_mismatch", "descriptor_shape_mismatch",
                   "descriptor_dtype_mismatch", "registry_untied_config", "state_wrong_schema", "state_wrong_profile",
                   "nan_parameter", "header_duplicate_key", "header_non_canonical", "numeric_profile_fixed15",
                   "optimizer_kind_sgd", "schedule_not_object", "rng_not_object", "legacy_strict_non_canonical_payload"):
        assert wanted in names, wanted


@pytest.mark.parametrize("name,data,cfg,weights", VALID, ids=[name for name, _, _, _ in VALID])
def test_valid_checkpoint_loads_exact_weights(tmp_path, name, data, cfg, weights):
    config, loaded, info = read(tmp_path, name, data)
    assert isinstance(config, samebits.SambaConfig)
    assert config == samebits.SambaConfig.from_dict(cfg)
    assert list(loaded) == [n for n, _ in registry(cfg)]  # registry order
    for tensor_name, shape in registry(cfg):
        got = loaded[tensor_name]
        assert got.dtype == np.float32 and got.shape == tuple(shape) and got.flags["C_CONTIGUOUS"], tensor_name
        assert got.tobytes() == np.ascontiguousarray(weights[tensor_name], dtype=np.float32).tobytes(), tensor_name
    assert info["format"] == ("stream-v2" if data.startswith(MAGIC) else "legacy-json")
    assert info["file_bytes"] == len(data)
    assert info["parameter_count"] == sum(int(np.prod(s)) for _, s in registry(cfg))
    assert info["tensor_count"] == len(registry(cfg))
    assert info["numeric_profile"] == "fp32_v1"


def test_example_archive_sizes_and_header_text_are_the_specs(tmp_path):
    metadata, arrays = build_state()
    header = canonical(stream_header(metadata, arrays)).decode("ascii")
    data = stream_bytes(metadata, arrays)
    # docs/formats.md §3.8: 2,731 header bytes, 417,228 file bytes, and this start and end (hashes zeroed).
    assert len(header) == 2731 and len(data) == 417228
    assert len(data) == 17 + 8 + 2731 + 32 + 4 * (3 * 34530 + 20)
    zeroed = re.sub("[0-9a-f]{64}", "0" * 64, header)
    zeros = "0" * 64
    start = ('{"arrays":[{"dtype":"<f4","name":"parameters","nbytes":138120,"sha256":"' + zeros + '","shape":[34530]},'
             '{"dtype":"<f4","name":"exp_avg",')
    middle = ('{"dtype":"<i4","name":"buf_initialized","nbytes":80,"sha256":"' + zeros + '","shape":[20]}],'
              '"schema":"mojolearn.samba-stream.v2","state":{"config":{"d_model":32,"dropout":0.0,"head_dim":16,'
              '"intermediate":64,"layers":["mamba3","attention"],"n_heads":2,"n_kv_heads":2,'
              '"norm_eps":9.999999747378752e-06,"tie_embeddings":true,"vocab":256},"numeric_mode":"identical",'
              '"optimizer":{"accumulation_steps":1,"beta1":0.9,"beta2":0.999,"eps":1e-08,"kind":"adamw",'
              '"lr":0.0005000000237487257,"max_norm":1.0,"weight_decay":0.01},'
              '"profile":"mojolearn.samba-stack.fp32.v1","registry":[{"name":"embed.weight","offset":0,'
              '"shape":[256,32],"size":8192},')
    end = ('{"name":"norm_f.weight","offset":34498,"shape":[32],"size":32}],"rng":{"counter":11,"seed":7},'
           '"schedule":{"kind":"cosine","min_lr":0.0,"peak_lr":0.0010000000474974513,"total_steps":64,'
           '"warmup_steps":8},"schema":"mojolearn.samba-stack-state.v1","t":3}}')
    assert zeroed.startswith(start) and middle in zeroed and zeroed.endswith(end)
    _, _, info = read(tmp_path, "example.samba", data)
    assert info["header_bytes"] == 2731
    assert info["integrity_sha256"] == hashlib.sha256(header.encode("ascii")).hexdigest()
    assert [a["sha256"] for a in info["arrays"]] == [
        hashlib.sha256(np.ascontiguousarray(arrays[n], dtype=d).tobytes()).hexdigest()
        for n, d in (("parameters", "<f4"), ("exp_avg", "<f4"), ("exp_avg_sq", "<f4"), ("buf_initialized", "<i4"))]
    assert (info["t"], info["rng"], info["schedule"]["kind"], info["optimizer"]["kind"]) == (3, {"counter": 11, "seed": 7},
                                                                                            "cosine", "adamw")
    assert info["numeric_mode"] == "identical"
    assert [entry[0] for entry in info["registry"]] == [n for n, _ in registry(example_config())]
    assert info["registry"][2] == ("layers.0.in_proj.weight", (419, 32), 8224, 13408)


def test_both_formats_of_one_state_give_the_same_bits(tmp_path):
    cfg = config_dict(256, 64, ["attention", "mamba3", "attention"], n_heads=4, n_kv_heads=2, intermediate=128,
                      tie_embeddings=False)
    weights = deterministic_weights(cfg, seed=3)
    stream = read_samba_checkpoint(write_stream(tmp_path / "a.samba", cfg, weights))
    legacy = read_samba_checkpoint(write_legacy(tmp_path / "a.json", cfg, weights))
    assert stream[0] == legacy[0]
    assert list(stream[1]) == list(legacy[1])
    for name in stream[1]:
        assert stream[1][name].tobytes() == legacy[1][name].tobytes() == weights[name].tobytes()
    assert stream[2]["schedule"] == legacy[2]["schedule"] and stream[2]["t"] == legacy[2]["t"]


def test_loaded_arrays_are_independent_of_each_other(tmp_path):
    _, weights, _ = read_samba_checkpoint(write_stream(tmp_path / "w.samba"))
    before = weights["layers.0.dt_bias"].copy()
    weights["embed.weight"][...] = 7.0
    weights["layers.0.D"][...] = 7.0
    assert weights["layers.0.dt_bias"].tobytes() == before.tobytes()


def test_missing_file_is_a_value_error_naming_the_path(tmp_path):
    path = tmp_path / "no-such.samba"
    with pytest.raises(ValueError) as refused:
        read_samba_checkpoint(path)
    assert str(path) in str(refused.value)


def test_legacy_file_over_the_size_limit(tmp_path):
    # A sparse file one byte past 256 MiB: refused by size before any parse.
    path = tmp_path / "huge.json"
    with open(path, "wb") as stream:
        stream.write(b"{")
        stream.truncate(LEGACY_LIMIT + 1)
    with pytest.raises(ValueError, match="^samebits.SambaStack: checkpoint exceeds the size limit$"):
        read_samba_checkpoint(path)


def test_no_allocation_from_an_unchecked_size(tmp_path):
    # A valid header describing ~1.1e9 parameters (4.4 GB per array) followed by nothing: the reader must
    # refuse on the file size before allocating anything that large. Run under a 2 GiB address-space limit,
    # an early allocation would be a MemoryError instead of the size refusal.
    cfg = config_dict(2**19, 2048, ["attention"], n_heads=16, intermediate=2048)
    metadata, arrays = build_state(config_dict(256, 32, ["mamba3", "attention"], n_heads=2, intermediate=64))
    metadata = dict(metadata, config=cfg)
    metadata["registry"] = registry_entries(cfg)
    total = sum(e["size"] for e in metadata["registry"])
    assert total <= 2**31 - 1
    envelope = stream_header(metadata, arrays)
    for entry in envelope["arrays"]:
        count = len(metadata["registry"]) if entry["name"] == "buf_initialized" else total
        entry.update(shape=[count], nbytes=4 * count)
    path = tmp_path / "huge.samba"
    path.write_bytes(stream_bytes(metadata, arrays, header=canonical(envelope), body=b""))
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from samebits._samba_config import read_samba_checkpoint
        try:
            read_samba_checkpoint({str(path)!r})
        except ValueError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "Samba checkpoint truncated or trailing array data", out.stderr


def test_refusal_leaves_no_state_behind(tmp_path):
    good = write_stream(tmp_path / "good.samba")
    first = read_samba_checkpoint(good)[1]
    with pytest.raises(ValueError):
        read(tmp_path, "bad.samba", BROKEN[0][1])
    again = read_samba_checkpoint(good)[1]
    assert all(first[n].tobytes() == again[n].tobytes() for n in first)
