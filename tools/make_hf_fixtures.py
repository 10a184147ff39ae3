"""Writes tests/fixtures/hf/: one tiny random checkpoint per CausalLM family, made and saved by transformers
itself (its config and model classes, save_pretrained), with transformers' own float64 logits as reference.

Each fixture directory holds what save_pretrained wrote (config.json in transformers 5.x style,
model.safetensors, generation_config.json) and reference.json: `ids` (B x L) and `logits` (B x L x vocab,
float64 written as Python's repr, so read back exactly), the model loaded back from those files in float64
with eager attention and run over the ids, and the versions that made them.

transformers casts some intermediates to float32 on purpose (the RMSNorm variance, the rotary angles and
inverse frequencies, the softmax, the Mamba scans), which suits half precision but would round a float64
run. While the reference runs, every cast to float32 is turned into a cast to float64 and the rotary inverse
frequencies are recomputed in float64, so that every operation of the run is float64; the script prints how
far the logits of the unpatched run (`model.double()` as it comes) lie from that, for the record.

The suites (tests/python/test_hf_fixtures.py, tests/cpp/test_hf_fixtures.cpp) read the committed files without
torch; docs/models.md §21 describes the fixtures.

Usage: /path/to/venv-with-torch/bin/python tools/make_hf_fixtures.py
"""

import contextlib
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "hf")
VOCAB, BATCH, LENGTH = 48, 2, 8

# the transformer shapes every attention family shares: 4 query heads of 8 over 2 kv heads, a 16-wide MLP
ATTENTION = dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                 intermediate_size=16, num_hidden_layers=2, max_position_embeddings=64)
# the smallest shapes the Mamba blocks serve: hidden 32, so inner width 64 (one Mamba-2 head of 64)
MAMBA = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2)

# theta 100 puts the four wavelengths (6.3, 20, 63, 200) in all three llama3 bands of (8, 32)
LLAMA3 = {"rope_type": "llama3", "rope_theta": 100.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
LINEAR = {"rope_type": "linear", "rope_theta": 20000.0, "factor": 2.0}

# name: (config class, model class, config arguments, storage dtype)
FAMILIES = {
    "llama_tied": ("LlamaConfig", "LlamaForCausalLM", dict(ATTENTION, tie_word_embeddings=True), torch.float32),
    "llama_untied": ("LlamaConfig", "LlamaForCausalLM",
                     dict(ATTENTION, tie_word_embeddings=False, attention_bias=True, mlp_bias=True, rms_norm_eps=1e-5,
                          rope_parameters=LLAMA3), torch.float32),
    "llama_tied_bf16": ("LlamaConfig", "LlamaForCausalLM", dict(ATTENTION, tie_word_embeddings=True),
                        torch.bfloat16),
    "mistral_window": ("MistralConfig", "MistralForCausalLM", dict(ATTENTION, sliding_window=3), torch.float32),
    "qwen2_biases": ("Qwen2Config", "Qwen2ForCausalLM",
                     dict(ATTENTION, use_sliding_window=True, sliding_window=4, max_window_layers=1),
                     torch.float32),
    "qwen3_qk_norm": ("Qwen3Config", "Qwen3ForCausalLM", dict(ATTENTION, rope_parameters=LINEAR), torch.float32),
    "phi3_fused": ("Phi3Config", "Phi3ForCausalLM",
                   dict(ATTENTION, sliding_window=5, original_max_position_embeddings=64,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                        pad_token_id=0, bos_token_id=1, eos_token_id=2),
                   torch.float32),
    "mamba": ("MambaConfig", "MambaForCausalLM", dict(MAMBA, pad_token_id=0, bos_token_id=1, eos_token_id=2),
              torch.float32),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM",
               dict(MAMBA, num_heads=1, head_dim=64, n_groups=1, pad_token_id=0, bos_token_id=1, eos_token_id=2),
               torch.float32),
}


