"""Bounded memory while loading a Samba checkpoint (issue 8, item 3).

A ~100 MB v2 archive loads through samebits.SambaInference.from_checkpoint in a fresh process with a peak
RSS growth of at most LOAD_RATIO x its parameter bytes + LOAD_OVERHEAD, and the loaded model's logits equal
those of the dict constructor on the same weights, bit for bit. Files that claim huge sizes (header length,
config dims, descriptors, element counts, legacy hex shapes, file size) are refused with a ValueError before
any allocation sized by the claim: the refusing process stays small.

The writers here stream: they never hold more than one tensor, so a large archive costs the test little.
bench/load_memory.py imports them to print the load table.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import samba_checkpoint_writer as writer

# The claim under test: peak RSS growth while loading <= LOAD_RATIO * parameter bytes + LOAD_OVERHEAD.
LOAD_RATIO = 1.2
LOAD_OVERHEAD = 16 * 1024 * 1024
# A refused file may cost the process no more than this (the 1 MiB header limit and one read chunk, with
# room for the parse of a header that size).
REFUSAL_BUDGET = 24 * 1024 * 1024

# ~100 MB of float32 parameters (23.9M): 4 x (mamba3, attention) at d_model 512, intermediate 2048.
LARGE_CONFIG = writer.config_dict(256, 512, ["mamba3", "attention"] * 4, n_heads=8, intermediate=2048)


def tensor_values(seed, index, name, shape):
    """One tensor of a deterministic weight set: norms near 1, everything else small (float32)."""
    rng = np.random.default_rng([seed, index])
    values = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * np.float32(0.05)
    if name.endswith("norm.weight") or name == "norm_f.weight":
        values += np.float32(1.0)
    return values.reshape(shape)


def weight_dict(cfg, seed):
    return {name: tensor_values(seed, i, name, shape) for i, (name, shape) in enumerate(writer.registry(cfg))}


def parameter_count(cfg):
    return sum(int(np.prod(shape)) for _, shape in writer.registry(cfg))


def _metadata(cfg):
    return {"config": cfg, "numeric_mode": "identical", "optimizer": writer.default_optimizer(),
            "profile": writer.PROFILE, "registry": writer.registry_entries(cfg), "rng": {"counter": 11, "seed": 7},
            "schedule": writer.default_schedule(), "schema": writer.STATE_SCHEMA, "t": 3}


def _zero_digest(nbytes):
    digest = hashlib.sha256()
    block = bytes(1 << 20)
    for start in range(0, nbytes, len(block)):
        digest.update(block[:min(len(block), nbytes - start)])
    return digest.hexdigest()


def write_large_stream(path, cfg, seed=7):
    """A valid v2 archive (docs/formats.md §3.2) written one tensor at a time: parameters from tensor_values,
    zero moments, every buf_initialized flag 1. Returns (path, parameter bytes)."""
    entries = writer.registry(cfg)
    n, t = parameter_count(cfg), len(entries)
    digest = hashlib.sha256()
    for i, (name, shape) in enumerate(entries):
        digest.update(tensor_values(seed, i, name, shape).tobytes())
    flags = np.ones(t, dtype="<i4").tobytes()
    descriptors = [
        {"dtype": "<f4", "name": "parameters", "nbytes": 4 * n, "sha256": digest.hexdigest(), "shape": [n]},
        {"dtype": "<f4", "name": "exp_avg", "nbytes": 4 * n, "sha256": _zero_digest(4 * n), "shape": [n]},
        {"dtype": "<f4", "name": "exp_avg_sq", "nbytes": 4 * n, "sha256": _zero_digest(4 * n), "shape": [n]},
        {"dtype": "<i4", "name": "buf_initialized", "nbytes": 4 * t, "sha256": hashlib.sha256(flags).hexdigest(),
         "shape": [t]},
    ]
    header = writer.canonical({"arrays": descriptors, "schema": writer.STREAM_SCHEMA, "state": _metadata(cfg)})
    with open(path, "wb") as out:
        out.write(writer.MAGIC + struct.pack("<Q", len(header)) + header + hashlib.sha256(header).digest())
        for i, (name, shape) in enumerate(entries):
            out.write(tensor_values(seed, i, name, shape).tobytes())
        zeros = bytes(1 << 20)
        for _ in range(2):
            for start in range(0, 4 * n, len(zeros)):
                out.write(zeros[:min(len(zeros), 4 * n - start)])
        out.write(flags)
    return Path(path), 4 * n


def write_large_legacy(path, cfg, seed=7):
    """A valid legacy JSON file (docs/formats.md §3.11) with the same weights. Its hex text is six times the
    parameter bytes, so it is written for configs under the 256 MiB file limit only."""
    params = np.concatenate([tensor_values(seed, i, name, shape).reshape(-1)
                             for i, (name, shape) in enumerate(writer.registry(cfg))])
    n, t = params.size, len(writer.registry(cfg))
    payload = _metadata(cfg)
    payload["parameters"] = {"dtype": "<f4", "hex": params.tobytes().hex(), "shape": [n]}
    del params
    zeros_hex = "00" * (4 * n)
    payload["exp_avg"] = {"dtype": "<f4", "hex": zeros_hex, "shape": [n]}
    payload["exp_avg_sq"] = {"dtype": "<f4", "hex": zeros_hex, "shape": [n]}
    payload["buf_initialized"] = {"dtype": "<i4", "hex": np.ones(t, dtype="<i4").tobytes().hex(), "shape": [t]}
    encoded = writer.canonical(payload)
    envelope = {"payload": payload, "payload_sha256": hashlib.sha256(encoded).hexdigest(),
                "schema": writer.LEGACY_SCHEMA}
    Path(path).write_bytes(writer.canonical(envelope) + b"\n")
    return Path(path), 4 * n


# What both measuring children start with: reading /proc/self/status and resetting the high-water mark.
_MEASURE = textwrap.dedent("""
    def status(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

    def start_measure():
        # getrusage's maximum carries the forking parent's size across exec; VmHWM is this image's own
        # high-water mark, and writing 5 to clear_refs resets it to the current size.
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        return status("VmRSS")
""")

# The measuring child: the growth is this process's high-water mark (VmHWM, reset just before the load)
# minus its size just before the load, so it is never understated.
_LOAD_CHILD = _MEASURE + textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import samebits

    path = sys.argv[1]
    before = start_measure()
    start = time.perf_counter()
    model = samebits.SambaInference.from_checkpoint(path)
    seconds = time.perf_counter() - start
    peak = status("VmHWM")
    ids = (np.arange(12, dtype=np.int64).reshape(2, 6) * 37) % model.config.vocab
    logits = model.forward(ids)
    np.save(sys.argv[2], logits)
    print(json.dumps({"growth": peak - before, "seconds": seconds, "repr": repr(model)}))
""")


