"""Writes a CausalLM checkpoint's tensors as a GGUF file the way llama.cpp's converter does (docs/gguf.md
§10-§11): GGUF tensor names, the hyper-parameter keys, the Q/K row order of arch `llama`, phi3's fused
tensors kept fused, and optional quantized payloads (gguf-py's quantizer). Returns the float32 values the
file's tensors decode to, under their Hugging Face names, so the safetensors twin can hold the same values."""

import numpy as np

gguf = __import__("pytest").importorskip("gguf")
T = gguf.GGMLQuantizationType

LAYER = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.qkv_proj.weight": "attn_qkv.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate_proj.bias": "ffn_gate.bias", "mlp.up_proj.bias": "ffn_up.bias", "mlp.down_proj.bias": "ffn_down.bias",
    "mlp.gate_up_proj.weight": "ffn_up.weight",
}


def gguf_name(hf):
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if hf in top:
        return top[hf]
    if not hf.startswith("model."):
        return hf  # already a GGUF name (refusal tests)
    _, _, layer, rest = hf.split(".", 3)
    return f"blk.{layer}.{LAYER[rest]}"


def converter_rows(w, heads):
    """The converter's order: per head, the (2, half) row grid transposed to (half, 2)."""
    rows = w.shape[0]
    d = rows // heads
    tail = w.shape[1:]
    return w.reshape(heads, 2, d // 2, *tail).swapaxes(1, 2).reshape(w.shape)


def encode(values, qtype):
    """(payload for GGUFWriter.add_tensor, raw_dtype, the float32 values it decodes to)."""
    a = np.ascontiguousarray(values, np.float32)
    if qtype is None or a.ndim != 2 or qtype == T.F32:
        return a, None, a
    if qtype == T.F16:
        h = a.astype(np.float16)
        return h, None, h.astype(np.float32)
    if a.shape[1] % gguf.GGML_QUANT_SIZES[qtype][0] != 0:
        return a, None, a
    q = gguf.quants.quantize(a, qtype)
    return q, qtype, gguf.quants.dequantize(q, qtype).astype(np.float32).reshape(a.shape)


def write_gguf(path, config, tensors, qtype=None, permute=True, extra=None, tokenizer=None):
    """config: the HF config dict; tensors: HF name -> float32 array. Returns HF name -> decoded float32."""
    arch = {"smollm": "llama", "mistral": "llama"}.get(config["model_type"], config["model_type"])
    nh, nkv = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    hd = config.get("head_dim", config["hidden_size"] // nh)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(config.get("max_position_embeddings", 8192))
    w.add_embedding_length(config["hidden_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    if "head_dim" in config:
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    w.add_rope_dimension_count(int(hd * config.get("partial_rotary_factor", 1.0)))
    w.add_layer_norm_rms_eps(config.get("rms_norm_eps", 1e-6))
    if qtype is not None:
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    if arch == "phi3" and config.get("sliding_window"):
        w.add_sliding_window(config["sliding_window"])
    for key, value in (extra or {}).items():
        (w.add_string if isinstance(value, str) else w.add_float32 if isinstance(value, float) else w.add_uint32)(
            key.replace("{A}", arch), value)
    if tokenizer is not None:
        tokenizer(w)
    decoded = {}
    for name in sorted(tensors):
        values = tensors[name]
        payload, raw, back = encode(values, qtype)
        decoded[name] = back
        if arch == "llama" and permute and (".q_proj." in name or ".k_proj." in name):
            heads = nh if ".q_proj." in name else nkv
            payload = converter_rows(payload, heads)
        w.add_tensor(gguf_name(name), payload, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return decoded
