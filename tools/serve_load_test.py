#!/usr/bin/env python3
"""Load test of the server (docs/serving.md §6), loopback only, bounded in count and time: one stream alone,
then N concurrent streaming requests on the shipped model. Reports errors, mixed streams (each stream's text
against the same request served alone), aggregate decode tokens/s against one stream's, and p50 / p99 time
to first token. A benchmark, not a test: figures depend on the machine and its load.

    python tools/serve_load_test.py [--concurrency 64] [--max-tokens 64] [--threads 2]
"""

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))

import httpx  # noqa: E402
from serve_support import ServerProcess  # noqa: E402

PROMPTS = ["In the beginning", "And God said, Let there be light", "The LORD is my shepherd; I shall not want.",
           "And it came to pass", "Blessed are the poor in spirit"]


async def stream(client, url, body):
    """(text, tokens, seconds to first token, seconds in all, error)."""
    start = time.perf_counter()
    first, text, tokens = None, "", 0
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as response:
            if response.status_code != 200:
                return "", 0, None, time.perf_counter() - start, f"HTTP {response.status_code}"
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk["choices"]:
                    if choice["text"] or choice["finish_reason"] is None:
                        tokens += 1
                        if first is None:
                            first = time.perf_counter() - start
                    text += choice["text"]
    except httpx.HTTPError as error:
        return text, tokens, first, time.perf_counter() - start, repr(error)
    return text, tokens, first, time.perf_counter() - start, None


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def run(args):
    server = ServerProcess("--cache-mib", args.cache_mib, "--max-running", args.concurrency, threads=args.threads)
    try:
        limits = httpx.Limits(max_connections=args.concurrency + 4)
        async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as client:
            bodies = [{"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": args.max_tokens, "seed": i,
                       "temperature": 0.8, "stream": True} for i in range(args.concurrency)]
            alone = []
            for body in bodies:  # the reference texts, one at a time (also warms the cache's prompt ends)
                alone.append(await stream(client, server.url, body))
            single = alone[0]
            start = time.perf_counter()
            results = await asyncio.gather(*[stream(client, server.url, body) for body in bodies])
            wall = time.perf_counter() - start
    finally:
        server.stop()
    errors = [r[4] for r in results if r[4]]
    mixed = sum(1 for got, want in zip(results, alone) if got[0] != want[0])
    tokens = sum(r[1] for r in results)
    ttft = [r[2] for r in results if r[2] is not None]
    one_stream = single[1] / single[3]
    report = {
        "concurrency": args.concurrency, "max_tokens": args.max_tokens, "threads": args.threads,
        "errors": len(errors), "mixed_streams": mixed, "tokens": tokens, "wall_s": round(wall, 3),
        "aggregate_tokens_per_s": round(tokens / wall, 1), "one_stream_tokens_per_s": round(one_stream, 1),
        "speedup": round(tokens / wall / one_stream, 2),
        "ttft_p50_s": round(statistics.median(ttft), 4) if ttft else None,
        "ttft_p99_s": round(percentile(ttft, 0.99), 4) if ttft else None,
    }
    print(json.dumps(report, indent=2))
    if errors:
        print("first errors:", errors[:3], file=sys.stderr)
    return 0 if not errors and not mixed else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("concurrency", 64), ("max-tokens", 64), ("threads", 2), ("cache-mib", 0)):
        parser.add_argument("--" + name, type=int, default=default)
    args = parser.parse_args()
    args.timeout = 300.0
    if not 1 <= args.concurrency <= 256 or not 1 <= args.max_tokens <= 512:
        parser.error("--concurrency must be in [1, 256] and --max-tokens in [1, 512]")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
