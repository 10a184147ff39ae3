"""Peak memory and time of loading a Samba checkpoint, v2 archive and legacy JSON (issue 8, item 3).

Writes the checkpoints into a temporary folder (or --dir), then loads each in a fresh process and prints
one row per load: parameter bytes, file bytes, peak RSS growth, growth / parameter bytes, load seconds.
Python rows load through samebits.SambaInference.from_checkpoint; a `cli` row runs the C++
SambaInference::from_checkpoint through `samebits generate --max-tokens 1` (growth over the same command
refusing a missing file, so process start-up is not counted; that row includes one decode step).

    python3 bench/load_memory.py [--cli build/samebits] [--dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "python"))

import samba_checkpoint_writer as writer  # noqa: E402
from test_load_memory import _LOAD_CHILD, LARGE_CONFIG, write_large_legacy, write_large_stream  # noqa: E402

# The legacy file is hex text (six times its parameter bytes) under a 256 MiB limit: a ~10 M-parameter model.
LEGACY_CONFIG = writer.config_dict(256, 320, ["mamba3", "attention"] * 4, n_heads=5, intermediate=1280)


def python_load(path, scratch):
    done = subprocess.run([sys.executable, "-c", _LOAD_CHILD, str(path), str(scratch / "logits.npy")],
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["growth"], result["seconds"]


def child_peak(command):
    """Peak RSS (bytes) and wall seconds of one command. GNU time forks it from a ~2 MB process: a child's
    getrusage maximum starts from its parent's size at fork, so forking it from this Python process would
    hide the first ~10 MB of its own growth."""
    timer = "/usr/bin/time"
    if not os.path.exists(timer):
        raise SystemExit("the cli rows need GNU time at /usr/bin/time")
    start = time.perf_counter()
    done = subprocess.run([timer, "-f", "MAXRSS %M", *command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    seconds = time.perf_counter() - start
    kilobytes = int(done.stderr.strip().splitlines()[-1].split()[-1])
    return kilobytes * 1024, seconds


def cli_load(cli, path, scratch):
    peak, seconds = child_peak([cli, "generate", str(path), "--prompt", "a", "--max-tokens", "1"])
    base, _ = child_peak([cli, "generate", str(scratch / "missing.samba"), "--prompt", "a", "--max-tokens", "1"])
    return peak - base, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", help="path of the samebits CLI, for the C++ rows")
    parser.add_argument("--dir", help="where to write the checkpoints (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        scratch = Path(args.dir or temporary)
        scratch.mkdir(parents=True, exist_ok=True)
        files = [("v2", *write_large_stream(scratch / "large.samba", LARGE_CONFIG)),
                 ("v2", *write_large_stream(scratch / "legacy-sized.samba", LEGACY_CONFIG)),
                 ("legacy", *write_large_legacy(scratch / "legacy.json", LEGACY_CONFIG))]
        print(f"{'format':<8}{'via':<8}{'parameter bytes':>16}{'file bytes':>14}{'peak RSS growth':>17}"
              f"{'ratio':>8}{'load s':>8}")
        for kind, path, parameter_bytes in files:
            loaders = [("python", python_load)]
            if args.cli:
                loaders.append(("cli", lambda p, s: cli_load(args.cli, p, s)))
            for via, load in loaders:
                growth, seconds = load(path, scratch)
                print(f"{kind:<8}{via:<8}{parameter_bytes:>16,}{os.path.getsize(path):>14,}{growth:>17,}"
                      f"{growth / parameter_bytes:>8.3f}{seconds:>8.2f}")


if __name__ == "__main__":
    main()
