"""The samebits command line as installed with the package: version, info verdicts, mlp-predict."""

import subprocess
import sys
from pathlib import Path

import mlp_checkpoint_writer as writer

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "mlp-demo.ckpt"


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "samebits._cli", *args], capture_output=True, text=True, env=env)


def test_version():
    out = run("--version")
    assert out.returncode == 0
    assert out.stdout.startswith("samebits ")


def test_info_on_the_bundled_checkpoint():
    out = run("info", str(DEMO))
    assert out.returncode == 0, out.stderr
    for needle in ("SmallMLPTrainer checkpoint", "weight1  (16, 8)", "bias2    (3,)", "weight format: float32",
                   "integrity: OK"):
        assert needle in out.stdout


def test_info_reports_a_refusal(tmp_path):
    good = DEMO.read_bytes()
    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(good.replace(b'"schema":"mojolearn.small-mlp-checkpoint.v1"', b'"schema":"nope"'))
    out = run("info", str(broken))
    assert out.returncode == 1
    assert "integrity: REFUSED: MLPInference checkpoint schema mismatch" in out.stdout


def test_predict_matches_python_and_ignores_threads(tmp_path):
    import numpy as np

    import samebits

    rows = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
    text = tmp_path / "rows.txt"
    text.write_text("\n".join(" ".join(repr(float(v)) for v in row) for row in rows))
    outputs = [run("--threads", str(t), "mlp-predict", str(DEMO), "--input", str(text)) for t in (1, 2, 3)]
    for out in outputs:
        assert out.returncode == 0, out.stderr
    bodies = [o.stdout.split("\n", 1)[1] for o in outputs]
    assert bodies[0] == bodies[1] == bodies[2]
    logits = samebits.MLPInference.from_checkpoint(DEMO).predict_logits(rows)
    printed = [[float(v) for v in line.split(":")[1].split("->")[0].split()] for line in bodies[0].strip().splitlines()]
    assert np.asarray(printed, np.float32).tobytes() == logits.tobytes()


def test_usage_errors():
    assert run().returncode == 2
    assert run("frobnicate").returncode == 2
    assert run("--threads", "0", "--version").returncode == 2
    out = run("mlp-predict", str(ROOT / "does-not-exist.ckpt"))
    assert out.returncode == 1 and "MLPInference" in out.stderr


def test_writer_file_loads(tmp_path):
    path = writer.write_valid(tmp_path / "w.ckpt")
    assert run("info", str(path)).returncode == 0


def test_unknown_options_are_usage_errors_not_file_names():
    # A misspelt flag must never be taken for a CHECKPOINT or FILE argument.
    for args in (("generate", "--prompt", "x", "--bogus"), ("info", str(DEMO), "-x"),
                 ("mlp-predict", str(DEMO), "--inputs", "rows.txt"), ("verify", str(DEMO), "--lenght", "4"),
                 ("eval", "--contxt", "3", "file.txt")):
        out = run(*args)
        assert out.returncode == 2, args
        assert f"{args[0]}: unknown option '" in out.stderr, out.stderr


def test_info_on_an_unreadable_path_names_the_path(tmp_path):
    missing = tmp_path / "missing.ckpt"
    out = run("info", str(missing))
    assert out.returncode == 1 and out.stdout == ""
    assert f"cannot read checkpoint '{missing}': No such file or directory" in out.stderr
    out = run("info", str(tmp_path))
    assert out.returncode == 1 and f"cannot read checkpoint '{tmp_path}': it is a directory" in out.stderr
