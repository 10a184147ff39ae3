"""Sessions (docs/serving.md §5): a request naming session S continues S's state, and S takes in the prompt
and the completion. With a state directory every session is persisted after each request through the
saved-state format (docs/formats.md §9), crash-safe: a new state file first, then the small JSON record that
points at it, each written to a temporary name and renamed, so a SIGKILL at any moment leaves the previous
or the new session, whole."""

import json
import os
import re
import threading
from pathlib import Path

from .backend import ServeError

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Session:
    def __init__(self, name, state, history, generation=0):
        self.name, self.state, self.history, self.generation = name, state, list(history), generation
        self.busy = False


class Sessions:
    def __init__(self, backend, state_dir=None):
        self.backend = backend
        self.dir = Path(state_dir) if state_dir else None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.live = {}
        self.lock = threading.Lock()

    @staticmethod
    def check_id(name):
        if not isinstance(name, str) or not SESSION_ID.fullmatch(name):
            raise ServeError(400, "session_id must be 1-64 characters of A-Z a-z 0-9 _ -", param="session_id")
        return name

    def _record(self, name):
        return self.dir / f"{name}.json"

    def _read_record(self, name):
        """S's record in the state directory, parsed, or None when it holds no S."""
        if self.dir is None or not self._record(name).is_file():
            return None
        return json.loads(self._record(name).read_text())

    def _restore(self, name, record):
        """S from its record (None when the state directory holds no S)."""
        if record is None:
            return None
        if record.get("fingerprint") != self.backend.fingerprint:
            raise ServeError(409, f"session {name!r} was saved by another model", param="session_id")
        state = self.backend.load(self.dir / record["state"])
        return Session(name, state, record["history"], record["generation"])

    def _moved_on(self, session, record):
        """True when another server sharing the state directory took S further (or forgot it) since this one
        last held it (a session that migrated away and back, docs/serving.md §7): S must be read back."""
        if self.dir is None:
            return False
        if record is None:
            return session.generation > 0
        return record.get("generation") != session.generation or record.get("history") != session.history

    def acquire(self, name):
        """S for one request (created empty when new); 409 while another request holds it."""
        with self.lock:
            session = self.live.get(name)
            if session is None or not session.busy:
                record = self._read_record(name)  # read and parsed once, for both questions below
                if session is None or self._moved_on(session, record):
                    session = self._restore(name, record) or Session(name, self.backend.new_state(), [])
                    self.live[name] = session
            if session.busy:
                raise ServeError(409, f"session {name!r} is busy with another request", param="session_id")
            session.busy = True
            return session

    def release(self, session):
        with self.lock:
            session.busy = False

    def commit(self, session, state, history):
        """The request finished: S moves on to `state`, persisted before the answer is released."""
        session.state, session.history = state, list(history)
        session.generation += 1
        if self.dir is not None:
            state_name = f"{session.name}.{session.generation}.state"
            self.backend.save(state, self.dir / state_name)
            record = {"fingerprint": self.backend.fingerprint, "state": state_name, "history": session.history,
                      "generation": session.generation}
            partial = self._record(session.name).with_suffix(".json.partial")
            partial.write_text(json.dumps(record))
            os.replace(partial, self._record(session.name))
            old = self.dir / f"{session.name}.{session.generation - 1}.state"
            if old.exists():
                old.unlink()
        self.release(session)

    def delete(self, name):
        with self.lock:
            session = self.live.get(name)
            if session is not None and session.busy:
                raise ServeError(409, f"session {name!r} is busy with another request", param="session_id")
            known = session is not None or (self.dir is not None and self._record(name).is_file())
            if not known:
                raise ServeError(404, f"no session {name!r}", "not_found_error", param="session_id")
            self.live.pop(name, None)
            if self.dir is not None:
                self._record(name).unlink(missing_ok=True)
                for path in self.dir.glob(f"{name}.*.state"):
                    path.unlink()

    def positions(self, session):
        return len(session.history)
