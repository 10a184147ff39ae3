"""The hostile-input table (issue 8, item 4): every row of hostile_catalogue.py runs in a child process, so a
crash or a hang is seen (as the rows the child never reported); every row must be refused with an allowed
exception type (or, on the command line, a non-zero exit and a message), or be one of the few inputs the
catalogue marks as accepted by design with a passing check; whatever the row handed over (a state, an
array, a file) must come back byte for byte unchanged. The table rendered from the rows must equal the
committed docs/hostile-inputs.md; with SAMEBITS_UPDATE_DOCS=1 the test rewrites that file instead."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import samebits

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CATALOGUE = HERE / "hostile_catalogue.py"
DOC = ROOT / "docs" / "hostile-inputs.md"
CHILD_TIMEOUT_S = 900
MESSAGE_LIMIT = 160  # characters of a message's first line kept in the table


@pytest.fixture(scope="module")
def run():
    """(header, rows, child) of one child run of the whole catalogue."""
    env = dict(os.environ)
    env.pop("SAMEBITS_SIMD", None)
    child = subprocess.run([sys.executable, str(CATALOGUE)], capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                           env=env, cwd=str(ROOT))
    lines = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    assert lines and "rows" in lines[0], f"the catalogue child printed no header; stderr:\n{child.stderr[-3000:]}"
    return lines[0], lines[1:], child


def _describe(row):
    return f"#{row['index']} [{row['category']}] {row['surface']}: {row['input']}"


def test_child_exits_cleanly_and_reports_every_row(run):
    header, rows, child = run
    reported = [row["index"] for row in rows]
    missing = sorted(set(range(1, header["rows"] + 1)) - set(reported))
    assert child.returncode == 0 and not missing, (
        f"the catalogue child exited with {child.returncode}; rows never reported (the first one crashed or hung): "
        f"{missing[:5]}; stderr tail:\n{child.stderr[-3000:]}")
    assert reported == list(range(1, header["rows"] + 1))


def test_every_row_is_refused_or_accepted_by_design(run):
    _, rows, _ = run
    bad = [f"{_describe(r)} -> {r['result']}: {r['error_type']}: {r['message']}" for r in rows
           if r["result"] not in ("refused", "accepted")]
    assert not bad, "rows neither refused nor accepted by design:\n" + "\n".join(bad)
    # An "accepted" row must have been declared so by the catalogue, never a refusal row that returned.
    assert all(r["expect"] == "accept" for r in rows if r["result"] == "accepted")


def test_what_a_row_handed_over_is_unchanged(run):
    _, rows, _ = run
    changed = [_describe(r) for r in rows if r["unchanged"] is False]
    assert not changed, "a refused call changed the state, array or file it was given:\n" + "\n".join(changed)
    assert sum(r["unchanged"] is True for r in rows) >= 150  # most rows hand over something to check


def test_catalogue_covers_every_kind_and_every_public_class(run):
    _, rows, _ = run
    assert len(rows) >= 80
    categories = {r["category"] for r in rows}
    for kind in ("file: Samba v2 archive", "file: Samba legacy JSON", "file: MLP checkpoint", "array",
                 "array: weights", "array: state buffers", "ids", "state", "lengths", "argument", "command line",
                 "causal_lm"):
        assert kind in categories, kind
    surfaces = " ".join(r["surface"] for r in rows)
    public = [name for name in samebits.__all__ if isinstance(getattr(samebits, name), type)]
    assert len(public) == 14
    for name in public + ["lowbit.", "set_num_threads"]:
        assert name in surfaces, f"no hostile row calls {name}"
    assert sum(r["error_type"] == "NotImplementedError" for r in rows) >= 5
    assert sum(r["category"] == "command line" for r in rows) >= 10


# ------------------------------------------------------------------------------------ the document

def _plain(text):
    """A table cell of plain text: pipes escaped, angle brackets as entities (so '<f4' is not HTML)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text):
    """A table cell as a code span (messages keep their characters); pipes escaped for the table."""
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 1].rstrip() + "…"
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if text else ""