def randomize(model, seed):
    """Seeded weights large enough that every part of the model moves the logits: transformers' own init
    (std 0.02) would leave the attention nearly uniform and the logits nearly flat."""
    g = torch.Generator().manual_seed(seed)

    def normal(p, scale, offset=0.0):
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * scale + offset)

    mamba = hasattr(model, "backbone")
    for name, p in sorted(model.named_parameters()):
        leaf = name.rsplit(".", 1)[-1]
        if name.endswith("norm.weight") or name.endswith("norm_f.weight") or "layernorm" in name:
            normal(p, 0.2, 1.0)
        elif leaf == "A_log":
            normal(p, 0.5, 0.5)
        elif leaf == "D":
            normal(p, 0.5, 1.0)
        elif name.endswith("dt_proj.bias"):
            normal(p, 0.5, -2.0)
        elif leaf == "dt_bias":
            normal(p, 0.5, -1.0)
        elif "conv1d" in name:
            normal(p, 0.3 if leaf == "weight" else 0.1)
        elif leaf == "bias":
            normal(p, 0.1)
        elif "embed" in name:
            normal(p, 1.0)
        elif name.startswith("lm_head"):
            normal(p, 0.5)
        else:
            normal(p, 0.2 if mamba else 0.3)


@contextlib.contextmanager
def float64_throughout():
    """While active, a cast of any tensor to float32 (`.float()`, `.to(torch.float32)`, softmax's dtype,
    `arange(dtype=float32)`) gives float64 instead."""
    saved = torch.Tensor.float, torch.Tensor.to, torch.nn.functional.softmax, torch.arange
    wide = (torch.float32,)

    def to(self, *args, **kwargs):
        args = tuple(torch.float64 if a in wide else a for a in args)
        if kwargs.get("dtype") in wide:
            kwargs["dtype"] = torch.float64
        return saved[1](self, *args, **kwargs)

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        return saved[2](x, dim=dim, dtype=torch.float64 if dtype in wide else dtype)

    def arange(*args, **kwargs):
        if kwargs.get("dtype") in wide:
            kwargs["dtype"] = torch.float64
        return saved[3](*args, **kwargs)

    torch.Tensor.float = lambda self, *a, **k: saved[1](self, torch.float64)
    torch.Tensor.to, torch.nn.functional.softmax, torch.arange = to, softmax, arange
    try:
        yield
    finally:
        torch.Tensor.float, torch.Tensor.to, torch.nn.functional.softmax, torch.arange = saved


def recompute_inverse_frequencies(model):
    """The rotary modules computed their inverse frequencies in float32 at construction; redo them in float64
    (call inside float64_throughout)."""
    for module in model.modules():
        if hasattr(module, "inv_freq") and hasattr(module, "rope_type"):
            if module.rope_type == "default":
                inv_freq, scaling = module.compute_default_rope_parameters(module.config)
            else:
                inv_freq, scaling = ROPE_INIT_FUNCTIONS[module.rope_type](module.config)
            assert inv_freq.dtype == torch.float64 and scaling == 1.0, (module.rope_type, inv_freq.dtype, scaling)
            module.inv_freq = inv_freq
            module.attention_scaling = scaling


def float64_logits(directory, ids, pure):
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float64,
                                                              attn_implementation="eager")
    model.eval()
    scope = float64_throughout() if pure else contextlib.nullcontext()
    with torch.no_grad(), scope:
        if pure:
            recompute_inverse_frequencies(model)
        logits = model(torch.tensor(ids), use_cache=False).logits
    assert logits.dtype == torch.float64 or not pure  # unpatched Mamba hands float32 logits back
    return logits.double().numpy()


def make(name, seed):
    config_class, model_class, arguments, dtype = FAMILIES[name]
    config = getattr(transformers, config_class)(**arguments)
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config)
    randomize(model, seed)
    directory = os.path.join(OUT, name)
    shutil.rmtree(directory, ignore_errors=True)
    model.to(dtype).save_pretrained(directory)
    ids = np.random.default_rng(seed).integers(0, VOCAB, (BATCH, LENGTH)).astype(np.int64)
    ids[0, :2] = (0, VOCAB - 1)  # both ends of the vocabulary
    logits = float64_logits(directory, ids, pure=True)
    stock = float64_logits(directory, ids, pure=False)
    made_by = {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump({"made_by": made_by, "ids": ids.tolist(), "logits": logits.tolist()}, f, separators=(",", ":"))
        f.write("\n")
    spread = float(np.abs(stock - logits).max() / (logits.max() - logits.min()))
    files = sorted(os.listdir(directory))
    size = sum(os.path.getsize(os.path.join(directory, f)) for f in files)
    print(f"{name:20s} {size:7d} bytes {files}  unpatched float64 run differs by {spread:.2e} of the range")


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.use_deterministic_algorithms(True)
    names = sys.argv[1:] or list(FAMILIES)
    for seed, name in enumerate(FAMILIES, start=1):
        if name in names:
            make(name, seed)


if __name__ == "__main__":
    main()
