"""Scale-out on Ray Serve (docs/serving.md §7): answers through a local Ray deployment of two replicas equal the
single-process server's bitwise, a session's turns stay on one replica, and a session whose replica is killed
continues on another bitwise; a stream arrives event by event. Skipped when Ray Serve is not installed."""

import asyncio
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from serve_support import ServerProcess, free_port  # noqa: E402

TURNS = [("In the beginning", 1), (" And God said", 2), (" and it was so.", 3)]
REQUESTS = [
    {"prompt": "In the beginning God created", "max_tokens": 12, "temperature": 0, "logprobs": 2},
    {"prompt": "And the earth was without form", "max_tokens": 12, "temperature": 0.9, "top_k": 20, "seed": 7},
    {"prompt": "Let there be light", "max_tokens": 10, "temperature": 0.7, "top_p": 0.9, "seed": 3, "n": 2,
     "echo": True, "logprobs": 1},
    {"prompt": "and darkness", "max_tokens": 8, "temperature": 1.2, "seed": 11, "stop": ["e"], "stream": True},
]


@pytest.fixture(scope="module")
def cold():
    server = ServerProcess("--cache-mib", 0)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two replicas of the shipped model on a local Ray instance (2 CPUs), Serve's proxy on loopback."""
    ray = pytest.importorskip("ray", reason="Ray Serve is not installed (pip install 'samebits[ray]')")
    serve = pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'ray[serve]')")
    from samebits.serve.ray import build

    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(build(replicas=2, state_dir=str(tmp_path_factory.mktemp("ray_sessions")), threads=1,
                        cache_mib=16), name="samebits", route_prefix="/")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


def _post(client, url, body):
    """A completion; a 503 (a replica going away) is retried for up to 60 s. The answer and its replica."""
    deadline = time.monotonic() + 60
    while True:
        response = client.post(url + "/v1/completions", json=body)
        if response.status_code != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert response.status_code == 200, response.text
    if body.get("stream"):
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        answer = [httpx.Response(200, content=e).json()["choices"] for e in events[:-1]]
    else:
        answer = response.json()["choices"]
    return answer, response.headers.get("x-samebits-replica")


def _turns(url, name, turns):
    with httpx.Client(timeout=60) as client:
        return [_post(client, url, {"prompt": prompt, "max_tokens": 12, "seed": seed, "temperature": 0.8,
                                    "logprobs": 1, "session_id": name}) for prompt, seed in turns]


def test_answers_through_ray_equal_the_single_process_server(cluster, cold):
    with httpx.Client(timeout=60) as client:
        for body in REQUESTS:
            through_ray, replica = _post(client, cluster, body)
            alone, _ = _post(client, cold.url, body)
            assert through_ray == alone, body
            assert replica
        assert client.get(cluster + "/health").json() == {"status": "ok"}
        assert client.post(cluster + "/v1/completions", content=b"{bad").status_code == 400


def test_a_session_stays_on_one_replica_and_continues_bitwise(cluster, cold):
    reference = [answer for answer, _ in _turns(cold.url, "reference-affinity", TURNS)]
    # First turns of up to 12 sessions until both replicas hold one (all 12 on one replica: odds 1 in 2048).
    first_turns = {}
    for i in range(12):
        answer, replica = _turns(cluster, f"affinity-{i}", TURNS[:1])[0]
        assert answer == reference[0]
        first_turns.setdefault(replica, f"affinity-{i}")
        if len(first_turns) == 2:
            break
    assert len(first_turns) == 2, "every session went to one replica"
    for replica, name in first_turns.items():
        later = _turns(cluster, name, TURNS[1:])
        assert [answer for answer, _ in later] == reference[1:]
        assert {served_by for _, served_by in later} == {replica}


def test_a_stream_through_ray_arrives_event_by_event(cluster, cold):
    body = {"prompt": "In the beginning", "max_tokens": 128, "temperature": 0, "stream": True}
    with httpx.Client(timeout=60) as client:
        alone, _ = _post(client, cold.url, body)
        with client.stream("POST", cluster + "/v1/completions", json=body) as response:
            assert response.status_code == 200
            assert "content-length" not in response.headers  # not one body of known size
            assert response.headers["x-samebits-replica"]
            events, first_at = [], None
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
                    first_at = response.num_bytes_downloaded if first_at is None else first_at
            total = response.num_bytes_downloaded
    assert events.count("[DONE]") == 1 and events[-1] == "[DONE]"
    assert len(events) > 3
    # The first event was read while the rest was still to come: an answer sent whole at its end arrives in one
    # read (a few kB on loopback), so the bytes in hand at the first event would be all of them.
    assert first_at < total
    assert [httpx.Response(200, content=e).json()["choices"] for e in events[:-1]] == alone


