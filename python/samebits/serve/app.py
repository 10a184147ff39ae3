"""The OpenAI-compatible HTTP surface (docs/serving.md): FastAPI routes, strict request validation, OpenAI's
error JSON, Server-Sent Events; the work itself runs on the scheduler's engine thread."""

import asyncio
import json
import secrets
import threading
import time
import uuid
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .backend import ServeError, open_backend
from .metrics import Metrics
from .prefix_cache import PrefixCache
from .scheduler import Job, Scheduler
from .sessions import Sessions

MAX_N = 8
MAX_STOPS = 4
MAX_STOP_BYTES = 64
MAX_TOP_LOGPROBS = 20

_COMMON = {"model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
           "repetition_penalty", "stop", "seed", "n", "stream", "stream_options", "session_id", "user"}
COMPLETION_FIELDS = _COMMON | {"prompt", "logprobs", "echo"}
CHAT_FIELDS = _COMMON | {"messages", "logprobs", "top_logprobs", "max_completion_tokens"}


def error_body(error):
    return {"error": {"message": error.message, "type": error.kind, "param": error.param, "code": error.status}}


def error_response(error):
    return JSONResponse(error_body(error), status_code=error.status, headers=error.headers)


def _refuse(message, param=None, status=400):
    raise ServeError(status, message, param=param)


def _only(body, fields):
    unknown = sorted(set(body) - fields)
    if unknown:
        _refuse(f"unknown field {unknown[0]!r}", unknown[0])


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


