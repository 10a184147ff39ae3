"""samebits.serve.ray: the OpenAI-compatible server scaled out on Ray Serve (docs/serving.md §7): one deployment of
N replicas over the same model, a router that sends every request of a session to one replica, and sessions that
move between replicas through the saved-state format in a state directory they share."""

import argparse
import asyncio
import contextlib
import hashlib
import json
import sys

import ray
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from ray import serve
from ray.serve.config import RequestRouterConfig
from ray.serve.request_router import RequestRouter

import samebits

from .app import Server, create_app, error_body
from .backend import ServeError
from .sessions import SESSION_ID

REPLICA_HEADER = "x-samebits-replica"
SESSION_ROUTE = "v1/sessions/"
# Headers the ingress sets itself; copying the replica's would send them twice.
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "date", "server"}


def session_of(method, path, body):
    """The session a request belongs to (None when it names none): the JSON body's session_id, or the S of
    DELETE /v1/sessions/S. A body that is not valid JSON names none; the replica refuses it with a 400."""
    if method == "DELETE" and path.startswith(SESSION_ROUTE):
        return path[len(SESSION_ROUTE):] or None
    try:
        value = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None
    name = value.get("session_id") if isinstance(value, dict) else None
    return name if isinstance(name, str) and SESSION_ID.fullmatch(name) else None


async def asgi_exchange(app, method, path, headers, body):
    """One HTTP request to the ASGI `app`, in-process: yields (status, headers) when the app starts its answer,
    then each body chunk as the app sends it (an in-process client that buffers the whole answer would turn a
    stream into one piece). When the caller stops reading early the app is stopped (its task cancelled, as
    Starlette cancels a streaming answer whose client went away); an exception of the app reaches the caller."""
    messages = asyncio.Queue()
    gone = asyncio.Event()
    delivered = False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def run():
        try:
            await app(scope, receive, messages.put)
        finally:
            messages.put_nowait(None)  # the app returned (or raised): nothing more comes

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": "/" + path, "raw_path": ("/" + path).encode(), "query_string": b"", "root_path": "",
             "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
             "server": ("replica", 80), "client": ("127.0.0.1", 0)}
    task = asyncio.create_task(run())
    finished = False
    try:
        while (message := await messages.get()) is not None:
            if message["type"] == "http.response.start":
                yield message["status"], [(k.decode("latin-1"), v.decode("latin-1"))
                                          for k, v in message.get("headers", [])]
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body", False):
                    break
        finished = True
    finally:
        gone.set()
        if not finished:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _affinity(session, replica_id):
    return hashlib.sha256(f"{session}\0{replica_id}".encode()).digest()


class SessionAffinityRouter(RequestRouter):
    """Ray Serve request router: a request naming a session goes to the live replica that ranks first for it
    (rendezvous hashing over replica ids), so every turn of a session lands on one replica while it lives; when
    it goes away only its sessions move, each to the next replica in its own ranking, which reads the session
    back from the shared state directory. Requests without a session may go to any replica."""

    async def choose_replicas(self, candidate_replicas, pending_request=None):
        session = pending_request.kwargs.get("session") if pending_request is not None else None
        if not session or not candidate_replicas:
            return [candidate_replicas]
        return [[max(candidate_replicas, key=lambda replica: _affinity(session, replica.replica_id.unique_id))]]


@serve.deployment(request_router_config=RequestRouterConfig(request_router_class=SessionAffinityRouter))
class SamebitsReplica:
    """One replica: a whole samebits server (engine thread, prefix cache, sessions) with the model loaded, its
    FastAPI app called in-process; an answer streams back as the app sends it, headed by the id of the replica
    that computes it."""

    def __init__(self, model, state_dir, options, threads=None):
        if threads is not None:
            samebits.set_num_threads(threads)
        self.server = Server(model, state_dir=state_dir, **options)
        self.server.load()
        if self.server.load_error is not None:
            raise self.server.load_error
        self.app = create_app(self.server)
        self.replica_id = serve.get_replica_context().replica_id.unique_id

    async def handle(self, method, path, headers, body, session=None):
        """One HTTP request (`session` is read by the router only), a generator: (status, headers, this
        replica's id) first, then the body chunk by chunk as the app sends it (a stream event by event)."""
        async for item in asgi_exchange(self.app, method, path, headers, body):
            yield (*item, self.replica_id) if isinstance(item, tuple) else item

    def __del__(self):
        if getattr(self, "server", None) is not None:
            self.server.close()


