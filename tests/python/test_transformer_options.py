"""TransformerBlockInference under the block options (docs/models.md §2-§11): each option and a few
combinations against an independent numpy float64 forward of the same block; the engine's fast path equals
its scalar twin on every SIMD target and thread count; step == forward at every position; a row alone ==
the row in a batch; the refusals in upstream's wording; default spellings keep today's bits."""

import math
import struct

import numpy as np
import pytest

import samebits

from block_checks import decode, expect_rows_alone_and_prefix
from block_weights import normal_x as tokens, transformer_weights

DM, NH, NKV, IT = 32, 4, 2, 48
HD = DM // NH
BIAS_SHAPES = {
    "q_proj.bias": (NH * HD,), "k_proj.bias": (NKV * HD,), "v_proj.bias": (NKV * HD,), "o_proj.bias": (DM,),
    "input_layernorm.bias": (DM,), "post_attention_layernorm.bias": (DM,), "up_proj.bias": (IT,),
    "down_proj.bias": (DM,), "gate_proj.bias": (IT,), "q_norm.weight": (HD,), "k_norm.weight": (HD,),
}
GATED = ("swiglu", "geglu", "geglu_tanh")


def weights_for(options, seed=5):
    """The base weights (norm weights near one) plus every tensor `options` turns on; no gate when ungated."""
    w = transformer_weights(dm=DM, nh=NH, nkv=NKV, it=IT, seed=seed)
    for name in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        w[name] = (1.0 + w[name]).astype(np.float32)
    rng = np.random.default_rng(seed + 100)
    mlp = options.get("mlp", "swiglu")
    wanted = []
    if options.get("qkv_bias"):
        wanted += ["q_proj.bias", "k_proj.bias", "v_proj.bias"]
    if options.get("o_bias"):
        wanted += ["o_proj.bias"]
    if options.get("norm_bias"):
        wanted += ["input_layernorm.bias", "post_attention_layernorm.bias"]
    if options.get("mlp_bias"):
        wanted += ["up_proj.bias", "down_proj.bias"] + (["gate_proj.bias"] if mlp in GATED else [])
    if options.get("qk_norm"):
        wanted += ["q_norm.weight", "k_norm.weight"]
    for name in wanted:
        value = rng.standard_normal(BIAS_SHAPES[name]) * 0.3
        w[name] = (1.0 + value if name.endswith("norm.weight") else value).astype(np.float32)
    if mlp not in GATED:
        del w["gate_proj.weight"]
    return w


# ------------------------------------------------------------------ the float64 reference


def inverse_frequencies(options, rd):
    theta = float(np.float32(options.get("rope_theta", 10000.0)))
    inv = 1.0 / theta ** (np.arange(0, rd, 2, dtype=np.float64) / rd)
    scaling = options.get("rope_scaling")
    if scaling is None:
        return inv
    factor = float(scaling["factor"])
    if scaling.get("type", scaling.get("rope_type")) == "linear":
        return inv / factor
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old = float(scaling["original_max_position_embeddings"])
    wavelength = 2 * math.pi / inv
    scaled = np.where(wavelength > old / low, inv / factor, inv)
    smooth = (old / wavelength - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < old / high) & ~(wavelength > old / low)
    return np.where(medium, blended, scaled)


def norm64(x, w, b, kind, eps):
    if kind == "layernorm":
        mean = x.mean(-1, keepdims=True)
        y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * w
        return y + b if b is not None else y
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * (1.0 + w if kind == "rmsnorm_offset" else w)


