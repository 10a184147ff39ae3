"""Lazy access to the compiled engine: importing samebits never fails, first use does if it is missing."""

import os

_module = None


def native():
    """The samebits._core extension module; ImportError with a remedy when it is not built."""
    global _module
    if _module is None:
        check_environment()
        try:
            from . import _core
        except ImportError as exc:  # pragma: no cover - exercised only on a broken install
            raise ImportError(
                "samebits: the native library samebits._core is missing or failed to load "
                "(build and install the package with `pip install .`)"
            ) from exc
        if _core.sabotage() and os.environ.get("SAMEBITS_ALLOW_SABOTAGE") != "1":
            raise ImportError(
                "samebits: this native library is a sabotage build (GEMM leaves folded backwards, for "
                "testing the test suite); set SAMEBITS_ALLOW_SABOTAGE=1 to load it anyway"
            )
        _module = _core
    return _module


def check_environment():
    """SAMEBITS_NUM_THREADS and SAMEBITS_SIMD, when set, must hold values the engine uses: anything else is a
    ValueError naming the variable (the engine would otherwise ignore it silently), as on the command line."""
    threads = os.environ.get("SAMEBITS_NUM_THREADS")
    if threads is not None and not (threads.isdigit() and threads.isascii() and 1 <= int(threads) <= 256):
        raise ValueError(f"samebits: environment variable SAMEBITS_NUM_THREADS must be an integer in [1, 256], "
                         f"got {threads!r}")
    simd = os.environ.get("SAMEBITS_SIMD")
    if simd is not None and simd not in ("scalar", "avx2", "avx512"):
        raise ValueError(f"samebits: environment variable SAMEBITS_SIMD must be scalar, avx2 or avx512, got {simd!r}")
