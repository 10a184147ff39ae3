"""The wheel ships its type stubs (`__init__.pyi`, `lowbit.pyi`) and `py.typed`, and a usage sample of
the public API passes `mypy --strict` against the installed package (and runs)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import samebits

SAMPLE = Path(__file__).resolve().parent / "typing" / "usage_sample.py"


def test_the_package_ships_stubs_and_the_marker():
    package = Path(samebits.__file__).resolve().parent
    for name in ("py.typed", "__init__.pyi", "lowbit.pyi"):
        assert (package / name).is_file(), name


def test_the_usage_sample_runs():
    out = subprocess.run([sys.executable, str(SAMPLE)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (scripts/install_deps.sh installs it for CI)")
def test_mypy_strict_accepts_the_usage_sample_and_catches_a_wrong_type(tmp_path):
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version",
               f"{sys.version_info.major}.{sys.version_info.minor}"]
    out = subprocess.run([*command, str(SAMPLE)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import samebits\n\nlm = samebits.default_model()\ntext: int = lm.generate('In', 4)\n")
    out = subprocess.run([*command, str(wrong)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 1 and "Incompatible types in assignment" in out.stdout, out.stdout
