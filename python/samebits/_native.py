"""Lazy access to the compiled engine: importing samebits never fails, first use does if it is missing."""

import os

_module = None


def native():
    """The samebits._core extension module; ImportError with a remedy when it is not built."""
    global _module
    if _module is None:
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
