"""samebits.serve: an OpenAI-compatible HTTP server over a samebits model (docs/serving.md), whose answers do
not depend on load, cache or restarts: continuous batching with batch invariance, an exact prefix cache and
sessions persisted through the saved-state format. Run it with `python -m samebits.serve` or
`samebits serve`; FastAPI and uvicorn are needed (pip install fastapi uvicorn)."""

from .app import Server, create_app
from .backend import ServeError

__all__ = ["Server", "ServeError", "create_app"]
