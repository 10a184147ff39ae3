"""CausalLM over synthetic Hugging Face checkpoints written here (random small weights, F32 and BF16 storage):
every transformer family against an independent numpy float64 forward of the whole model (transformers'
spellings: rotate-half RoPE, GQA, windows as `i - j < W`, biases, qk_norm, partial rotary, llama3 / linear
frequencies), the Mamba families against their own blocks composed by hand, every identity of the seed
surface, greedy generate and the Python-side refusals (docs/models.md §15-§19)."""

import math

import numpy as np
import pytest

import samebits
from samebits import CausalLM, CausalLMState
from causal_lm_checks import assert_identities, assert_low_bit_equals_materialized
from hf_checkpoint_files import bf16_round, write_model, write_safetensors  # noqa: F401 (other suites import them here)
from test_transformer_options import inverse_frequencies

V, D, NH, NKV, HD, IT = 64, 32, 4, 2, 8, 48


# ------------------------------------------------------------------ synthetic families


def transformer_family(mt, seed, tied=False, qkv_bias=False, o_bias=False, mlp_bias=False, qk_norm=False,
                       **extra):
    rng = np.random.default_rng(seed)

    def n(*shape, scale=0.3, offset=0.0):
        return (rng.standard_normal(shape) * scale + offset).astype(np.float32)

    config = dict(model_type=mt, hidden_size=D, num_attention_heads=NH, num_key_value_heads=NKV,
                  intermediate_size=IT, num_hidden_layers=2, vocab_size=V, max_position_embeddings=64,
                  tie_word_embeddings=tied, **extra)
    t = {"model.embed_tokens.weight": n(V, D, scale=1.0)}
    for i in range(2):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = n(D, scale=0.2, offset=1.0)
        t[p + "post_attention_layernorm.weight"] = n(D, scale=0.2, offset=1.0)
        q, k, v, gate, up = n(NH * HD, D), n(NKV * HD, D), n(NKV * HD, D), n(IT, D), n(IT, D)
        if mt == "phi3":
            t[p + "self_attn.qkv_proj.weight"] = np.concatenate([q, k, v])
            t[p + "mlp.gate_up_proj.weight"] = np.concatenate([gate, up])
        else:
            t.update({p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k,
                      p + "self_attn.v_proj.weight": v, p + "mlp.gate_proj.weight": gate,
                      p + "mlp.up_proj.weight": up})
        t[p + "self_attn.o_proj.weight"] = n(D, NH * HD)
        t[p + "mlp.down_proj.weight"] = n(D, IT)
        if qkv_bias:
            for name, width in (("q", NH * HD), ("k", NKV * HD), ("v", NKV * HD)):
                t[p + f"self_attn.{name}_proj.bias"] = n(width, scale=0.1)
        if o_bias:
            t[p + "self_attn.o_proj.bias"] = n(D, scale=0.1)
        if mlp_bias:
            t[p + "mlp.gate_proj.bias"], t[p + "mlp.up_proj.bias"] = n(IT, scale=0.1), n(IT, scale=0.1)
            t[p + "mlp.down_proj.bias"] = n(D, scale=0.1)
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = n(HD, scale=0.2, offset=1.0)
            t[p + "self_attn.k_norm.weight"] = n(HD, scale=0.2, offset=1.0)
    t["model.norm.weight"] = n(D, scale=0.2, offset=1.0)
    if not tied:
        t["lm_head.weight"] = n(V, D, scale=0.5)
    return config, t


