"""Running `python -m samebits.serve` on loopback for the server tests and the load test: a free port, a child
process, waiting for /health, and SIGKILL."""

import os
import signal
import socket
import subprocess
import sys
import time

import httpx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, *args, threads=1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, SAMEBITS_NUM_THREADS=str(threads))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "samebits.serve", "--port", str(self.port), *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError("the server exited: " + self.process.stdout.read().decode(errors="replace"))
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the server did not become healthy in 60 s")
            time.sleep(0.1)

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()
