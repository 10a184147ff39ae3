"""Package-level guarantees: identity of the native library, no training entry points, lazy loading."""

import subprocess
import sys

import samebits


def test_native_identity():
    core = samebits._native()
    assert core.vendor() == "cpu"
    assert core.numeric_mode() == "identical"
    assert core.neural_arithmetic_profile() == "mojolearn.neural-training.fp32.v1"
    assert core.sabotage() is False
    assert "scalar" in core.simd_targets()
    assert core.__version__ == samebits.__version__


def test_no_training_entry_points_exported():
    core = samebits._native()
    forbidden = ("backward", "loss", "optim", "train")
    for name in dir(core):
        lowered = name.lower()
        assert not any(word in lowered for word in forbidden), name
        assert not lowered.endswith("_fit"), name


def test_import_does_not_load_the_native_library():
    code = "import sys, samebits; print('samebits._core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_names():
    for name in samebits.__all__:
        assert hasattr(samebits, name)
    assert samebits.lowbit.FORMATS == ("float32", "bfloat16", "int8")
    for name in ("MLPInference", "TransformerBlockInference", "Mamba1BlockInference", "Mamba2BlockInference",
                 "Mamba3BlockInference", "SambaInference", "SambaConfig", "SambaState"):
        assert name in samebits.__all__


def test_thread_count_from_environment():
    import os

    code = "import samebits; print(samebits.get_num_threads())"
    for value, want in (("1", "1"), ("3", "3")):
        env = dict(os.environ, SAMEBITS_NUM_THREADS=value)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        assert out.stdout.strip() == want
    # Not an integer in [1, 256]: refused by name at first use (it used to mean every core, silently).
    env = dict(os.environ, SAMEBITS_NUM_THREADS="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 1 and "environment variable SAMEBITS_NUM_THREADS must be an integer" in out.stderr
    env = {k: v for k, v in os.environ.items() if k != "SAMEBITS_NUM_THREADS"}  # unset: every core
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert int(out.stdout.strip()) == os.cpu_count()
