"""The README's code runs as written: every fenced block marked `<!-- runnable -->` on the line before its
fence is executed from the repository root (python blocks with this interpreter, sh blocks with bash -e,
the `samebits` command being the installed CLI, as in test_cli.py) and must exit 0. The README stays within
150 lines and marks at least one python and one sh block; the two top-level scripts are never marked."""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARK = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w+)\s*$")


def marked_blocks(text):
    """[(language, first line number, code)] of the marked fenced blocks, in order."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        opening = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        assert opening, f"README.md:{i + 1}: {MARK} must sit right before a ``` fence with a language"
        end = i + 2
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"README.md:{i + 2}: the marked block is never closed"
        blocks.append((opening.group(1), i + 3, "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


BLOCKS = marked_blocks(README.read_text(encoding="utf-8"))


def test_readme_is_short_and_marks_both_kinds():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150
    languages = [language for language, _, _ in BLOCKS]
    assert "python" in languages, "no ```python block of README.md is marked runnable"
    assert "sh" in languages, "no ```sh block of README.md is marked runnable"
    assert set(languages) <= {"python", "sh"}, f"only python and sh blocks can run: {languages}"
    for _, line, code in BLOCKS:
        # They build and test everything, this test included: running them here would recurse.
        assert "run_main.sh" not in code and "test.sh" not in code, f"README.md:{line}: a top-level script is marked"


@pytest.fixture(scope="module")
def cli_dir(tmp_path_factory):
    """A folder holding a `samebits` command that runs the CLI installed with the package."""
    folder = tmp_path_factory.mktemp("cli")
    command = folder / "samebits"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m samebits._cli "$@"\n', encoding="utf-8")
    command.chmod(command.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


@pytest.mark.parametrize("language,line,code", BLOCKS, ids=[f"{lang}-line{line}" for lang, line, _ in BLOCKS])
def test_marked_block_runs(language, line, code, cli_dir, tmp_path):
    script = tmp_path / ("block.py" if language == "python" else "block.sh")
    script.write_text(code, encoding="utf-8")
    env = dict(os.environ, PATH=f"{cli_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    command = [sys.executable, str(script)] if language == "python" else ["bash", "-e", str(script)]
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (
        f"README.md block at line {line} ({language}) exited {out.returncode}\n"
        f"stdout:\n{out.stdout[-2000:]}\nstderr:\n{out.stderr[-2000:]}"
    )