def act64(kind, x):
    if kind in ("swiglu",):
        return x / (1.0 + np.exp(-x))
    if kind in ("gelu", "geglu"):
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward64(w, x, options):
    """An independent float64 forward of the block (HF's Llama/Qwen/Gemma/Phi spellings of each option)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    x = x.astype(np.float64)
    B, L, _ = x.shape
    kind, eps = options.get("norm", "rmsnorm"), float(np.float32(options.get("norm_eps", 1e-6)))
    mlp = options.get("mlp", "swiglu")
    rd = options.get("rope_dim") or HD

    def linear(a, name):
        y = a @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    n1 = norm64(x, w["input_layernorm.weight"], w.get("input_layernorm.bias"), kind, eps)
    q = linear(n1, "q_proj").reshape(B, L, NH, HD)
    k = linear(n1, "k_proj").reshape(B, L, NKV, HD)
    v = linear(n1, "v_proj").reshape(B, L, NKV, HD)
    if options.get("qk_norm"):
        qk_kind = "rmsnorm_offset" if kind == "rmsnorm_offset" else "rmsnorm"
        q = norm64(q, w["q_norm.weight"], None, qk_kind, eps)
        k = norm64(k, w["k_norm.weight"], None, qk_kind, eps)
    angles = np.arange(L, dtype=np.float64)[:, None] * inverse_frequencies(options, rd)[None, :]
    cos, sin = np.cos(angles)[None, :, None, :], np.sin(angles)[None, :, None, :]

    def rope(t):
        a, b, rest = t[..., : rd // 2], t[..., rd // 2 : rd], t[..., rd:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin, rest], axis=-1)

    q, k = rope(q), rope(k)
    group = NH // NKV
    k = np.repeat(k, group, axis=2)
    v = np.repeat(v, group, axis=2)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(HD)
    cap = options.get("attn_softcap")
    if cap is not None:
        scores = cap * np.tanh(scores / cap)
    scores = np.where(np.tril(np.ones((L, L), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, L, NH * HD)
    r1 = x + linear(ctx, "o_proj")
    n2 = norm64(r1, w["post_attention_layernorm.weight"], w.get("post_attention_layernorm.bias"), kind, eps)
    up = linear(n2, "up_proj")
    hidden = act64(mlp, linear(n2, "gate_proj")) * up if mlp in GATED else act64(mlp, up)
    return r1 + linear(hidden, "down_proj")


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8}
CASES = {
    "rope_theta": dict(rope_theta=500000.0),
    "qkv_bias": dict(qkv_bias=True),
    "qk_norm": dict(qk_norm=True),
    "llama3": dict(rope_theta=500000.0, rope_scaling=LLAMA3),
    "linear": dict(rope_scaling={"type": "linear", "factor": 3.0}),
    "norm_eps": dict(norm_eps=1e-5),
    "rope_dim": dict(rope_dim=4),
    "o_bias": dict(o_bias=True),
    "mlp_bias": dict(mlp_bias=True),
    "gelu": dict(mlp="gelu"),
    "gelu_tanh": dict(mlp="gelu_tanh", mlp_bias=True),
    "geglu": dict(mlp="geglu"),
    "geglu_tanh": dict(mlp="geglu_tanh"),
    "layernorm": dict(norm="layernorm"),
    "layernorm_bias": dict(norm="layernorm", norm_bias=True),
    "rmsnorm_offset": dict(norm="rmsnorm_offset"),
    "softcap": dict(attn_softcap=0.75),
    "qwen2": dict(rope_theta=1000000.0, qkv_bias=True, norm_eps=1e-6),
    "qwen3": dict(rope_theta=1000000.0, qk_norm=True, norm_eps=1e-6),
    "gemma": dict(norm="rmsnorm_offset", mlp="geglu_tanh", attn_softcap=2.0, qk_norm=True, rope_dim=6),
    "phi": dict(norm="layernorm", norm_bias=True, mlp="gelu_tanh", mlp_bias=True, qkv_bias=True, o_bias=True,
                rope_dim=4, rope_scaling={"type": "linear", "factor": 0.5}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_option_matches_float64_and_its_identities(case):
    options = CASES[case]
    w = weights_for(options)
    blk = samebits.TransformerBlockInference(w, n_heads=NH, n_kv_heads=NKV, **options)
    x = tokens((3, 11, DM), 7)
    y = blk.forward(x)
    want = forward64(w, x, options)
    assert np.max(np.abs(y - want)) <= 2e-5 * max(1.0, np.max(np.abs(want))), case
    # The option changes the output (so the check above tests it): default options give other values.
    if case != "norm_eps":
        plain = {k: v for k, v in w.items() if k in transformer_weights(dm=DM, nh=NH, nkv=NKV, it=IT)}
        if "gate_proj.weight" not in plain:
            plain["gate_proj.weight"] = np.zeros((IT, DM), np.float32)
        assert blk.forward(x).tobytes() != samebits.TransformerBlockInference(
            plain, n_heads=NH, n_kv_heads=NKV).forward(x).tobytes(), case
    assert blk._forward_reference(x).tobytes() == y.tobytes()
    steps, _ = decode(blk, x, blk.allocate_state(3, 11))
    assert steps.tobytes() == y.tobytes()
    expect_rows_alone_and_prefix(blk, x, prefix=4)


@pytest.mark.parametrize("case", ["qwen3", "gemma", "phi", "llama3", "softcap"])
def test_option_fast_equals_twin_on_every_target_and_thread_count(case, targets_and_threads):
    options = CASES[case]
    blk = samebits.TransformerBlockInference(weights_for(options, 9), n_heads=NH, n_kv_heads=NKV, window=5,
                                             **options)
    x = tokens((2, 17, DM), 8)
    targets_and_threads.scalar_one_thread()
    want = blk._forward_reference(x).tobytes()
    for target in targets_and_threads:
        assert blk.forward(x).tobytes() == want, target
        steps, _ = decode(blk, x, blk.allocate_state(2, 17))
        assert steps.tobytes() == want, target


def test_default_spellings_keep_the_default_bits():
    w = weights_for({})
    x = tokens((2, 6, DM), 3)
    want = samebits.TransformerBlockInference(w, n_heads=NH, n_kv_heads=NKV).forward(x).tobytes()
    for options in (dict(rope_dim=HD), dict(rope_scaling={"type": "linear", "factor": 1.0}),
                    dict(rope_theta=10000, norm_eps=1e-6, max_positions=8192), dict(norm_eps=np.float32(1e-6))):
        assert samebits.TransformerBlockInference(w, n_heads=NH, n_kv_heads=NKV, **options).forward(x).tobytes() \
            == want, options


def refusal(exc, pattern, options, weights=None):
    with pytest.raises(exc, match=pattern):
        samebits.TransformerBlockInference(weights_for({}) if weights is None else weights, n_heads=NH,
                                           n_kv_heads=NKV, **options)


def test_refusals_in_upstream_wording():
    p = r"^samebits TransformerBlock: "
    refusal(TypeError, p + r"rope_theta must be a float, got '1e4'", dict(rope_theta="1e4"))
    refusal(ValueError, p + r"rope_theta must be a finite positive float, got -1\.0", dict(rope_theta=-1.0))
    refusal(ValueError, p + r"rope_theta must be a finite positive float, got nan", dict(rope_theta=float("nan")))
    refusal(OverflowError, "too large", dict(rope_theta=1e300))  # struct's float32 rounding, as upstream
    # Positive as a double, 0.0 as the float32 that crosses: the engine repeats the test on the float32.
    refusal(ValueError, p + r"rope_theta must be a finite positive float, got 0\.0", dict(rope_theta=1e-50))
    refusal(TypeError, p + r"rope_scaling must be None or a dict with a 'type' key \('linear' or 'llama3'\), "
            r"got 'linear'", dict(rope_scaling="linear"))
    refusal(ValueError, p + r"rope_scaling type 'yarn' is not supported; 'linear' and 'llama3' are \(dynamic, yarn "
            r"and longrope carry an attention_factor this profile does not spell\)",
            dict(rope_scaling={"type": "yarn", "factor": 2.0}))
    refusal(ValueError, p + r"rope_scaling 'linear' needs 'factor'", dict(rope_scaling={"type": "linear"}))
    refusal(ValueError, p + r"rope_scaling 'llama3' needs 'low_freq_factor'",
            dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}))
    refusal(ValueError, p + r"rope_scaling factor must be a finite positive float, got 0",
            dict(rope_scaling={"type": "linear", "factor": 0}))
    refusal(ValueError, p + r"rope_scaling 'llama3' needs high_freq_factor > low_freq_factor, got 1\.0 <= 4\.0",
            dict(rope_scaling=dict(LLAMA3, low_freq_factor=4.0, high_freq_factor=1.0)))
    refusal(ValueError, p + r"rope_scaling 'llama3' original_max_position_embeddings must be positive, got 0",
            dict(rope_scaling=dict(LLAMA3, original_max_position_embeddings=0)))
    for bad in (7, 0, 10, True, 4.0):
        refusal(ValueError, p + rf"rope_dim must be an even integer in \(0, head_dim=8\], got {bad!r}",
                dict(rope_dim=bad))
    refusal(ValueError, p + r"max_positions must be positive, got 0", dict(max_positions=0))
    refusal(ValueError, p + r"norm='batchnorm' is not supported; one of \['layernorm', 'rmsnorm', 'rmsnorm_offset'\]",
            dict(norm="batchnorm"))
    refusal(ValueError, p + r"norm_eps must be a finite positive float, got 0\.0", dict(norm_eps=0.0))
    refusal(ValueError, p + r"norm_bias=True needs norm='layernorm', got norm='rmsnorm' \(an RMSNorm carries no bias\)",
            dict(norm_bias=True))
    refusal(ValueError, p + r"mlp='relu' is not supported; one of \['geglu', 'geglu_tanh', 'gelu', 'gelu_tanh', "
            r"'swiglu'\]", dict(mlp="relu"))
    refusal(ValueError, p + r"qk_norm=True with norm='layernorm' is not supported \(no reference family normalizes q "
            r"and k with LayerNorm; use norm='rmsnorm' or 'rmsnorm_offset'\)", dict(norm="layernorm", qk_norm=True))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        refusal(ValueError, p + rf"attn_softcap must be a finite positive float, got {bad!r}", dict(attn_softcap=bad))
    # Tensors against their options.
    refusal(ValueError, p + r"q_proj\.bias is required by the options passed and is missing from the weight dict",
            dict(qkv_bias=True))
    refusal(ValueError, p + r"q_norm\.weight is present in the weight dict but its option is off \(pass the option "
            r"that carries it, or drop the tensor; a silently ignored tensor is a wrong model that looks right\)",
            dict(), weights_for(dict(qk_norm=True)))
    refusal(ValueError, p + r"gate_proj\.weight is present but mlp='gelu' is ungated \(down_proj\(act\(up_proj\(x\)\)\)\); "
            r"drop it or pick a gated form", dict(mlp="gelu"), weights_for({}))
    bad = weights_for(dict(qkv_bias=True))
    bad["k_proj.bias"] = np.zeros(32, np.float32)
    refusal(ValueError, p + r"k_proj\.bias has shape \(32,\), want \(16,\)", dict(qkv_bias=True), bad)
    bad = weights_for(dict(o_bias=True))
    bad["o_proj.bias"][3] = np.inf
    refusal(ValueError, r"infinity in o_proj\.bias at flat index 3", dict(o_bias=True), bad)


def test_float_options_cross_as_float32():
    # 1e-5 and its float32 rounding are the same option; the double's next float32 neighbour is not.
    w = weights_for({})
    x = tokens((1, 5, DM), 4)
    a = samebits.TransformerBlockInference(w, n_heads=NH, n_kv_heads=NKV, norm_eps=1e-5).forward(x)
    f32 = struct.unpack("<f", struct.pack("<f", 1e-5))[0]
    b = samebits.TransformerBlockInference(w, n_heads=NH, n_kv_heads=NKV, norm_eps=f32).forward(x)
    assert a.tobytes() == b.tobytes()


def test_ungated_block_has_no_gate_weight():
    w = weights_for(dict(mlp="gelu"))
    blk = samebits.TransformerBlockInference(w, n_heads=NH, n_kv_heads=NKV, mlp="gelu")
    assert blk._engine.weight("up_proj.weight").tobytes() == w["up_proj.weight"].tobytes()
    with pytest.raises(ValueError, match=r"no weight named 'gate_proj\.weight' \(the MLP is ungated\)"):
        blk._engine.weight("gate_proj.weight")


def test_max_positions_and_the_angle_domain():
    x = tokens((1, 2, DM), 6)
    small = samebits.TransformerBlockInference(weights_for({}), n_heads=NH, n_kv_heads=NKV, max_positions=16)
    with pytest.raises(ValueError, match=r"exceeds max_positions 16"):
        small.forward(x, small.allocate_state(1, 17))
    # A longer ceiling is usable where the frequencies shrink enough (linear x2: angle 4499.5 at 9000).
    scaled = samebits.TransformerBlockInference(weights_for({}), n_heads=NH, n_kv_heads=NKV, max_positions=16384,
                                                rope_scaling={"type": "linear", "factor": 2.0})
    state = scaled.allocate_state(1, 9000)
    assert scaled.forward(x, state).tobytes() == scaled.forward(x).tobytes()
    plain = samebits.TransformerBlockInference(weights_for({}), n_heads=NH, n_kv_heads=NKV, max_positions=16384)
    with pytest.raises(ValueError, match=r"at or beyond the sin/cos domain"):
        plain.forward(x, plain.allocate_state(1, 9000))
