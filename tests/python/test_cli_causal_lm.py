"""The command line on Hugging Face model directories (docs/cli.md §5, §6, §8, §9): generate (plain and --chat),
the interactive chat loop driven through a pipe (/save, /reset, /load, /quit), eval, verify and info, each
checked against the Python API on the same tiny random llama with the SmolLM2 tokenizer."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from samebits import CausalLM
from samebits.models import Tokenizer
from test_chat import CHATML, tiny_llama, tokenizer_dir

ROOT = Path(__file__).resolve().parents[2]
SAMBA = ROOT / "assets" / "default-model" / "samba-kjv.ckpt"


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "samebits._cli", *map(str, args)], capture_output=True, text=True,
                          input=stdin)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("cli") / "model")


@pytest.fixture(scope="module")
def loaded(tiny):
    return CausalLM.load(tiny), Tokenizer.from_pretrained(tiny)


def test_generate_plain_prompt_is_the_greedy_continuation(tiny, loaded):
    model, tok = loaded
    prompt = "The quick brown fox"
    ids = tok.encode(prompt)
    out = model.generate(np.asarray([ids]), 12, stop=[tok.eos_token_id])[0, len(ids):]
    want = tok.decode([int(t) for t in out if t >= 0 and t != tok.eos_token_id], skip_special_tokens=True)
    got = run("generate", tiny, "-p", prompt, "-n", 12, "--temperature", 0)
    assert got.returncode == 0, got.stderr
    assert got.stdout == prompt + want + "\n"
    assert "seed" in got.stderr and "prefill 4 tokens" in got.stderr


@pytest.mark.parametrize("sampling", [("--temperature", "0"), ("--temperature", "0.8", "--seed", "5")])
def test_generate_chat_equals_python_chat(tiny, loaded, sampling):
    model, tok = loaded
    options = {} if sampling[1] == "0" else {"greedy": False, "temperature": 0.8, "seed": 5}
    messages = [{"role": "system", "content": "Be short."}, {"role": "user", "content": "Hello there"}]
    want = model.chat(messages, tok, max_new_tokens=10, **options)
    got = run("generate", tiny, "--system", "Be short.", "--chat", "Hello there", "-n", 10, *sampling)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want + "\n"


def test_interactive_chat_through_a_pipe(tiny, loaded, tmp_path):
    model, tok = loaded
    saved = tmp_path / "conversation.json"
    script = f"Hi there\n/save {saved}\nTell me more\n/reset\n\n/load {saved}\nAgain\n/unknown\n/quit\nnever read\n"
    got = run("chat", tiny, "-n", 8, "--temperature", 0, stdin=script)
    assert got.returncode == 0, got.stderr
    first = model.chat([{"role": "user", "content": "Hi there"}], tok, max_new_tokens=8)
    history = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": first}]
    second = model.chat(history + [{"role": "user", "content": "Tell me more"}], tok, max_new_tokens=8)
    third = model.chat(history + [{"role": "user", "content": "Again"}], tok, max_new_tokens=8)
    assert got.stdout == first + "\n" + second + "\n" + third + "\n"
    assert json.loads(saved.read_text()) == history
    for note in (f"[saved 2 messages to {saved}]", "[conversation reset]", f"[loaded 2 messages from {saved}]",
                 "[unknown command /unknown; /reset, /save FILE, /load FILE, /quit]"):
        assert note in got.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "tool", "content": "x"}]')
    got = run("chat", tiny, "-n", 4, "--temperature", 0, stdin=f"/load {bad}\n/load {tmp_path / 'missing'}\n")
    assert got.returncode == 0 and got.stdout == ""
    assert "has role 'tool' (system, user or assistant)" in got.stderr and "cannot read conversation file" in got.stderr


def test_chat_refusals(tiny, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("config.json", "model.safetensors"):
        (plain / name).write_bytes((tiny / name).read_bytes())
    tokenizer_dir(plain)
    cases = [
        (("chat", plain), "carry no chat template"),
        (("chat", SAMBA), "chat needs a model with a tokenizer and a chat template"),
        (("chat", tmp_path / "nothing"), "cannot read checkpoint"),
        (("generate", SAMBA, "--chat", "hi"), "--chat needs a model with a tokenizer"),
        (("generate", tmp_path, "-p", "x"), "it is a directory without a config.json"),
    ]
    unknown = tmp_path / "unknown"
    tokenizer_dir(unknown, "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}")
    for name in ("config.json", "model.safetensors"):
        (unknown / name).write_bytes((tiny / name).read_bytes())
    cases.append((("chat", unknown), "none of ChatML (SmolLM2, Qwen2), Llama-3 and Phi-3"))
    for args, message in cases:
        got = run(*args, stdin="")
        assert got.returncode in (1, 2) and message in got.stderr, (args, got.stderr)


def test_eval_matches_python_scores(tiny, loaded, tmp_path):
    model, tok = loaded
    text = (ROOT / "tests" / "fixtures" / "tokenizer" / "english.txt").read_text()[:700]
    path = tmp_path / "text.txt"
    path.write_text(text)
    ids = tok.encode(text, allow_special=False)

    def nll(window):  # float64 log-softmax of one forward over window[:-1], against window[1:]
        logits = model.forward(np.asarray([window[:-1]])).astype(np.float64)[0]
        top = logits.max(axis=1, keepdims=True)
        logz = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        return float((logz - logits[np.arange(len(window) - 1), window[1:]]).sum())

    stateless = sum(nll(ids[s:s + 33]) for s in range(0, len(ids) - 1, 32)) / (len(ids) - 1)
    carried = nll(ids) / (len(ids) - 1)  # one sequence: what the carried windows compute, bit for bit
    assert abs(stateless - carried) > 1e-3  # the two methods really differ here
    scored = len(tok.decode_bytes(ids[1:], skip_special_tokens=True))
    for extra, nats in (((), stateless), (("--carry",), carried)):
        got = run("eval", tiny, path, "--context", 32, "--json", *extra)
        assert got.returncode == 0, got.stderr
        report = json.loads(got.stdout)
        assert report["tokens"] == len(ids) and report["predictions"] == len(ids) - 1
        assert report["method"] == ("carry" if extra else "stateless")
        assert report["mean_cross_entropy_nats"] == pytest.approx(nats, rel=1e-6)
        assert report["perplexity"] == pytest.approx(math.exp(report["mean_cross_entropy_nats"]), rel=1e-7)
        assert report["bits_per_byte"] == pytest.approx(
            report["mean_cross_entropy_nats"] * (len(ids) - 1) / math.log(2) / scored, rel=1e-7)
    got = run("eval", tiny, path, "--context", 32)
    assert "nats/token" in got.stdout and "perplexity:" in got.stdout and "bits per byte:" in got.stdout


def test_verify_and_info_on_a_model_directory(tiny, loaded):
    model, _ = loaded
    got = run("verify", tiny, "--length", 9)
    assert got.returncode == 0 and "PASS step_vs_full" in got.stdout and got.stdout.startswith("llama ")
    got = run("verify", tiny, "--prompt", "Bits are bits, step or forward.", "--json")
    report = json.loads(got.stdout)
    assert got.returncode == 0 and report["pass"] and report["batch"] == 1 and report["length"] > 5
    got = run("verify", tiny, "--sabotage")
    assert got.returncode == 2 and "does not apply" in got.stderr
    got = run("info", tiny)
    assert got.returncode == 0, got.stderr
    params = model.parameters()
    count = sum(a.size for a in params.values())
    for needle in ("kind: Hugging Face model directory, CausalLM(model_type='llama'",
                   f"parameters: {count} in {len(params)} tensors", "chat template: chatml (rendered natively)",
                   "unused checkpoint tensors: none", "integrity: OK"):
        assert needle in got.stdout
    report = json.loads(run("info", tiny, "--json").stdout)
    assert report["model_type"] == "llama" and report["parameters"] == count
    assert report["chat_template"] == "chatml (rendered natively)" and report["integrity"] == {"ok": True}
    assert [t["name"] for t in report["tensors"]] == list(params)
