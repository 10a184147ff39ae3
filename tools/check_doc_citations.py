#!/usr/bin/env python3
"""Every citation in the code must resolve inside the repository.

Scans the source tree for citations of the project's documents and exits 1, naming file:line, when
  * a `docs/<name>.md` citation names a file that does not exist under docs/;
  * a section it cites (`docs/<name>.md §4.2`, `§6a`, `§A`, lists such as `§1.1 and §1.3`, ranges such
    as `§3.2-§3.9`) has no heading of that number in the file;
  * a bare spec citation remains (`blocks.md 4.2`, `numerics.md` without `docs/`), which would point at
    a document outside the repository.
A section heading is a markdown heading whose first word is the number: `## 4. ...`, `### 4.2 ...`,
`## 6a. ...`, `## A. ...`.

Usage: check_doc_citations.py [REPO_ROOT]   (default: the parent of this file's folder)
"""

import re
import sys
from pathlib import Path

SCANNED = ["src", "include", "python", "cli", "tests", "fuzz", "bench", "tools", "examples", "scripts", "assets",
           "CMakeLists.txt", "README.md"]
SUFFIXES = {".c", ".cc", ".cpp", ".h", ".hpp", ".py", ".sh", ".cmake", ".txt", ".md", ".toml", ".in"}
SPEC_NAMES = ("numerics", "blocks", "formats", "api", "goldens", "models", "gguf")

SECTION = r"[0-9]+(?:[a-z](?![A-Za-z]))?(?:\.[0-9]+)*|[A-Z](?![A-Za-z])"
HEADING = re.compile(r"^#{1,6}\s+(?:§\s*)?(" + SECTION + r")(?:[.\s]|$)")
# docs/<name>.md followed by any number of §-sections joined by commas, "and", "/" or a dash.
CITATION = re.compile(r"docs/([A-Za-z0-9_-]+)\.md((?:(?:\s*(?:,|and|/|-|–)\s*|\s+)?§\s?(?:" + SECTION + r"))*)")
CITED_SECTION = re.compile(r"§\s?(" + SECTION + r")")
# Inside docs/: a relative link to a sibling document, optionally followed by sections the same way.
LINK = re.compile(r"\]\(([A-Za-z0-9_-]+)\.md(?:#[^)]*)?\)((?:(?:\s*(?:,|and|/|-|–)\s*|\s+)?§\s?(?:" + SECTION
                  + r"))*)")
BARE = re.compile(r"(?<![\w/.-])(" + "|".join(SPEC_NAMES) + r")\.md\b")


def sections_of(path):
    ids = set()
    fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        match = None if fence else HEADING.match(line)
        if match:
            ids.add(match.group(1))
    return ids


def scanned_files(root):
    for entry in SCANNED:
        path = root / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            for file in sorted(path.rglob("*")):
                # This file's own examples of faults are not citations.
                if file.is_file() and file.suffix in SUFFIXES and "fixtures" not in file.parts \
                        and file.relative_to(root).as_posix() != "tools/check_doc_citations.py":
                    yield file


def check(root):
    docs = root / "docs"
    cache = {}
    problems = []
    count = 0
    documents = sorted(docs.glob("*.md")) if docs.is_dir() else []
    for file in [*scanned_files(root), *documents]:
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        rel = file.relative_to(root)
        in_docs = file.parent == docs
        for number, line in enumerate(text.splitlines(), 1):
            for match in (LINK if in_docs else CITATION).finditer(line):
                count += 1
                name = match.group(1)
                target = docs / f"{name}.md"
                if name not in cache:
                    cache[name] = sections_of(target) if target.is_file() else None
                if cache[name] is None:
                    problems.append(f"{rel}:{number}: docs/{name}.md does not exist")
                    continue
                for section in CITED_SECTION.findall(match.group(2)):
                    if section not in cache[name]:
                        problems.append(f"{rel}:{number}: docs/{name}.md has no section §{section}")
            for match in () if in_docs else BARE.finditer(line):
                problems.append(f"{rel}:{number}: bare citation '{match.group(0)}' points outside the "
                                f"repository; cite docs/{match.group(1)}.md")
    return count, problems


def self_test():
    """The checker on a tiny synthetic tree: what must pass passes and every kind of fault is named."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        (root / "src").mkdir()
        (root / "docs" / "x.md").write_text("# X\n## 1. One\n### 1.2 Sub\n## 6a. Hints\n## A. Table\n"
                                            "```\n## 9. inside a fence\n```\n", encoding="utf-8")
        (root / "docs" / "z.md").write_text("# Z\nSee [x.md](x.md) §1.2 and [x](x.md#one).\n", encoding="utf-8")
        good = "// docs/x.md §1, §1.2 and §6a; docs/x.md §A; docs/x.md §1-§1.2; docs/x.md alone\n"
        (root / "src" / "good.cpp").write_text(good, encoding="utf-8")
        count, problems = check(root)
        if count != 6 or problems:
            return f"a valid tree gave {count} citations and {problems}"
        bad = ("// docs/x.md §1.3\n// docs/x.md §1 and §9\n// docs/y.md §1\n// blocks.md 4.2\n"
               "# (numerics.md)\n")
        (root / "src" / "bad.py").write_text(bad, encoding="utf-8")
        (root / "docs" / "w.md").write_text("[x.md](x.md) §7 and [v](v.md)\n", encoding="utf-8")
        count, problems = check(root)
        wanted = ["docs/w.md:1: docs/x.md has no section §7", "docs/w.md:1: docs/v.md does not exist","src/bad.py:1: docs/x.md has no section §1.3", "src/bad.py:2: docs/x.md has no section §9",
                  "src/bad.py:3: docs/y.md does not exist", "src/bad.py:4: bare citation 'blocks.md'",
                  "src/bad.py:5: bare citation 'numerics.md'"]
        for want in wanted:
            if not any(problem.startswith(want) for problem in problems):
                return f"missed: {want} (got {problems})"
        if len(problems) != len(wanted):
            return f"unexpected problems: {problems}"
    return None


def main(argv):
    failure = self_test()
    if failure:
        print(f"check_doc_citations: self-test failed: {failure}")
        return 1
    root = Path(argv[1]).resolve() if len(argv) > 1 else Path(__file__).resolve().parents[1]
    count, problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_doc_citations: {len(problems)} problem(s) in {count} docs/ citation(s)")
        return 1
    if count == 0:
        print("check_doc_citations: no docs/ citation found; the scan itself is broken")
        return 1
    print(f"check_doc_citations: {count} docs/ citation(s), every one resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