def mamba_family(mt, seed, **extra):
    rng = np.random.default_rng(seed)

    def n(*shape, scale=0.2, offset=0.0):
        return (rng.standard_normal(shape) * scale + offset).astype(np.float32)

    config = dict(model_type=mt, hidden_size=D, num_hidden_layers=2, vocab_size=V, **extra)
    t = {"backbone.embeddings.weight": n(V, D, scale=1.0)}
    for i in range(2):
        p, m = f"backbone.layers.{i}.", f"backbone.layers.{i}.mixer."
        t[p + "norm.weight"] = n(D, offset=1.0)
        if mt == "mamba":
            t.update({m + "in_proj.weight": n(128, D), m + "conv1d.weight": n(64, 1, 4, scale=0.3),
                      m + "conv1d.bias": n(64, scale=0.1), m + "x_proj.weight": n(34, 64),
                      m + "dt_proj.weight": n(64, 2, scale=0.3), m + "dt_proj.bias": n(64, scale=0.5, offset=-2.0),
                      m + "A_log": n(64, 16, scale=0.5, offset=0.5), m + "D": n(64, scale=0.5, offset=1.0),
                      m + "out_proj.weight": n(D, 64)})
        else:
            t.update({m + "in_proj.weight": n(385, D), m + "conv1d.weight": n(320, 1, 4, scale=0.3),
                      m + "conv1d.bias": n(320, scale=0.1), m + "dt_bias": n(1, scale=0.5, offset=-1.0),
                      m + "A_log": n(1, scale=0.5, offset=0.5), m + "D": n(1, scale=0.5, offset=1.0),
                      m + "norm.weight": n(64, offset=1.0), m + "out_proj.weight": n(D, 64)})
    t["backbone.norm_f.weight"] = n(D, offset=1.0)
    if not config.get("tie_word_embeddings", True):
        t["lm_head.weight"] = n(V, D, scale=0.5)
    return config, t


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
FAMILIES = {
    "llama_tied": lambda: transformer_family("llama", 1, tied=True, rms_norm_eps=1e-5),
    "llama_untied_biases": lambda: transformer_family(
        "llama", 2, qkv_bias=True, o_bias=True, mlp_bias=True, rms_norm_eps=1e-6, attention_bias=True,
        mlp_bias_=None, rope_theta=500000.0, rope_scaling=LLAMA3),
    "smollm": lambda: transformer_family("smollm", 3, tied=True, rms_norm_eps=1e-5),
    "mistral_window": lambda: transformer_family("mistral", 4, sliding_window=3, rms_norm_eps=1e-5),
    "qwen2_biases": lambda: transformer_family(
        "qwen2", 5, qkv_bias=True, rms_norm_eps=1e-6, sliding_window=4, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
    "qwen3_qk_norm": lambda: transformer_family("qwen3", 6, tied=True, qk_norm=True, head_dim=HD, rms_norm_eps=1e-6),
    "qwen3_linear_5x": lambda: transformer_family(
        "qwen3", 7, qk_norm=True, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 20000.0}),
    "phi3_fused": lambda: transformer_family("phi3", 8, rms_norm_eps=1e-5, partial_rotary_factor=0.5,
                                             original_max_position_embeddings=32, sliding_window=5),
    "mamba": lambda: mamba_family("mamba", 9, layer_norm_epsilon=1e-5, time_step_rank="auto"),
    "mamba2": lambda: mamba_family("mamba2", 10, num_heads=1, norm_before_gate=True, tie_word_embeddings=False,
                                   time_step_limit=[0.0, float("inf")]),
}
TRANSFORMERS = [k for k in FAMILIES if not k.startswith("mamba")]


def family(name):
    config, tensors = FAMILIES[name]()
    config.pop("mlp_bias_", None)
    if name == "llama_untied_biases":
        config["mlp_bias"] = True
    return config, tensors


def ids_of(batch, length, seed):
    return np.random.default_rng(seed).integers(0, V, (batch, length)).astype(np.int64)


# ------------------------------------------------------------------ the float64 reference


