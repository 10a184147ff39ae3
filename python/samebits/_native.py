"""Lazy access to the compiled engine: importing samebits never fails, first use does if it is missing."""

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
        _module = _core
    return _module
