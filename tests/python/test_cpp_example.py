"""The installed C++ package: examples/samba_greedy, built with find_package(samebits) by scripts/test.sh,
decodes like the Python API and checks decode == forward itself."""

import os
import subprocess

import numpy as np
import pytest

import samba_checkpoint_writer as writer
from samebits._samba import SambaInference

BINARY = os.environ.get("SAMEBITS_EXAMPLE_BINARY")


@pytest.mark.skipif(not BINARY, reason="scripts/test.sh builds the example and sets SAMEBITS_EXAMPLE_BINARY")
def test_example_greedy_matches_python(tmp_path):
    path = writer.write_stream(tmp_path / "small.ckpt", writer.example_config())
    out = subprocess.run([BINARY, str(path), "Hello", "12"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    tokens_line, verdict = out.stdout.strip().splitlines()
    assert verdict == "decode == forward: yes"
    model = SambaInference.from_checkpoint(path)
    ids = [ord(c) for c in "Hello"]
    state = model.allocate_state(1, len(ids) + 12)
    logits = model.forward(np.array([ids]), state)[0, -1]
    want = []
    for _ in range(12):
        token = int(np.argmax(logits))  # lowest index on ties, as the example
        want.append(token)
        logits = model.step(np.array([token]), state)[0]
    assert [int(t) for t in tokens_line.split()] == want
