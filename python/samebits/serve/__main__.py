"""`python -m samebits.serve [MODEL] [--host H] [--port P] [--state-dir DIR] [--cache-mib N] ...`: the server on
uvicorn (docs/serving.md §1)."""

import argparse
import sys


def parse(argv):
    parser = argparse.ArgumentParser(prog="samebits serve", description=(
        "An OpenAI-compatible server: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics, "
        "/tokenize, /detokenize, DELETE /v1/sessions/S. Answers are bitwise those of the same request served "
        "alone, from a cold start, before or after a restart."))
    parser.add_argument("model", nargs="?", default=None,
                        help="a Samba checkpoint or a Hugging Face directory (default: the shipped model)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--state-dir", default=None, help="persist every session here after each request")
    parser.add_argument("--cache-mib", type=int, default=256, help="prefix-cache budget in MiB (0 = off)")
    parser.add_argument("--context", type=int, default=1024, help="positions per sequence (prompt + completion)")
    parser.add_argument("--max-running", type=int, default=64, help="sequences in the running batch")
    parser.add_argument("--max-waiting", type=int, default=256, help="queued sequences before 503")
    parser.add_argument("--max-body", type=int, default=1 << 20, help="largest request body in bytes")
    parser.add_argument("--threads", type=int, default=None, help="engine worker threads (default: every core)")
    args = parser.parse_args(argv)
    for name in ("context", "max_running", "max_waiting", "max_body"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.cache_mib < 0:
        parser.error("--cache-mib must not be negative")
    return args


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        import uvicorn
    except ImportError:
        sys.stderr.write("samebits serve: needs FastAPI and uvicorn (pip install fastapi uvicorn)\n")
        return 2
    import samebits

    from .app import Server, create_app

    if args.threads is not None:
        samebits.set_num_threads(args.threads)
    server = Server(args.model, state_dir=args.state_dir, cache_mib=args.cache_mib, context=args.context,
                    max_running=args.max_running, max_waiting=args.max_waiting, max_body=args.max_body)
    uvicorn.run(create_app(server), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