async def read_json(request, max_body):
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > max_body):
        raise ServeError(413, f"the request body exceeds {max_body} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_body:
            raise ServeError(413, f"the request body exceeds {max_body} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        _refuse(f"the request body is not valid UTF-8 (byte {error.start})")
    try:
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as error:
        _refuse(f"the request body is not valid JSON: {str(error)[:200]}")
    if not isinstance(value, dict):
        _refuse("the request body must be a JSON object")
    return value


def _int(body, name, default, lo, hi):
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        _refuse(f"{name} must be an integer, got {type(value).__name__}", name)
    if not lo <= value <= hi:
        _refuse(f"{name} must be in [{lo}, {hi}], got {value}", name)
    return value


def _number(body, name, default, lo, hi, open_low=False):
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _refuse(f"{name} must be a number, got {type(value).__name__}", name)
    if not (lo < value <= hi if open_low else lo <= value <= hi):
        _refuse(f"{name} must be in {'(' if open_low else '['}{lo}, {hi}], got {value}", name)
    return float(value)


def _bool(body, name, default=False):
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        _refuse(f"{name} must be a boolean, got {type(value).__name__}", name)
    return value


def _text(value, name):
    if not isinstance(value, str):
        _refuse(f"{name} must be a string, got {type(value).__name__}", name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _refuse(f"{name} holds a lone surrogate (not valid Unicode)", name)
    return value


def _stops(body):
    value = body.get("stop")
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > MAX_STOPS:
        _refuse(f"stop must be a string or a list of at most {MAX_STOPS} strings", "stop")
    out = []
    for item in items:
        data = _text(item, "stop").encode("utf-8")
        if not data or len(data) > MAX_STOP_BYTES:
            _refuse(f"each stop string must be 1 to {MAX_STOP_BYTES} bytes", "stop")
        out.append(data)
    return out


class Server:
    """Everything a running server holds: the backend (loaded in the background), the scheduler, the cache
    and the sessions."""

    def __init__(self, model=None, state_dir=None, cache_mib=256, context=1024, max_running=64, max_waiting=256,
                 max_body=1 << 20):
        self.model_arg, self.state_dir, self.cache_mib = model, state_dir, cache_mib
        self.context, self.max_running, self.max_waiting, self.max_body = context, max_running, max_waiting, max_body
        self.metrics = Metrics()
        self.backend = self.scheduler = self.cache = self.sessions = None
        self.load_error = None
        self.ready = threading.Event()
        self.created = int(time.time())
        self.lock = threading.Lock()  # orders a background load's end against close()
        self.closed = False

    def load(self):
        try:
            backend = open_backend(self.model_arg, self.context)
            with self.lock:
                if self.closed:
                    return
                self.cache = PrefixCache(self.cache_mib << 20, backend.state_bytes) if self.cache_mib > 0 else None
                self.sessions = Sessions(backend, self.state_dir)
                self.scheduler = Scheduler(backend, self.cache, self.sessions, self.metrics, self.max_running,
                                           self.max_waiting)
                self.backend = backend
                self.ready.set()
        except Exception as error:  # reported by /health and every request
            self.load_error = error

    def close(self):
        """Stops the engine thread and lets go of the model, the cache, the sessions and every state. The app's
        route functions close over this server and FastAPI keeps them in module-level caches for the life of
        the process, so a server that only stopped its thread would hold its model until exit."""
        with self.lock:
            self.closed = True
            self.ready.clear()
            self.backend = self.cache = self.sessions = None
        if self.scheduler is not None:
            self.scheduler.stop()  # kept: a request still winding down may cancel its job on it

    def require_ready(self):
        if self.load_error is not None:
            raise ServeError(500, f"the model failed to load: {self.load_error}", "server_error")
        if not self.ready.is_set():
            raise ServeError(503, "the model is still loading", "server_overloaded", headers={"Retry-After": "1"})
        return self.backend

    # -------------------------------------------------------------- parameters

    def sampling(self, body, chat):
        backend = self.backend
        requested = body.get("model")
        if requested is not None and _text(requested, "model") != backend.name:
            raise ServeError(404, f"the model {requested!r} does not exist; this server serves {backend.name!r}",
                             "not_found_error", "model")
        params = {
            "temperature": _number(body, "temperature", 1.0, 0.0, 2.0),
            "top_p": _number(body, "top_p", 1.0, 0.0, 1.0, open_low=True),
            "top_k": _int(body, "top_k", 0, 0, backend.vocab),
            "min_p": _number(body, "min_p", 0.0, 0.0, 1.0),
            "presence_penalty": _number(body, "presence_penalty", 0.0, -2.0, 2.0),
            "frequency_penalty": _number(body, "frequency_penalty", 0.0, -2.0, 2.0),
            "repetition_penalty": _number(body, "repetition_penalty", 1.0, 0.0, 10.0, open_low=True),
            "stop": _stops(body),
            "n": _int(body, "n", 1, 1, MAX_N),
            "stream": _bool(body, "stream"),
            "echo": False,
            "logprobs": None,
        }
        seed = _int(body, "seed", None, 0, 2**64 - 1)
        params["seed"] = secrets.randbits(63) if seed is None else seed
        if chat:
            if _bool(body, "logprobs"):
                params["logprobs"] = _int(body, "top_logprobs", 0, 0, MAX_TOP_LOGPROBS)
            elif body.get("top_logprobs") is not None:
                _refuse("top_logprobs needs logprobs: true", "top_logprobs")
        else:
            params["logprobs"] = _int(body, "logprobs", None, 0, MAX_TOP_LOGPROBS)
            params["echo"] = _bool(body, "echo")
        options = body.get("stream_options")
        if options is not None:
            if not isinstance(options, dict) or set(options) - {"include_usage"}:
                _refuse("stream_options must be an object with only include_usage", "stream_options")
            params["include_usage"] = _bool(options, "include_usage")
        else:
            params["include_usage"] = False
        if body.get("user") is not None:
            _text(body["user"], "user")
        return params

    def prompt_ids(self, body, chat):
        backend = self.backend
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                _refuse("messages must be a non-empty list", "messages")
            for message in messages:
                if not isinstance(message, dict) or set(message) - {"role", "content", "name"}:
                    _refuse("each message must be an object with role and content", "messages")
                _text(message.get("role"), "messages.role")
                _text(message.get("content"), "messages.content")
            if backend.chat_template is None:
                _refuse(f"the model {backend.name!r} has no chat template; use /v1/completions", "messages")
            return backend.encode(backend.chat_template(messages, add_generation_prompt=True, tokenize=False))
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = backend.encode(_text(prompt, "prompt"))
        elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            if any(not 0 <= t < backend.vocab for t in prompt):
                _refuse(f"prompt token ids must be in [0, {backend.vocab})", "prompt")
            ids = list(prompt)
        else:
            _refuse("prompt must be a string, a list with one string, or a list of token ids", "prompt")
        return ids

    def job(self, body, chat, emit):
        """A validated job (not yet queued) and the seeds of its choices."""
        _only(body, CHAT_FIELDS if chat else COMPLETION_FIELDS)
        params = self.sampling(body, chat)
        ids = self.prompt_ids(body, chat)
        session_name = body.get("session_id")
        if session_name is not None:
            Sessions.check_id(session_name)
            if params["n"] != 1:
                _refuse("a session request must have n = 1", "n")
        if not ids and session_name is None:
            ids = [10] if self.backend.vocab == 256 else []  # an empty prompt starts from a newline
            if not ids:
                _refuse("prompt must hold at least one token", "prompt")
        name = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
        room = self.backend.context - len(ids)
        default = 16 if not chat else max(1, min(256, room))
        params["max_tokens"] = _int(body, name, default, 1, self.backend.context)
        session = self.sessions.acquire(session_name) if session_name is not None else None
        used = len(ids) + params["max_tokens"] + (len(session.history) if session else 0)
        if used > self.backend.context:
            if session is not None:
                self.sessions.release(session)
            raise ServeError(400, f"prompt ({len(ids)} tokens), session history "
                                  f"({len(session.history) if session else 0}) and max_tokens ({params['max_tokens']}) "
                                  f"exceed the context of {self.backend.context} tokens", param="max_tokens")
        if not ids and session is not None and not session.history:
            self.sessions.release(session)
            _refuse("a new session's first prompt must hold at least one token", "prompt")
        job = Job(params, ids, emit, session)
        seeds = [(params["seed"] + i) % 2**64 for i in range(params["n"])]
        return job, seeds


def _logprobs_completion(infos, pieces, offset0):
    tokens, token_logprobs, tops, offsets = [], [], [], []
    offset = offset0
    for (token_text, info) in zip(pieces, infos):
        tokens.append(token_text)
        token_logprobs.append(info[0] if info else None)
        tops.append({t: lp for t, lp in info[1]} if info else None)
        offsets.append(offset)
        offset += len(token_text)
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": tops, "text_offset": offsets}


def create_app(server):
    @asynccontextmanager
    async def lifespan(_app):
        # The model loads in the background: /health answers 503 until it is ready.
        threading.Thread(target=server.load, name="samebits-load", daemon=True).start()
        yield
        server.close()

    app = FastAPI(title="samebits", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.server = server

    @app.exception_handler(ServeError)
    async def serve_error(_request, error):
        return error_response(error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request, error):
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        return error_response(ServeError(error.status_code, str(error.detail), kind))

    @app.exception_handler(Exception)
    async def internal_error(_request, error):
        return error_response(ServeError(500, f"internal error: {error!r}", "server_error"))

    @app.middleware("http")
    async def count_requests(request, call_next):
        response = await call_next(request)
        server.metrics.inc("samebits_requests_total", route=request.url.path[:64], code=response.status_code)
        return response

    @app.get("/health")
    async def health():
        if server.load_error is not None:
            return JSONResponse({"status": "failed", "error": str(server.load_error)}, status_code=500)
        if not server.ready.is_set():
            return JSONResponse({"status": "loading"}, status_code=503, headers={"Retry-After": "1"})
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics():
        if server.cache is not None:
            server.metrics.set("samebits_prefix_cache_bytes", server.cache.bytes)
        return PlainTextResponse(server.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models():
        backend = server.require_ready()
        return {"object": "list", "data": [{"id": backend.name, "object": "model", "created": server.created,
                                            "owned_by": "samebits", "max_model_len": backend.context,
                                            "fingerprint": backend.fingerprint}]}

    async def small_request(request, fields):
        """The backend and the JSON body of a request that may hold only `fields`."""
        backend = server.require_ready()
        body = await read_json(request, server.max_body)
        _only(body, fields)
        return backend, body

    @app.post("/tokenize")
    async def tokenize(request: Request):
        backend, body = await small_request(request, {"prompt", "model"})
        ids = backend.encode(_text(body.get("prompt"), "prompt"))
        return {"tokens": ids, "count": len(ids), "max_model_len": backend.context}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        backend, body = await small_request(request, {"tokens", "model"})
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            _refuse("tokens must be a list of integers", "tokens")
        if any(not 0 <= t < backend.vocab for t in ids):
            _refuse(f"tokens must be in [0, {backend.vocab})", "tokens")
        return {"prompt": backend.decode_bytes(ids).decode("utf-8", errors="replace")}

    @app.delete("/v1/sessions/{name}")
    async def delete_session(name: str):
        server.require_ready()
        server.sessions.delete(Sessions.check_id(name))
        return {"id": name, "object": "session", "deleted": True}

    async def complete(request, chat):
        server.require_ready()
        body = await read_json(request, server.max_body)
        loop = asyncio.get_running_loop()
        events = asyncio.Queue()

        def emit(event):  # called on the engine thread; never blocks it
            loop.call_soon_threadsafe(events.put_nowait, event)

        job, seeds = server.job(body, chat, emit)
        server.metrics.inc("samebits_prompt_tokens_total", len(job.prompt_ids))
        try:
            server.scheduler.submit(job, seeds)
        except ServeError:
            if job.session is not None:
                server.sessions.release(job.session)
            raise
        answer = Answer(server, job, chat, body.get("prompt") if not chat else None)
        if job.params["stream"]:
            return StreamingResponse(answer.stream(events, request), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return await answer.whole(events, request)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await complete(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await complete(request, chat=True)

    return app


class Answer:
    """Turns a job's events into OpenAI's response objects: whole, or as SSE chunks."""

    def __init__(self, server, job, chat, prompt):
        self.server, self.job, self.chat = server, job, chat
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.n = len(job.choices)
        self.texts = [""] * self.n
        self.pieces = [[] for _ in range(self.n)]
        self.infos = [[] for _ in range(self.n)]
        self.tokens = [0] * self.n
        self.finish = [None] * self.n
        self.cached = 0
        self.prompt_logprobs = None
        self.echo = ""
        if job.params["echo"]:
            self.echo = prompt if isinstance(prompt, str) else server.backend.decode_bytes(job.prompt_ids).decode(
                "utf-8", errors="replace")

    def _token_text(self, token):
        return self.server.backend.token_bytes(token).decode("utf-8", errors="backslashreplace")

    def usage(self):
        prompt = len(self.job.prompt_ids)
        completion = sum(self.tokens)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": self.cached}}

    def _chat_logprobs(self, tokens_infos):
        content = []
        for token, info in tokens_infos:
            text = self._token_text(token)
            content.append({"token": text, "logprob": info[0], "bytes": list(self.server.backend.token_bytes(token)),
                            "top_logprobs": [{"token": self._token_text(t), "logprob": lp,
                                              "bytes": list(self.server.backend.token_bytes(t))} for t, lp in info[1]]})
        return {"content": content}

    async def _next(self, events, request):
        """The next event; a client that went away cancels the job (checked while waiting)."""
        while True:
            try:
                return await asyncio.wait_for(events.get(), timeout=0.25)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    self.server.scheduler.cancel(self.job)
                    raise asyncio.CancelledError from None

    async def whole(self, events, request):
        done = 0
        token_lists = [[] for _ in range(self.n)]
        try:
            while done < self.n:
                event = await self._next(events, request)
                if event[0] == "error":
                    self.server.scheduler.cancel(self.job)
                    return error_response(event[1])
                if event[0] == "prompt_logprobs":
                    self.prompt_logprobs = event[1]
                elif event[0] == "token":
                    _, i, token, text, info = event
                    self.texts[i] += text
                    self.tokens[i] += 1
                    self.pieces[i].append(self._token_text(token))
                    self.infos[i].append(info)
                    token_lists[i].append((token, info))
                else:
                    _, i, finish, cached = event
                    self.finish[i] = finish
                    self.cached = max(self.cached, cached)
                    done += 1
        except asyncio.CancelledError:
            self.server.scheduler.cancel(self.job)
            raise
        choices = []
        for i in range(self.n):
            if self.chat:
                choice = {"index": i, "message": {"role": "assistant", "content": self.texts[i]},
                          "logprobs": self._chat_logprobs(token_lists[i]) if self.job.params["logprobs"] is not None
                          else None, "finish_reason": self.finish[i]}
            else:
                logprobs = None
                if self.job.params["logprobs"] is not None:
                    logprobs = _logprobs_completion(self.infos[i], self.pieces[i], len(self.echo))
                    if self.prompt_logprobs is not None:
                        prompt_pieces = [self._token_text(t) for t in self.job.prompt_ids]
                        logprobs = {"tokens": prompt_pieces + logprobs["tokens"],
                                    "token_logprobs": self.prompt_logprobs + logprobs["token_logprobs"],
                                    "top_logprobs": [None] * len(prompt_pieces) + logprobs["top_logprobs"],
                                    "text_offset": [sum(len(p) for p in prompt_pieces[:k])
                                                    for k in range(len(prompt_pieces))] + logprobs["text_offset"]}
                choice = {"index": i, "text": self.echo + self.texts[i], "logprobs": logprobs,
                          "finish_reason": self.finish[i]}
            choices.append(choice)
        return {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.server.backend.name, "choices": choices,
                "usage": self.usage(), "system_fingerprint": self.server.backend.fingerprint[:16]}

    def _chunk(self, choices, usage=None):
        body = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self.created, "model": self.server.backend.name, "choices": choices,
                "system_fingerprint": self.server.backend.fingerprint[:16]}
        if usage is not None:
            body["usage"] = usage
        return f"data: {json.dumps(body)}\n\n"

    async def stream(self, events, request):
        done = 0
        try:
            if self.chat:
                yield self._chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                    "finish_reason": None} for i in range(self.n)])
            elif self.echo:
                yield self._chunk([{"index": i, "text": self.echo, "logprobs": None, "finish_reason": None}
                                   for i in range(self.n)])
            while done < self.n:
                event = await self._next(events, request)
                if event[0] == "error":
                    error = event[1]
                    self.server.scheduler.cancel(self.job)
                    yield f"data: {json.dumps(error_body(error))}\n\n"
                    break
                if event[0] == "prompt_logprobs":
                    continue
                if event[0] == "token":
                    _, i, token, text, info = event
                    self.tokens[i] += 1
                    logprobs = None
                    if info is not None:
                        logprobs = (self._chat_logprobs([(token, info)]) if self.chat else
                                    _logprobs_completion([info], [self._token_text(token)], 0))
                    if self.chat:
                        yield self._chunk([{"index": i, "delta": {"content": text}, "logprobs": logprobs,
                                            "finish_reason": None}])
                    else:
                        yield self._chunk([{"index": i, "text": text, "logprobs": logprobs, "finish_reason": None}])
                else:
                    _, i, finish, cached = event
                    self.cached = max(self.cached, cached)
                    done += 1
                    if self.chat:
                        yield self._chunk([{"index": i, "delta": {}, "logprobs": None, "finish_reason": finish}])
                    else:
                        yield self._chunk([{"index": i, "text": "", "logprobs": None, "finish_reason": finish}])
            if done == self.n:  # usage in every answer: a last chunk without choices, as include_usage asks
                yield self._chunk([], usage=self.usage())
            yield "data: [DONE]\n\n"
        except (asyncio.CancelledError, GeneratorExit):
            self.server.scheduler.cancel(self.job)
            raise