def _unchanged(value):
    return {True: "yes", False: "**NO**", None: "—"}[value]


def render(header, rows):
    results = Counter(r["result"] for r in rows)
    crashes = header["rows"] - len(rows) + results["crash"]
    silent = results["silent-acceptance"]
    other = sum(n for result, n in results.items() if result not in ("refused", "accepted", "crash",
                                                                     "silent-acceptance"))
    by_category = Counter(r["category"] for r in rows)
    types = Counter(r["error_type"] if not r["error_type"].startswith("exit ") else "non-zero exit" for r in rows)
    checked = sum(r["unchanged"] is True for r in rows)
    out = [
        "# Hostile inputs",
        "",
        "Generated by `tests/python/test_hostile_inputs.py` from the rows of `tests/python/hostile_catalogue.py`;",
        "do not edit by hand. The test fails when this file differs from what the rows give now; regenerate it with",
        "`SAMEBITS_UPDATE_DOCS=1 python3 -m pytest -q tests/python/test_hostile_inputs.py`.",
        "",
        f"**{header['rows']} rows: {results['refused']} refused, {results['accepted']} accepted by design "
        f"(checked), {crashes} crashes, {silent} silent acceptances"
        + (f", {other} other failures" if other else "") + ".**",
        "",
        "Every row runs in one child process of the test, so a crash or a hang would show as a row never",
        "reported. A row passes when the call raises one of the types allowed for it: ValueError, TypeError,",
        "NotImplementedError (two rows also allow the KeyError / OverflowError the interface documents; rows that",
        "ask for an allocation beyond any address space also allow MemoryError). On the command line (the",
        "installed `samebits` entry point) a row passes when it exits with code 1 (refused) or 2 (usage) and a",
        "message; the message column holds the first line of stderr (for `info`, its REFUSED verdict line).",
        "A call that returns normally is a silent acceptance and fails the test, except for the rows marked",
        "*accepted* — legitimate inputs that look hostile (strided, reversed or Fortran-order arrays, values the",
        "spec defines) — whose result is checked instead. *state unchanged* compares, byte for byte, what the",
        f"row handed over (a state, the input arrays, the file) before and after the call ({checked} rows; a dash",
        "marks a row that hands over nothing mutable). The run's temporary directory is written `<tmp>`.",
        "",
        "| category | rows |",
        "|---|---|",
        *(f"| {_plain(category)} | {count} |" for category, count in by_category.items()),
        "",
        "| outcome | rows |",
        "|---|---|",
        *(f"| {_plain(kind)} | {count} |" for kind, count in sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
        "",
        "| # | category | surface | input | error type | message (first line) | state unchanged |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(f"| {r['index']} | {_plain(r['category'])} | {_plain(r['surface'])} | {_plain(r['input'])} | "
                   f"{_plain(r['error_type'])} | {_code(r['message'])} | {_unchanged(r['unchanged'])} |")
    return "\n".join(out) + "\n"


def test_document_matches_the_rows(run):
    header, rows, _ = run
    text = render(header, rows)
    if os.environ.get("SAMEBITS_UPDATE_DOCS") == "1":
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text, encoding="utf-8")
    assert DOC.exists(), "docs/hostile-inputs.md is missing; run with SAMEBITS_UPDATE_DOCS=1"
    committed = DOC.read_text(encoding="utf-8")
    if committed != text:
        old, new = committed.splitlines(), text.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        pytest.fail(
            "docs/hostile-inputs.md differs from the rows (regenerate with SAMEBITS_UPDATE_DOCS=1); first difference "
            f"at line {first + 1}:\n  committed: {old[first] if first < len(old) else '<end>'}\n"
            f"  now:       {new[first] if first < len(new) else '<end>'}")