def measure_load(path, logits_out):
    """(peak RSS growth in bytes, load seconds, repr) of from_checkpoint in a fresh process."""
    done = subprocess.run([sys.executable, "-c", _LOAD_CHILD, str(path), str(logits_out)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["growth"], result["seconds"], result["repr"]


@pytest.fixture(scope="module")
def large_archive(tmp_path_factory):
    return write_large_stream(tmp_path_factory.mktemp("large") / "large.samba", LARGE_CONFIG)


def test_large_v2_load_peak_is_bounded_and_logits_match_the_dict_constructor(large_archive, tmp_path):
    import samebits

    path, parameter_bytes = large_archive
    assert parameter_bytes > 95_000_000  # the claim is about a ~100 MB checkpoint, not a small one
    growth, seconds, shown = measure_load(path, tmp_path / "logits.npy")
    bound = LOAD_RATIO * parameter_bytes + LOAD_OVERHEAD
    print(f"parameter bytes {parameter_bytes}, peak RSS growth {growth} ({growth / parameter_bytes:.3f}x), "
          f"load {seconds:.2f} s")
    assert growth <= bound, (growth, bound, growth / parameter_bytes)
    # The same weights through the dict constructor give the same logits, bit for bit.
    config = samebits.SambaConfig.from_dict(LARGE_CONFIG)
    reference = samebits.SambaInference(config, weight_dict(LARGE_CONFIG, 7))
    assert shown == repr(reference)
    ids = (np.arange(12, dtype=np.int64).reshape(2, 6) * 37) % config.vocab
    expected = reference.forward(ids)
    loaded = np.load(tmp_path / "logits.npy")
    assert loaded.dtype == np.float32 and loaded.shape == expected.shape
    assert loaded.tobytes() == expected.tobytes()


def test_loaded_model_keeps_config_weights_and_repr(tmp_path):
    import samebits

    cfg = writer.config_dict(256, 64, ["mamba3", "attention", "mamba3"], n_heads=4, intermediate=96,
                             tie_embeddings=False)
    path, _ = write_large_stream(tmp_path / "small.samba", cfg, seed=3)
    model = samebits.SambaInference.from_checkpoint(path)
    assert isinstance(model.config, samebits.SambaConfig) and model.config == samebits.SambaConfig.from_dict(cfg)
    assert model.weight_format == "float32"
    weights = weight_dict(cfg, 3)
    # parameters() rebuilds every tensor from the packed panels exactly.
    got = model.parameters()
    assert list(got) == list(weights)
    for name, values in weights.items():
        assert got[name].tobytes() == values.tobytes(), name
    reference = samebits.SambaInference(model.config, weights)
    assert repr(model) == repr(reference)
    ids = np.array([[1, 200, 3, 4, 77]])
    assert model.forward(ids).tobytes() == reference.forward(ids).tobytes()
    assert model._forward_reference(ids).tobytes() == reference.forward(ids).tobytes()


def test_subnormal_weights_survive_packing_exactly(tmp_path):
    """The panels hold F(w) (subnormals flushed); the exact bits come back from the side list."""
    import samebits

    cfg = writer.config_dict(256, 32, ["mamba3", "attention"], n_heads=2, intermediate=64)
    weights = weight_dict(cfg, 5)
    tiny = np.array([1e-40, -1e-40, 1e-45, -3e-39], dtype=np.float32)  # subnormal, both signs
    for name in ("embed.weight", "layers.0.in_proj.weight", "layers.1.q_proj.weight", "layers.1.down_proj.weight",
                 "layers.0.out_proj.weight"):
        flat = weights[name].reshape(-1)
        flat[3:3 + tiny.size] = tiny
        flat[-1] = tiny[1]
    model = samebits.SambaInference(samebits.SambaConfig.from_dict(cfg), weights)
    got = model.parameters()
    for name, values in weights.items():
        assert got[name].tobytes() == values.tobytes(), name
    ids = np.array([[0, 5, 255]])
    assert model.forward(ids).tobytes() == model._forward_reference(ids).tobytes()


# ------------------------------------------------------------------------------ huge claims, refused small


def _v2_with_state(state, arrays=None, body=b""):
    """A v2 archive whose header is honest (correctly hashed) but whose claims are whatever `state` and
    `arrays` say; `body` follows the digest."""
    if arrays is None:
        arrays = [{"dtype": d, "name": n, "nbytes": 4, "sha256": "0" * 64, "shape": [1]} for n, d in writer.ARRAYS]
    header = writer.canonical({"arrays": arrays, "schema": writer.STREAM_SCHEMA, "state": state})
    return writer.MAGIC + struct.pack("<Q", len(header)) + header + hashlib.sha256(header).digest() + body


def _state_for(cfg, registry_entries=None):
    state = _metadata(cfg)
    if registry_entries is not None:
        state["registry"] = registry_entries
    return state


def _claim_files():
    """(name, bytes) of files that claim huge sizes; each must be refused with a ValueError."""
    example = writer.example_config()
    files = []
    # The stored header length: 2^62 bytes, and just past the 1 MiB limit.
    files.append(("header_length_2_62", writer.MAGIC + struct.pack("<Q", 1 << 62) + b"{}"))
    files.append(("header_length_past_limit", writer.MAGIC + struct.pack("<Q", writer.HEADER_LIMIT + 1) + b"{}"))
    # Config dims whose registry would be astronomically large, with the registry they imply (the file
    # holds none of it): refused by the int32 index bound before any size is used.
    for name, cfg in (("config_d_model_2_40", writer.config_dict(256, 1 << 40, ["mamba3"])),
                      ("config_vocab_2_31", writer.config_dict(1 << 31, 32, ["mamba3"])),
                      ("config_intermediate_2_62",
                       writer.config_dict(256, 32, ["attention"], n_heads=2, intermediate=1 << 62)),
                      ("config_d_model_2_40_untied", writer.config_dict(256, 1 << 40, ["mamba3"], tie_embeddings=False))):
        files.append((name, _v2_with_state(_state_for(cfg))))
    many_layers = dict(example, layers=["mamba3"] * 20000)
    files.append(("config_20000_layers", _v2_with_state(_state_for(many_layers, []))))
    # A config of ~1.07e9 parameters (4.3 GB) whose registry and descriptors are all honest: the header is
    # valid, only the arrays are missing. Refused by the exact file size before they are allocated.
    big = writer.config_dict(256, 4096, ["mamba3", "attention"] * 5, n_heads=32, intermediate=16384)
    n = parameter_count(big)
    t = len(writer.registry(big))
    arrays = [{"dtype": d, "name": name, "nbytes": 4 * (t if name == "buf_initialized" else n), "sha256": "0" * 64,
               "shape": [t if name == "buf_initialized" else n]} for name, d in writer.ARRAYS]
    files.append(("honest_header_4gb_no_arrays", _v2_with_state(_state_for(big), arrays, body=b"\0" * 4096)))
    # Descriptors claiming 2^62 bytes / 2^60 elements for the example config.
    n_ex = parameter_count(example)
    for field, value in (("nbytes", 1 << 62), ("shape", [1 << 60])):
        arrays = [{"dtype": d, "name": name, "nbytes": 4 * n_ex, "sha256": "0" * 64, "shape": [n_ex]}
                  for name, d in writer.ARRAYS]
        arrays[0][field] = value
        files.append((f"descriptor_{field}_huge", _v2_with_state(_state_for(example), arrays)))
    # A registry entry claiming a 2^62-element tensor.
    entries = writer.registry_entries(example)
    entries[1] = dict(entries[1], size=1 << 62, shape=[1 << 31, 1 << 31])
    files.append(("registry_entry_2_62", _v2_with_state(_state_for(example, entries))))
    # Legacy: a tiny hex string under a shape of 2^40 x 2^40 elements, and a huge parameter count claim.
    metadata, arrays_ = writer.build_state()
    payload = writer.legacy_payload(metadata, arrays_)
    payload["parameters"]["shape"] = [1 << 40, 1 << 40]
    encoded = writer.canonical(payload)
    envelope = {"payload": payload, "payload_sha256": hashlib.sha256(encoded).hexdigest(),
                "schema": writer.LEGACY_SCHEMA}
    files.append(("legacy_shape_2_80", writer.canonical(envelope) + b"\n"))
    payload = writer.legacy_payload(metadata, arrays_)
    payload["config"] = dict(payload["config"], d_model=1 << 40)
    encoded = writer.canonical(payload)
    envelope = {"payload": payload, "payload_sha256": hashlib.sha256(encoded).hexdigest(),
                "schema": writer.LEGACY_SCHEMA}
    files.append(("legacy_config_d_model_2_40", writer.canonical(envelope) + b"\n"))
    return files


_REFUSE_CHILD = _MEASURE + textwrap.dedent("""
    import json, os, sys
    import samebits

    before = start_measure()
    results, peaks = {}, {}
    for path in sys.argv[1:]:
        try:
            samebits.SambaInference.from_checkpoint(path)
            results[os.path.basename(path)] = None
        except ValueError as e:
            results[os.path.basename(path)] = str(e)
        # The high-water mark after each file: the first file that raises it is the one to blame.
        peaks[os.path.basename(path)] = status("VmHWM") - before
    print(json.dumps({"growth": max(peaks.values()), "peaks": peaks, "results": results}))
""")


def test_huge_size_claims_are_refused_before_any_large_allocation(tmp_path):
    paths = []
    for name, data in _claim_files():
        path = tmp_path / name
        path.write_bytes(data)
        paths.append(path)
    # A sparse 2 GiB file is refused by its size alone (legacy limit 256 MiB), as is a sparse 8 GiB one
    # that starts with the v2 magic and an honest-looking short header.
    sparse = tmp_path / "sparse_2gb_legacy"
    with open(sparse, "wb") as out:
        out.truncate(2 << 30)
    paths.append(sparse)
    sparse_v2 = tmp_path / "sparse_8gb_v2"
    with open(sparse_v2, "wb") as out:
        out.write(dict(_claim_files())["honest_header_4gb_no_arrays"])
        out.truncate(8 << 30)
    paths.append(sparse_v2)
    done = subprocess.run([sys.executable, "-c", _REFUSE_CHILD, *map(str, paths)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for path in paths:
        message = result["results"][path.name]
        assert message is not None, f"{path.name} was accepted"
        print(f"{path.name}: {message} (high-water mark +{result['peaks'][path.name]} bytes)")
    assert result["results"]["sparse_2gb_legacy"] == "samebits.SambaStack: checkpoint exceeds the size limit"
    assert result["results"]["honest_header_4gb_no_arrays"] == "Samba checkpoint truncated or trailing array data"
    assert result["results"]["header_length_2_62"] == "Samba checkpoint header length exceeds limit"
    assert result["results"]["sparse_8gb_v2"] == "Samba checkpoint truncated or trailing array data"
    for name in ("config_d_model_2_40", "config_vocab_2_31", "config_intermediate_2_62", "config_d_model_2_40_untied",
                 "registry_entry_2_62"):
        assert result["results"][name] == "Samba checkpoint registry mismatch or index overflow", name
    assert result["growth"] <= REFUSAL_BUDGET, result["peaks"]


# ------------------------------------------------------------------------------ legacy: the hex skeleton


def _legacy_with(edit):
    metadata, arrays = writer.build_state()
    payload = writer.legacy_payload(metadata, arrays)
    edit(payload)
    encoded = writer.canonical(payload)
    envelope = {"payload": payload, "payload_sha256": hashlib.sha256(encoded).hexdigest(),
                "schema": writer.LEGACY_SCHEMA}
    return writer.canonical(envelope) + b"\n", arrays


@pytest.mark.parametrize("where", ["optimizer", "rng"])
def test_legacy_hex_lookalikes_elsewhere_keep_their_values(tmp_path, where):
    """The legacy reader parses a skeleton with the big hex strings left out; a long hex string under a "hex"
    key outside the arrays, or text that spells the skeleton's placeholder, must still read as itself."""
    from samebits._samba_config import read_samba_checkpoint

    lookalike = "ab" * 3000 if where == "optimizer" else "\0hex:0"

    def edit(payload):
        payload[where] = dict(payload[where], hex=lookalike)

    data, arrays = _legacy_with(edit)
    path = tmp_path / "lookalike.json"
    path.write_bytes(data)
    _, weights, info = read_samba_checkpoint(path)
    assert info[where]["hex"] == lookalike
    flat = np.concatenate([w.reshape(-1) for w in weights.values()])
    assert flat.tobytes() == arrays["parameters"].tobytes()


def test_legacy_placeholder_spelled_in_an_array_is_refused_like_any_bad_hex(tmp_path):
    import samebits

    def edit(payload):
        payload["exp_avg"]["hex"] = "\0hex:0"

    data, _ = _legacy_with(edit)
    path = tmp_path / "placeholder.json"
    path.write_bytes(data)
    with pytest.raises(ValueError, match="checkpoint tensor exp_avg is not hexadecimal"):
        samebits.SambaInference.from_checkpoint(path)