def _start(status=200):
    return {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/event-stream")]}


def test_the_in_process_exchange_passes_each_chunk_on_as_the_app_sends_it():
    """The replica's bridge to its app hands over a chunk before the app has sent the next one (the app waits
    until the caller holds the first chunk; a bridge that buffered the answer would never return)."""
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'ray[serve]')")
    from samebits.serve.ray import asgi_exchange

    async def scenario():
        second = asyncio.Event()
        seen = {}

        async def app(scope, receive, send):
            seen.update(method=scope["method"], path=scope["path"], headers=scope["headers"], body=await receive())
            await send(_start())
            await send({"type": "http.response.body", "body": b"one", "more_body": True})
            await second.wait()
            await send({"type": "http.response.body", "body": b"two", "more_body": False})

        chunks = asgi_exchange(app, "POST", "v1/completions", [("Content-Type", "application/json")], b"{}")
        assert await chunks.__anext__() == (200, [("content-type", "text/event-stream")])
        assert await chunks.__anext__() == b"one"
        second.set()
        assert [chunk async for chunk in chunks] == [b"two"]
        assert seen == {"method": "POST", "path": "/v1/completions", "headers": [(b"content-type", b"application/json")],
                        "body": {"type": "http.request", "body": b"{}", "more_body": False}}

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_the_in_process_exchange_stops_the_app_when_the_caller_stops_reading():
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'ray[serve]')")
    from samebits.serve.ray import asgi_exchange

    async def scenario():
        stopped = asyncio.Event()

        async def app(scope, receive, send):
            await receive()
            await send(_start())
            try:
                while True:
                    await send({"type": "http.response.body", "body": b"tick", "more_body": True})
                    await asyncio.sleep(0)  # a token's worth of work between chunks
            except asyncio.CancelledError:
                stopped.set()
                raise

        chunks = asgi_exchange(app, "GET", "stream", [], b"")
        assert (await chunks.__anext__())[0] == 200
        assert await chunks.__anext__() == b"tick"
        await chunks.aclose()
        assert stopped.is_set()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def _kill_replica(replica_id):
    import ray

    names = [actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)
             if replica_id in actor["name"]]
    assert len(names) == 1, names
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)


def test_a_session_whose_replica_is_killed_continues_on_another_bitwise(cluster, cold):
    reference = [answer for answer, _ in _turns(cold.url, "reference-migration", TURNS)]
    before = _turns(cluster, "moving", TURNS[:2])
    first_replica = before[0][1]
    assert before[1][1] == first_replica
    _kill_replica(first_replica)
    after = _turns(cluster, "moving", TURNS[2:])
    assert after[0][1] != first_replica
    assert [answer for answer, _ in before + after] == reference
    with httpx.Client(timeout=60) as client:
        assert client.delete(cluster + "/v1/sessions/moving").status_code == 200
    assert [answer for answer, _ in _turns(cluster, "moving", TURNS[:1])] == reference[:1]


def test_a_session_moving_between_servers_and_back_continues_bitwise(tmp_path, cold):
    """Migration through the shared state directory without Ray: turns alternate between two servers, so the
    first one holds a stale copy of the session when it comes back to it, and must read the newer one."""
    from fastapi.testclient import TestClient

    from samebits.serve import Server, create_app

    reference = [answer for answer, _ in _turns(cold.url, "reference-alternating", TURNS)]
    with TestClient(create_app(Server(state_dir=tmp_path, cache_mib=0))) as first, \
            TestClient(create_app(Server(state_dir=tmp_path, cache_mib=0))) as second:
        for client in (first, second):
            deadline = time.monotonic() + 60
            while client.get("/health").status_code != 200:
                assert time.monotonic() < deadline, "the model did not load in 60 s"
                time.sleep(0.1)
        answers = [_post(client, "", {"prompt": prompt, "max_tokens": 12, "seed": seed, "temperature": 0.8,
                                      "logprobs": 1, "session_id": "alternating"})[0]
                   for client, (prompt, seed) in zip((first, second, first), TURNS)]
    assert answers == reference


def test_rays_command_line_builder_takes_strings_and_names_an_unknown_argument():
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'ray[serve]')")
    from samebits.serve.ray import app_builder

    assert type(app_builder({"replicas": "3", "state_dir": "/tmp/s", "threads": "1"})).__name__ == "Application"
    with pytest.raises(ValueError, match="unknown argument 'replica'"):
        app_builder({"replica": "3"})