def rms64(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def reference64(config, t, ids):
    """The whole model in float64, transformers' way; options at the float32 values the blocks use; shapes,
    partial rotary and per-layer windows read from 4.x- or 5.x-style configs."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    mt = config["model_type"]
    eps = float(np.float32(config.get("rms_norm_eps", 1e-6)))
    params = config.get("rope_parameters") or {}
    theta = config.get("rope_theta", params.get("rope_theta", 10000.0))
    scaling = config.get("rope_scaling") or (params if params.get("rope_type", "default") != "default" else None)
    options = {"rope_theta": theta}
    if scaling is not None:
        options["rope_scaling"] = {k: float(np.float32(v)) if isinstance(v, float) else v for k, v in scaling.items()}
    NH, IT = config["num_attention_heads"], config["intermediate_size"]
    NKV, HD = config.get("num_key_value_heads", NH), config.get("head_dim", config["hidden_size"] // NH)
    rd = int(HD * config.get("partial_rotary_factor", params.get("partial_rotary_factor", 1.0)))
    window = config.get("sliding_window") or 0
    if mt not in ("mistral", "phi3") and not config.get("use_sliding_window"):
        window = 0
    kinds = config.get("layer_types") or ["sliding_attention"] * config["num_hidden_layers"]
    B, L = ids.shape
    x = t["model.embed_tokens.weight"][ids]
    inv = inverse_frequencies(options, rd)
    angles = np.arange(L, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(angles)[None, :, None, :], np.sin(angles)[None, :, None, :]

    def rope(a):
        lo, hi, rest = a[..., : rd // 2], a[..., rd // 2: rd], a[..., rd:]
        return np.concatenate([lo * cos - hi * sin, hi * cos + lo * sin, rest], axis=-1)

    i_, j_ = np.arange(L)[:, None], np.arange(L)[None, :]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        visible = (j_ <= i_) & ((i_ - j_ < window) if window and kinds[i] == "sliding_attention" else True)

        def lin(a, name, weight=None):
            y = a @ (t[p + name + ".weight"] if weight is None else weight).T
            return y + t[p + name + ".bias"] if p + name + ".bias" in t else y

        n1 = rms64(x, t[p + "input_layernorm.weight"], eps)
        if mt == "phi3":
            qkv = t[p + "self_attn.qkv_proj.weight"]
            q = n1 @ qkv[: NH * HD].T
            k = n1 @ qkv[NH * HD: NH * HD + NKV * HD].T
            v = n1 @ qkv[NH * HD + NKV * HD:].T
        else:
            q, k, v = lin(n1, "self_attn.q_proj"), lin(n1, "self_attn.k_proj"), lin(n1, "self_attn.v_proj")
        q, k, v = q.reshape(B, L, NH, HD), k.reshape(B, L, NKV, HD), v.reshape(B, L, NKV, HD)
        if p + "self_attn.q_norm.weight" in t:
            q = rms64(q, t[p + "self_attn.q_norm.weight"], eps)
            k = rms64(k, t[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q), rope(k)
        k, v = np.repeat(k, NH // NKV, axis=2), np.repeat(v, NH // NKV, axis=2)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(HD)
        scores = np.where(visible, scores, -np.inf)
        pr = np.exp(scores - scores.max(-1, keepdims=True))
        pr /= pr.sum(-1, keepdims=True)
        ctx = np.einsum("bhqk,bkhd->bqhd", pr, v).reshape(B, L, NH * HD)
        x = x + lin(ctx, "self_attn.o_proj")
        n2 = rms64(x, t[p + "post_attention_layernorm.weight"], eps)
        if mt == "phi3":
            gu = t[p + "mlp.gate_up_proj.weight"]
            gate, up = n2 @ gu[:IT].T, n2 @ gu[IT:].T
        else:
            gate, up = lin(n2, "mlp.gate_proj"), lin(n2, "mlp.up_proj")
        x = x + lin(gate / (1.0 + np.exp(-gate)) * up, "mlp.down_proj")
    head = t["model.embed_tokens.weight"] if config.get("tie_word_embeddings") else t["lm_head.weight"]
    return rms64(x, t["model.norm.weight"], eps) @ head.T


def relative_error(got, want):
    return float(np.abs(got.astype(np.float64) - want).max() / (want.max() - want.min()))


def assert_family_matches_float64(name, bf16, tmp_path, reference):
    """The loaded family's logits agree with `reference` (a float64 forward over the values the files hold,
    bf16-rounded when stored as bf16) to 1e-5 of the logit range."""
    config, tensors = family(name)
    model = CausalLM.load(write_model(tmp_path / name, config, tensors, bf16))
    ids = ids_of(2, 9, 1)
    stored = {k: bf16_round(v) for k, v in tensors.items()} if bf16 else tensors
    assert relative_error(model.forward(ids), reference(config, stored, ids)) < 1e-5


@pytest.mark.parametrize("bf16", [False, True], ids=["F32", "BF16"])
@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_families_match_float64(name, bf16, tmp_path):
    assert_family_matches_float64(name, bf16, tmp_path, reference64)


# ------------------------------------------------------------------ identities


def _by_hand(config, tensors, ids):
    """The Mamba stack from Python's own block classes over the checkpoint's tensors."""
    one = config["model_type"] == "mamba"
    x = tensors["backbone.embeddings.weight"][ids]
    for i in range(config["num_hidden_layers"]):
        prefix, mixer = f"backbone.layers.{i}.", f"backbone.layers.{i}.mixer."
        w = {k[len(mixer):]: v for k, v in tensors.items() if k.startswith(mixer)}
        w["norm.weight" if one else "block_norm.weight"] = tensors[prefix + "norm.weight"]
        x = (samebits.Mamba1BlockInference(w) if one else samebits.Mamba2BlockInference(w)).forward(x)
    return x


def _silu(v):
    return v / (1.0 + np.exp(-v))


def _softplus(v):
    return np.where(v <= 20.0, np.log1p(np.exp(np.minimum(v, 20.0))), v)


def _conv_silu(pre, weight, bias):
    """Depthwise causal conv of width 4 from zeros, then SiLU: pre (B, L, C), weight (C, 1, 4)."""
    B, L, C = pre.shape
    ext = np.concatenate([np.zeros((B, 3, C)), pre], axis=1)
    acc = np.broadcast_to(bias, (B, L, C)).copy()
    for k in range(4):
        acc += weight[:, 0, k] * ext[:, k: k + L]
    return _silu(acc)


def mamba_block64(w, x, one):
    """One Mamba block by its plain per-token recurrence in float64 (transformers' MambaMixer /
    Mamba2Mixer math: no chunking), norm and residual around it."""
    B, L, dm = x.shape
    di = 2 * dm
    n = rms64(x, w["norm.weight" if one else "block_norm.weight"], float(np.float32(1e-5)))
    proj = n @ w["in_proj.weight"].T
    if one:
        r = (dm + 15) // 16
        u = _conv_silu(proj[..., :di], w["conv1d.weight"], w["conv1d.bias"])
        z = proj[..., di:]
        xp = u @ w["x_proj.weight"].T
        delta = _softplus(xp[..., :r] @ w["dt_proj.weight"].T + w["dt_proj.bias"])
        Bm, Cm = xp[..., r: r + 16], xp[..., r + 16:]
        A = -np.exp(w["A_log"])
        h, ys = np.zeros((B, di, 16)), []
        for t in range(L):
            dl = delta[:, t, :, None]
            h = np.exp(dl * A) * h + dl * Bm[:, t, None, :] * u[:, t, :, None]
            ys.append((h * Cm[:, t, None, :]).sum(-1))
        y = np.stack(ys, 1) + u * w["D"]
        return x + (y * _silu(z)) @ w["out_proj.weight"].T
    H, cd = di // 64, di + 256
    z, dt_raw = proj[..., :di], proj[..., di + cd:]
    xbc = _conv_silu(proj[..., di: di + cd], w["conv1d.weight"], w["conv1d.bias"])
    xs, Bm, Cm = xbc[..., :di].reshape(B, L, H, 64), xbc[..., di: di + 128], xbc[..., di + 128:]
    dt = _softplus(dt_raw + w["dt_bias"])
    A = -np.exp(w["A_log"])
    h, ys = np.zeros((B, H, 64, 128)), []
    for t in range(L):
        h = np.exp(dt[:, t] * A)[:, :, None, None] * h + (xs[:, t] * dt[:, t, :, None])[..., None] * Bm[:, t, None, None, :]
        ys.append((h * Cm[:, t, None, None, :]).sum(-1))
    y = (np.stack(ys, 1) + xs * w["D"][:, None]).reshape(B, L, di)
    return x + rms64(y * _silu(z), w["norm.weight"], float(np.float32(1e-5))) @ w["out_proj.weight"].T


def mamba_reference64(config, t, ids):
    one = config["model_type"] == "mamba"
    t = {k: v.astype(np.float64) for k, v in t.items()}
    x = t["backbone.embeddings.weight"][ids]
    for i in range(config["num_hidden_layers"]):
        mixer = f"backbone.layers.{i}.mixer."
        w = {k[len(mixer):]: v for k, v in t.items() if k.startswith(mixer)}
        w["norm.weight" if one else "block_norm.weight"] = t[f"backbone.layers.{i}.norm.weight"]
        x = mamba_block64(w, x, one)
    head = t["lm_head.weight"] if "lm_head.weight" in t else t["backbone.embeddings.weight"]
    return rms64(x, t["backbone.norm_f.weight"], float(np.float32(1e-5))) @ head.T


@pytest.mark.parametrize("bf16", [False, True], ids=["F32", "BF16"])
@pytest.mark.parametrize("name", ["mamba", "mamba2"])
def test_mamba_families_match_float64(name, bf16, tmp_path):
    assert_family_matches_float64(name, bf16, tmp_path, mamba_reference64)


@pytest.mark.parametrize("name", ["mamba", "mamba2"])
def test_mamba_families_are_their_blocks(name, tmp_path):
    config, tensors = family(name)
    model = CausalLM.load(write_model(tmp_path / name, config, tensors))
    assert model.kind == ("mamba1" if name == "mamba" else "mamba2")
    ids = ids_of(2, 9, 2)
    x = _by_hand(config, tensors, ids)
    norm = tensors["backbone.norm_f.weight"].astype(np.float64)
    head = tensors["backbone.embeddings.weight" if name == "mamba" else "lm_head.weight"].astype(np.float64)
    want = rms64(x.astype(np.float64), norm, float(np.float32(1e-5))) @ head.T
    assert relative_error(model.forward(ids), want) < 1e-5


@pytest.mark.parametrize("name", list(FAMILIES))
def test_identities(name, tmp_path, thread_count):
    config, tensors = family(name)
    assert_identities(CausalLM.load(write_model(tmp_path / name, config, tensors)), ids_of(2, 7, 3), thread_count)


@pytest.mark.parametrize("fmt", ["bfloat16", "int8"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_low_bit_formats_equal_their_materialized_float32(name, fmt, tmp_path):
    config, tensors = family(name)
    source = write_model(tmp_path / "src", config, tensors)
    assert_low_bit_equals_materialized(source, config, tensors, fmt, tmp_path, ids_of(2, 6, 4))


def test_bfloat16_keeps_bf16_storage_bits(tmp_path):
    config, tensors = family("llama_tied")
    d = write_model(tmp_path / "m", config, tensors, bf16=True)
    # BF16 storage under bfloat16: the checkpoint's own bits, i.e. the float32 load of the same file
    ids = ids_of(1, 5, 5)
    assert np.array_equal(CausalLM.load(d, "bfloat16").forward(ids), CausalLM.load(d).forward(ids))


@pytest.mark.parametrize("name", ["llama_tied", "mistral_window", "phi3_fused", "mamba", "mamba2"])
def test_generate_is_the_greedy_loop(name, tmp_path):
    config, tensors = family(name)
    model = CausalLM.load(write_model(tmp_path / name, config, tensors))
    ids = ids_of(2, 3, 6)
    out = model.generate(ids, 5)
    assert out.shape == (2, 8) and out.dtype == np.int32
    for b in range(2):
        seq = list(ids[b])
        for _ in range(5):
            seq.append(int(np.argmax(model.forward(np.array([seq]))[0, -1])))
        assert list(out[b]) == seq
    assert np.array_equal(model.generate(ids, 0), ids)


# ------------------------------------------------------------------ surface and refusals


def test_surface_and_repr(tmp_path):
    config, tensors = family("qwen2_biases")
    tensors["model.rotary_emb.inv_freq"] = np.ones(4, np.float32)
    model = CausalLM.load(write_model(tmp_path / "m", config, tensors), max_positions=16)
    assert repr(model) == ("CausalLM(model_type='qwen2', layers=2, d_model=32, vocab=64, weight_format='float32', "
                           "device='cpu')")
    assert model.unused_names == ["model.rotary_emb.inv_freq"]
    assert (model.kind, model.n_layers, model.d_model, model.vocab_size, model.max_positions) == (
        "transformer", 2, D, V, 16)
    assert model.norm_eps == 1e-6 and model.loader == "samebits" and not model.tie_embeddings
    params = model.parameters()
    assert np.array_equal(params["model.layers.1.mlp.down_proj.weight"], tensors["model.layers.1.mlp.down_proj.weight"])
    state = model.allocate_state(2, 8)
    assert isinstance(state, CausalLMState)
    assert repr(state) == "CausalLMState(batch_size=2, max_tokens=8, layers=2, positions=0)"


def test_phi3_parameters_put_the_rows_back(tmp_path):
    config, tensors = family("phi3_fused")
    params = CausalLM.load(write_model(tmp_path / "m", config, tensors)).parameters()
    for name in ("model.layers.0.self_attn.qkv_proj.weight", "model.layers.1.mlp.gate_up_proj.weight"):
        assert np.array_equal(params[name], tensors[name])


def test_python_refusals(tmp_path):
    config, tensors = family("llama_tied")
    d = write_model(tmp_path / "m", config, tensors)
    model = CausalLM.load(d, max_positions=8)
    other = CausalLM.load(d, max_positions=8)
    ids = ids_of(2, 4, 7)
    with pytest.raises(ValueError, match=r"weight_format must be one of \('float32', 'bfloat16', 'int8'\), got 'fp8'"):
        CausalLM.load(d, "fp8")
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        CausalLM.load(tmp_path / "nope")
    with pytest.raises(TypeError, match="ids must be integer, got buffer format 'f'"):
        model.forward(ids.astype(np.float32))
    with pytest.raises(ValueError, match=r"ids must be \(B, L\), got shape \(4,\)"):
        model.forward(ids[0])
    with pytest.raises(ValueError, match=r"ids must be in \[0, 64\)"):
        model.forward(ids + 60)
    with pytest.raises(ValueError, match=r"ids must be \(B,\) or \(B, 1\) for a step, got shape \(2, 4\)"):
        model.step(ids, model.allocate_state(2, 8))
    with pytest.raises(ValueError, match=r"state is required \(allocate_state\(B, max_tokens\) makes the fresh one\)"):
        model.step(ids[:, 0], None)
    with pytest.raises(TypeError, match=r"state must be a CausalLMState \(allocate_state\)"):
        model.forward(ids, object())
    with pytest.raises(ValueError, match="state belongs to another model; allocate a state on this model"):
        model.forward(ids, other.allocate_state(2, 8))
    with pytest.raises(ValueError, match="reset_state: state belongs to another model"):
        model.reset_state(other.allocate_state(2, 8))
    with pytest.raises(ValueError, match="reset_state: state belongs to another model"):
        model.reset_state("state")
    # greedy=False samples (tests/python/test_chat.py); anything but a bool is refused.
    with pytest.raises(TypeError, match="greedy must be True or False, got 1"):
        model.generate(ids, 2, greedy=1)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0, got -1"):
        model.generate(ids, -1)
    with pytest.raises(ValueError, match="4 prompt \\+ 5 new tokens exceed max_positions=8"):
        model.generate(ids, 5)
    state = model.allocate_state(2, 6)
    model.forward(ids, state)
    with pytest.raises(ValueError, match="the state was allocated for 6 tokens and holds 4; 4 more do not fit"):
        model.forward(ids, state)
    assert state.positions == 4
    bad = dict(config, model_type="mixtral")
    with pytest.raises(ValueError, match=r"model_type 'mixtral' is not in the option matrix"):
        CausalLM.load(write_model(tmp_path / "bad", bad, tensors))


def test_upstream_loader_quirks(tmp_path):
    """loader="mojolearn" (docs/models.md §15.3): qwen2's sliding_window applies although use_sliding_window is
    false (the same bits while every key is inside the window, others past it); the eps quirk moves the logits
    of a config at exactly 1e-5; a llama3 rope_scaling is refused."""
    config, tensors = family("qwen2_biases")
    d = write_model(tmp_path / "qwen2", config, tensors)
    ours, upstream = CausalLM.load(d), CausalLM.load(d, loader="mojolearn")
    assert upstream.loader == "mojolearn"
    ids = ids_of(1, 9, 8)
    a, b = ours.forward(ids), upstream.forward(ids)
    assert np.array_equal(a[:, :4].view(np.uint32), b[:, :4].view(np.uint32))
    assert not np.array_equal(a[:, 4:], b[:, 4:])
    config, tensors = family("llama_tied")
    d = write_model(tmp_path / "llama", config, tensors)
    assert not np.array_equal(CausalLM.load(d).forward(ids), CausalLM.load(d, loader="mojolearn").forward(ids))
    config, tensors = family("llama_untied_biases")
    with pytest.raises(ValueError, match="rope_scaling=.* is not honored: rope type 'default' is the only one"):
        CausalLM.load(write_model(tmp_path / "llama3", config, tensors), loader="mojolearn")