async def _rest_of(chunks):
    """The remaining chunks of a replica's answer; a client that goes away cancels the replica's work."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        chunks.cancel()


ingress_app = FastAPI(title="samebits on Ray Serve", docs_url=None, redoc_url=None, openapi_url=None)


@serve.deployment(ray_actor_options={"num_cpus": 0})
@serve.ingress(ingress_app)
class SamebitsIngress:
    """The HTTP entry: reads each request (bounded by max_body), finds its session and hands it to the replicas'
    deployment handle, whose router picks the replica."""

    def __init__(self, replicas, max_body=1 << 20):
        self.replicas, self.max_body = replicas, max_body

    @ingress_app.api_route("/{path:path}", methods=["GET", "POST", "DELETE", "PUT", "PATCH"])
    async def forward(self, path: str, request: Request):
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body:
                error = ServeError(413, f"the request body exceeds {self.max_body} bytes")
                return JSONResponse(error_body(error), status_code=413)
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS]
        session = session_of(request.method, path, bytes(body))
        chunks = self.replicas.options(stream=True).handle.remote(
            request.method, path, headers, bytes(body), session=session)
        try:
            status, replica_headers, replica = await chunks.__anext__()
            streaming = any(k.lower() == "content-type" and v.startswith("text/event-stream")
                            for k, v in replica_headers)
            # Any other answer is gathered, so that it keeps its Content-Length and a replica dying before its
            # end is still answered 503 below.
            content = b"" if streaming else b"".join([chunk async for chunk in chunks])
        except (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError) as died:
            # The replica went away during the request: whether it finished is unknown, so the client decides
            # whether to retry (a session then continues on another replica from its last saved turn).
            error = ServeError(503, f"the replica serving this request went away: {type(died).__name__}",
                               "server_overloaded", headers={"Retry-After": "1"})
            return JSONResponse(error_body(error), status_code=503, headers=error.headers)
        if streaming:  # passed on event by event; a replica dying mid-stream cuts the stream short
            response = StreamingResponse(_rest_of(chunks), status_code=status)
        else:
            response = Response(content=content, status_code=status)
        for key, value in replica_headers:
            if key.lower() not in _HOP_HEADERS:
                response.headers.append(key, value)
        response.headers[REPLICA_HEADER] = replica
        return response


def build(model=None, replicas=2, state_dir=None, threads=None, replica_cpus=1.0, max_body=1 << 20, **options):
    """The Ray Serve application: the ingress over a deployment of `replicas` replicas of `model` (None: the
    shipped model). Sessions move between replicas only through `state_dir`, which every replica must see (a
    shared filesystem on a cluster); without it a session lives and dies with its replica. `options` are
    Server's (cache_mib, context, max_running, max_waiting)."""
    options = dict(options, max_body=max_body)
    replica = SamebitsReplica.options(num_replicas=replicas, ray_actor_options={"num_cpus": replica_cpus})
    return SamebitsIngress.bind(replica.bind(model, state_dir, options, threads), max_body=max_body)


def app_builder(args):
    """For Ray's own command line: `serve run samebits.serve.ray:app_builder replicas=4 state_dir=/shared/dir`
    (every value is a string there)."""
    known = {"model": str, "replicas": int, "state_dir": str, "threads": int, "replica_cpus": float,
             "max_body": int, "cache_mib": int, "context": int, "max_running": int, "max_waiting": int}
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise ValueError(f"samebits.serve.ray: unknown argument {unknown[0]!r}; known: {', '.join(sorted(known))}")
    return build(**{name: known[name](value) for name, value in args.items()})


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m samebits.serve.ray", description=(
        "The samebits server on Ray Serve: N replicas of one model, session affinity, sessions migrating "
        "between replicas through a shared state directory."))
    parser.add_argument("model", nargs="?", default=None, help="a model path (default: the shipped model)")
    parser.add_argument("--replicas", type=int, default=2, help="replicas of the model (default 2)")
    parser.add_argument("--state-dir", default=None, help="the session directory every replica shares")
    parser.add_argument("--address", default=None, help="the Ray cluster to join (default: start a local one)")
    parser.add_argument("--host", default="127.0.0.1", help="where Ray Serve's HTTP proxy listens")
    parser.add_argument("--port", type=int, default=8000, help="its port (default 8000)")
    parser.add_argument("--replica-cpus", type=float, default=1.0, help="CPUs reserved per replica (default 1)")
    parser.add_argument("--threads", type=int, default=None, help="engine threads per replica")
    parser.add_argument("--cache-mib", type=int, default=256, help="prefix-cache budget per replica in MiB")
    parser.add_argument("--context", type=int, default=1024, help="positions per sequence")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.replicas < 1:
        parser.error("--replicas must be positive")
    ray.init(address=args.address)
    serve.start(http_options={"host": args.host, "port": args.port})
    serve.run(build(args.model, args.replicas, args.state_dir, args.threads, args.replica_cpus,
                    cache_mib=args.cache_mib, context=args.context), name="samebits", blocking=True)
    return 0


if __name__ == "__main__":
    # Run the module under its own name: Ray names the router class by module, which `__main__` would not be
    # on the replicas.
    from samebits.serve.ray import main as main_of_module

    sys.exit(main_of_module())
