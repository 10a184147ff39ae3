"""The command line's conventions (docs/cli.md): help for every command, global options on either side of
the command, repeated and unknown options named as such, short forms, exit codes, the generation options
(random seed reported, stdin and file prompts, stop strings, sampling options), a closed pipe, JSON output,
eval --carry and the terminal-only progress line, and files of the wrong kind."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import samba_checkpoint_writer as writer

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "assets" / "default-model" / "samba-kjv.ckpt"
DEMO = ROOT / "assets" / "mlp-demo.ckpt"
COMMANDS = ("info", "generate", "verify", "eval", "mlp-predict")


def run(*args, input=None, env=None):
    return subprocess.run([sys.executable, "-m", "samebits", *map(str, args)], capture_output=True, input=input,
                          env=None if env is None else {**os.environ, **env}, timeout=120)


def stats(stderr):
    match = re.search(rb"generated (\d+) tokens .*seed (\d+);", stderr)
    assert match, stderr
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    forms = [run(command, "--help"), run(command, "-h"), run("help", command), run(command, "x", "--help")]
    for out in forms:
        assert out.returncode == 0, out.stderr
        assert out.stdout == forms[0].stdout
    text = forms[0].stdout.decode()
    assert text.startswith(f"usage: samebits {command}")
    assert "example:\n  samebits " + command in text
    assert "exit status: 0 done, 1 input refused" in text and "2 usage error" in text
    assert "--threads N" in text and "--simd TARGET" in text


def test_generate_help_lists_every_option_with_its_default():
    text = run("generate", "--help").stdout.decode()
    for needle in ("-p, --prompt TEXT", "-f, --prompt-file FILE", "-n, --max-tokens N", "(default: 200)",
                   "--temperature T", "(default: 0.8)", "--top-k K", "--top-p P", "--min-p P", "--repeat-penalty R",
                   "--repeat-last-n N", "(default: 64)", "--presence-penalty P", "--frequency-penalty P",
                   "-s, --seed S", "(default: random", "--stop TEXT", "may be repeated", "--ignore-eos"):
        assert needle in text, needle
    assert "(default: 8)" in run("eval", "--help").stdout.decode()


def test_overview_and_unknown_help_topic():
    out = run("help")
    assert out.returncode == 0
    for command in COMMANDS:
        assert f"\n  {command} " in out.stdout.decode()
    assert run("--help").stdout == out.stdout
    bad = run("help", "frobnicate")
    assert bad.returncode == 2 and b"help: unknown command 'frobnicate'" in bad.stderr


def test_global_options_before_or_after_the_command_and_repeats():
    base = ("generate", "-p", "In", "-n", 12, "-s", 5)
    before = run("--threads", 1, "--simd", "scalar", *base)
    after = run(*base, "-t", 1, "--simd=scalar")
    plain = run(*base)
    for out in (before, after, plain):
        assert out.returncode == 0, out.stderr
    assert before.stdout == after.stdout == plain.stdout
    assert b"threads 1" in before.stderr and b"threads 1" in after.stderr
    twice = run("--threads", 1, *base, "--threads", 2)
    assert twice.returncode == 2 and b"option '--threads' given more than once" in twice.stderr
    repeated = run(*base, "--seed", 6)
    assert repeated.returncode == 2 and b"generate: option '--seed' given more than once" in repeated.stderr
    unknown = run(*base, "--sed", 6)
    assert unknown.returncode == 2 and b"generate: unknown option '--sed'" in unknown.stderr


def test_short_forms_equal_long_forms():
    short = run("generate", "-p", "And", "-n", 20, "-s", 9, "-t", 2)
    long = run("generate", "--prompt", "And", "--max-tokens", 20, "--seed", 9, "--threads", 2)
    assert short.returncode == 0 and short.stdout == long.stdout


def test_the_seed_is_random_by_default_and_repeatable():
    a, b = run("generate", "-p", "And", "-n", 40), run("generate", "-p", "And", "-n", 40)
    count_a, seed_a = stats(a.stderr)
    _, seed_b = stats(b.stderr)
    assert count_a == 40 and seed_a != seed_b
    again = run("generate", "-p", "And", "-n", 40, "--seed", seed_a)
    assert again.stdout == a.stdout and stats(again.stderr)[1] == seed_a


def test_prompt_from_stdin_and_from_a_file(tmp_path):
    expected = run("generate", "-p", "Let there be", "-n", 15, "-s", 2)
    piped = run("generate", "-p", "-", "-n", 15, "-s", 2, input=b"Let there be")
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(b"Let there be")
    filed = run("generate", "--prompt-file", prompt, "-n", 15, "-s", 2)
    assert expected.returncode == piped.returncode == filed.returncode == 0
    assert expected.stdout == piped.stdout == filed.stdout
    assert expected.stdout.startswith(b"Let there be")
    assert run("generate", "-p", "x", "-f", prompt).returncode == 2
    assert run("generate", "-f", tmp_path / "missing.txt").returncode == 1


def test_stop_strings_end_generation_before_the_stop_string():
    free = run("generate", "-p", "And God said", "-n", 300, "-s", 1, "--temperature", 0)
    body = free.stdout[len(b"And God said"):-1]
    stop = body[20:23].decode()  # a string the greedy text is known to reach
    cut = run("generate", "-p", "And God said", "-n", 300, "-s", 1, "--temperature", 0, "--stop", stop,
              "--stop", "never-there")
    assert cut.returncode == 0
    end = body.index(stop.encode())
    assert cut.stdout == b"And God said" + body[:end] + b"\n"
    produced, _ = stats(cut.stderr)
    assert produced == end + len(stop)
    assert b"stopped at a --stop string" in cut.stderr


def test_sampling_options_change_the_text_and_greedy_ignores_the_seed():
    base = ("generate", "-p", "And", "-n", 60, "-s", 4)
    plain = run(*base).stdout
    for option in (("--top-k", 3), ("--top-p", 0.5), ("--min-p", 0.3), ("--repeat-penalty", 1.5),
                   ("--presence-penalty", 1.0), ("--frequency-penalty", 0.5), ("--temperature", 0.3)):
        out = run(*base, *option)
        assert out.returncode == 0, out.stderr
        assert out.stdout != plain, option
    greedy = [run("generate", "-p", "And", "-n", 30, "--temperature", 0, "-s", s).stdout for s in (1, 2)]
    assert greedy[0] == greedy[1]
    assert run(*base, "--min-p", 1.5).returncode == 2
    assert run(*base, "--repeat-penalty", 0).returncode == 2


def test_ignore_eos_is_refused_by_name():
    out = run("generate", "-p", "x", "--ignore-eos")
    assert out.returncode == 2 and b"--ignore-eos" in out.stderr and b"end-of-sequence" in out.stderr


def test_a_closed_pipe_stops_generation_quietly():
    start = time.monotonic()
    cmd = f'"{sys.executable}" -m samebits generate -p "In the" -n 8000 -s 3 --temperature 1 | head -c 10'
    out = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"In the" + out.stdout[6:] and len(out.stdout) == 10
    assert b"error" not in out.stderr.lower() and b"Broken pipe" not in out.stderr
    produced, _ = stats(out.stderr)
    assert produced < 8000
    assert time.monotonic() - start < 30


def test_invalid_environment_values_are_refused_by_name():
    for variable, value in (("SAMEBITS_NUM_THREADS", "many"), ("SAMEBITS_NUM_THREADS", "0"),
                            ("SAMEBITS_NUM_THREADS", "1000"), ("SAMEBITS_SIMD", "sse9")):
        out = run("--version", env={variable: value})
        assert out.returncode == 2 and variable.encode() in out.stderr, (variable, value, out.stderr)
    assert run("--version", env={"SAMEBITS_NUM_THREADS": "2", "SAMEBITS_SIMD": "scalar"}).returncode == 0


def test_json_output(tmp_path):
    info = run("info", MODEL, "--json")
    assert info.returncode == 0
    data = json.loads(info.stdout)
    assert data["kind"] == "Samba checkpoint (v2 archive)" and data["integrity"]["ok"]
    assert data["config"]["vocab"] == 256 and len(data["tensors"]) > 5
    assert json.loads(run("info", DEMO, "--json").stdout)["parameters"] == 195
    small = writer.write_stream(tmp_path / "small.ckpt", writer.example_config())
    data = bytearray(small.read_bytes())
    data[-5] ^= 1
    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(bytes(data))
    refused = run("info", broken, "--json")
    assert refused.returncode == 1 and json.loads(refused.stdout)["integrity"]["ok"] is False
    verify = run("verify", small, "--length", 6, "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["pass"] is True
    sabotage = json.loads(run("verify", small, "--length", 6, "--sabotage", "--json").stdout)
    assert sabotage["pass"] is True and sabotage["first_difference"]["position"] >= 3
    text = tmp_path / "text.txt"
    text.write_bytes(b"In the beginning God created the heaven and the earth. " * 20)
    ev = run("eval", text, "--json", "--context", 64)
    assert ev.returncode == 0 and ev.stderr == b""  # no progress line into a redirected stderr
    result = json.loads(ev.stdout)
    assert result["predictions"] == len(text.read_bytes()) - 1 and result["method"] == "stateless"
    assert 0 < result["bits_per_byte"] < 8


def test_eval_carry_scores_one_sequence(tmp_path):
    text = tmp_path / "text.txt"
    text.write_bytes(b"And God said, Let there be light: and there was light. " * 8)
    windows = json.loads(run("eval", text, "--json", "--context", 32).stdout)
    carried = json.loads(run("eval", text, "--json", "--context", 32, "--carry").stdout)
    whole = json.loads(run("eval", text, "--json", "--context", 4096).stdout)
    assert carried["method"] == "carry"
    # Carrying the state over 32-byte windows scores each byte with all the text before it: the logits are
    # the bits of one window spanning the whole text, summed in the same order.
    assert carried["mean_cross_entropy_nats"] == whole["mean_cross_entropy_nats"]
    assert carried["mean_cross_entropy_nats"] < windows["mean_cross_entropy_nats"]
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * 9000)
    out = run("eval", big, "--carry")
    assert out.returncode == 2 and b"8192" in out.stderr


def test_files_of_the_wrong_kind_are_named(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("just words\n")
    cases = (
        (("generate", notes, "-p", "x"), f"{notes} is a text file; generate wants a Samba checkpoint"),
        (("generate", DEMO, "-p", "x"), f"{DEMO} is an MLP checkpoint; generate wants a Samba checkpoint"),
        (("info", notes), f"{notes} is a text file; info wants a Samba or MLP checkpoint or a GGUF file"),
        (("mlp-predict", MODEL), f"{MODEL} is a Samba checkpoint (v2 archive); mlp-predict wants an MLP checkpoint"),
        (("verify", DEMO), f"{DEMO} is an MLP checkpoint; verify wants a Samba checkpoint"),
        (("mlp-predict", DEMO, "--input", DEMO), f"{DEMO} is an MLP checkpoint; mlp-predict --input wants a text file"),
        (("mlp-predict", DEMO, "--input", tmp_path / "rows.txt"), f"cannot read input file '{tmp_path / 'rows.txt'}'"),
        (("eval", MODEL), f"{MODEL} is a Samba checkpoint (v2 archive); eval wants a text FILE"),
        (("eval", tmp_path), f"cannot read text file '{tmp_path}': it is a directory"),
        (("eval", tmp_path / "missing.txt"), f"cannot read text file '{tmp_path / 'missing.txt'}': No such file"),
        (("generate", tmp_path, "-p", "x"), f"cannot read checkpoint '{tmp_path}': it is a directory"),
    )
    for args, message in cases:
        out = run(*args)
        assert out.returncode == 1, (args, out.stderr)
        assert out.stderr.decode().startswith("samebits: " + message), out.stderr
        assert out.stderr.count(b"\n") == 1 and b"internal error" not in out.stderr


def test_eval_draws_progress_with_rate_and_eta_only_on_a_terminal(tmp_path):
    import pty

    text = tmp_path / "text.txt"
    text.write_bytes(b"In the beginning God created the heaven and the earth. " * 40)
    controller, terminal = pty.openpty()
    try:
        out = subprocess.run([sys.executable, "-m", "samebits", "eval", str(text), "--context", "64"], stdout=subprocess.PIPE,
                             stderr=terminal, timeout=120)
        os.close(terminal)
        terminal = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal side is closed and drained
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if terminal >= 0:
            os.close(terminal)
        os.close(controller)
    assert out.returncode == 0
    assert b"100%" in drawn and b"bytes/s" in drawn and b"ETA" in drawn, drawn
    redirected = run("eval", text, "--context", 64)
    assert b"ETA" not in redirected.stderr and b"100%" not in redirected.stderr
