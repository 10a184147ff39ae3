#!/usr/bin/env python3
"""The include rules of docs/architecture.md, checked on every #include of the repository.

1. Layers point downward only: vocabulary < core < numerics < blocks < models < io < api. The public
   headers under include/samebits/ count as api, except the vocabulary headers (VOCABULARY below: the
   error type, pins, tensor views, lowbit formats, the JSON value, checkpoint metadata), plain
   declarations that every layer may use and that include nothing but the standard library and each
   other. A file of src/<layer>/ may include headers of its own layer and of the layers below it, never
   of a layer above.
2. Frontends (cli/, python/src/, examples/) include only the public headers (include/samebits/...), the
   headers of their own folder, and system or third-party headers: nothing under src/.
3. Every quoted include resolves (to the includer's folder, src/ or include/) or names no repository path
   (a system or third-party header): a stale path after a move fails here even where nothing compiles it.
tests/, bench/ and fuzz/ may include anything (rule 3 still holds there).

Usage: check_include_rules.py [--root DIR] [--self-test]. Prints one line per violation, `file:line:
message`, and exits 1 when there is any. --self-test first runs the checker on a small tree holding one
case of every rule (each must be caught, and the allowed cases must pass), so that the test can fail.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

LAYERS = ["vocabulary", "core", "numerics", "blocks", "models", "io", "api"]
VOCABULARY = {"errors.hpp", "pin.hpp", "tensor.hpp", "lowbit.hpp", "json.hpp", "checkpoint_info.hpp", "mamba3_reports.hpp", "gguf_value.hpp"}
RANK = {name: i for i, name in enumerate(LAYERS)}
FRONTENDS = ["cli", "python/src", "examples"]
FREE = ["tests", "bench", "fuzz"]
SCANNED = ["src", "include"] + FRONTENDS + FREE
SUFFIXES = {".h", ".hh", ".hpp", ".hxx", ".c", ".cc", ".cpp", ".cxx", ".inc", ".ipp"}
# An #include line: the directive may be indented and spaced; a comment after it is ignored.
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(path: Path, root: Path) -> str | None:
    """The layer a repository file belongs to (api or vocabulary for the public headers), or None."""
    rel = path.relative_to(root).parts
    if rel[0] == "src" and len(rel) > 2 and rel[1] in RANK and rel[1] != "vocabulary":
        return rel[1]
    if rel[0] == "include":
        return "vocabulary" if rel[-1] in VOCABULARY else "api"
    return None


def frontend_of(path: Path, root: Path) -> str | None:
    rel = path.relative_to(root).as_posix()
    for front in FRONTENDS:
        if rel.startswith(front + "/"):
            return front
    return None


def resolve(includer: Path, target: str, quoted: bool, root: Path) -> Path | None:
    """The repository file an include names, looked up as a compiler of this project would: a quoted
    include first beside its includer, then src/ and include/ (the layer and public include roots)."""
    candidates = []
    if quoted:
        candidates.append(includer.parent / target)
    candidates += [root / "src" / target, root / "include" / target]
    for candidate in candidates:
        if candidate.is_file():
            return Path(os.path.normpath(candidate))
    return None


def looks_internal(target: str) -> bool:
    """Whether an unresolved include spells a path of this repository (a layer or the public folder)."""
    first = target.split("/", 1)[0]
    return "/" in target and (first in RANK or first == "samebits")


def check_file(path: Path, root: Path) -> list[str]:
    problems = []
    rel = path.relative_to(root).as_posix()
    own_layer = layer_of(path, root)
    front = frontend_of(path, root)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        return [f"{rel}:0: cannot read ({error})"]
    for number, line in enumerate(lines, start=1):
        match = INCLUDE.match(line)
        if not match:
            continue
        quoted = match.group(1) == '"'
        target = match.group(2).strip()
        found = resolve(path, target, quoted, root)
        where = f"{rel}:{number}"
        if found is None:
            if quoted and looks_internal(target):
                problems.append(f'{where}: "{target}" resolves to no file (stale path?)')
            continue
        found_rel = found.relative_to(root).as_posix()
        target_layer = layer_of(found, root)
        if own_layer is not None and target_layer is not None and RANK[target_layer] > RANK[own_layer]:
            problems.append(f"{where}: layer {own_layer} includes {found_rel} of the higher layer {target_layer}")
        if front is not None and found_rel.startswith("src/"):
            problems.append(f"{where}: frontend {front}/ includes the internal header {found_rel} "
                            "(frontends include only include/samebits/ headers)")
    return problems


def check_tree(root: Path) -> list[str]:
    problems = []
    for top in SCANNED:
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                problems += check_file(path, root)
    return problems


def self_test() -> list[str]:
    """One case of every rule in a scratch tree: the violations must be reported, the rest must pass."""
    files = {
        "src/core/base.hpp": "#pragma once\n",
        "src/numerics/up.cpp": '#include "core/base.hpp"\n#include "blocks/b.hpp"\n',  # line 2: upward
        "src/blocks/b.hpp": '#include "numerics/n.hpp"\n#include <vector>\n',
        "src/numerics/n.hpp": '#include "core/base.hpp"\n',
        "src/models/m.cpp": '#include "samebits/public.hpp"\n#include <samebits/errors.hpp>\n',  # line 1: up
        "src/api/a.cpp": '#include "samebits/public.hpp"\n#include "models/gone.hpp"\n',  # line 2: stale
        "include/samebits/public.hpp": '#include "core/base.hpp"\n#include <samebits/errors.hpp>\n',
        "include/samebits/errors.hpp": '#include <string>\n#include "core/base.hpp"\n',  # line 2: vocabulary up
        "cli/main.cpp": '#include "samebits/public.hpp"\n#include "own.hpp"\n  #  include <blocks/b.hpp>\n',
        "cli/own.hpp": "#include <string>\n",
        "tests/t.cpp": '#include "blocks/b.hpp"\n#include "api/nothing_here.hpp"\n',  # line 2: stale
    }
    expected = {"src/numerics/up.cpp:2", "src/models/m.cpp:1", "src/api/a.cpp:2", "cli/main.cpp:3",
                "tests/t.cpp:2", "include/samebits/errors.hpp:2"}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve()
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        found = {problem.split(": ", 1)[0] for problem in check_tree(root)}
    if found != expected:
        return [f"self-test: reported {sorted(found)}, expected {sorted(expected)}"]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=Path(__file__).resolve().parent.parent, type=Path)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    problems = self_test() if args.self_test else []
    problems += check_tree(args.root.resolve())
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} include rule violation(s)", file=sys.stderr)
        return 1
    print("include rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
