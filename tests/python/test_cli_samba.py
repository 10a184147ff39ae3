"""The samebits command line on Samba checkpoints: info, generate (deterministic per seed), verify with and
without sabotage, and one clear line plus a non-zero exit for bad files and arguments."""

import subprocess
import sys

import samba_checkpoint_writer as writer


def run(*args):
    return subprocess.run([sys.executable, "-m", "samebits._cli", *map(str, args)], capture_output=True)


def _checkpoint(tmp_path, fmt="stream"):
    write = writer.write_stream if fmt == "stream" else writer.write_legacy
    return write(tmp_path / f"small-{fmt}.ckpt", writer.example_config())


def test_info_both_formats(tmp_path):
    for fmt, label in (("stream", b"streamed v2 archive"), ("legacy", b"legacy JSON")):
        out = run("info", _checkpoint(tmp_path, fmt))
        assert out.returncode == 0, out.stderr
        for needle in (label, b"parameters: 34530 in 20 tensors", b"layers.0.in_proj.weight", b"integrity: OK"):
            assert needle in out.stdout


def test_info_refuses_a_corrupt_archive(tmp_path):
    path = _checkpoint(tmp_path)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01
    path.write_bytes(bytes(data))
    out = run("info", path)
    assert out.returncode == 1
    assert b"integrity: REFUSED:" in out.stdout


def test_generate_is_deterministic_per_seed(tmp_path):
    path = _checkpoint(tmp_path)
    a = run("generate", path, "--prompt", "Once", "--max-tokens", 30, "--seed", 3, "--top-k", 40)
    b = run("--threads", 1, "generate", path, "--prompt", "Once", "--max-tokens", 30, "--seed", 3, "--top-k", 40)
    c = run("generate", path, "--prompt", "Once", "--max-tokens", 30, "--seed", 4, "--top-k", 40)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and a.stdout.startswith(b"Once")
    assert len(a.stdout) == len("Once") + 30 + 1
    assert a.stdout != c.stdout
    assert b"tok/s" in a.stderr
    greedy = run("generate", path, "--prompt", "Once", "--max-tokens", 8, "--temperature", 0)
    assert greedy.returncode == 0


def test_verify_and_sabotage(tmp_path):
    path = _checkpoint(tmp_path)
    out = run("verify", path, "--batch", 2, "--length", 12)
    assert out.returncode == 0, out.stdout + out.stderr
    assert b"BITWISE EQUAL at every one of 12 positions" in out.stdout
    sab = run("verify", path, "--batch", 2, "--length", 12, "--sabotage")
    assert sab.returncode == 0, sab.stdout
    assert b"FIRST DIFFERING POSITION" in sab.stdout and b"PASS sabotage" in sab.stdout


def test_bad_arguments_and_files(tmp_path):
    path = _checkpoint(tmp_path)
    assert run("generate", path).returncode == 2  # no --prompt
    assert run("generate", path, "--prompt", "x", "--top-p", 0).returncode == 2
    assert run("verify", path, "--length", "many").returncode == 2
    missing = run("generate", tmp_path / "missing.ckpt", "--prompt", "x")
    assert missing.returncode == 1 and missing.stderr.count(b"\n") == 1
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"MOJOLEARN-SAMBA\x02\n" + b"\xff" * 40)
    out = run("verify", junk)
    assert out.returncode == 1 and out.stderr.startswith(b"samebits: ")
