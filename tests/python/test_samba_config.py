"""samebits.SambaConfig: upstream's constructor conversions, every validation rule with its message and in its
order, float32 rounding, to_dict/from_dict, the registry of the worked example (docs/formats.md §1) and block shapes."""
import json
import math
import struct

import pytest

import samebits
from samba_checkpoint_writer import config_dict, registry as writer_registry

SambaConfig = samebits.SambaConfig
PREFIX = "samebits.SambaConfig: "


def example(**overrides):
    args = dict(vocab=256, d_model=32, layers=["mamba3", "attention"], n_heads=2, intermediate=64)
    args.update(overrides)
    return SambaConfig(**args)


# docs/formats.md §1.6, worked example: names, shapes and offsets copied from the spec.
EXAMPLE_REGISTRY = [
    ("embed.weight", (256, 32), 0), ("layers.0.block_norm.weight", (32,), 8192),
    ("layers.0.in_proj.weight", (419, 32), 8224), ("layers.0.dt_bias", (1,), 21632),
    ("layers.0.B_norm.weight", (128,), 21633), ("layers.0.C_norm.weight", (128,), 21761),
    ("layers.0.B_bias", (1, 128), 21889), ("layers.0.C_bias", (1, 128), 22017), ("layers.0.D", (1,), 22145),
    ("layers.0.out_proj.weight", (32, 64), 22146), ("layers.1.input_layernorm.weight", (32,), 24194),
    ("layers.1.post_attention_layernorm.weight", (32,), 24226), ("layers.1.q_proj.weight", (32, 32), 24258),
    ("layers.1.k_proj.weight", (32, 32), 25282), ("layers.1.v_proj.weight", (32, 32), 26306),
    ("layers.1.o_proj.weight", (32, 32), 27330), ("layers.1.gate_proj.weight", (64, 32), 28354),
    ("layers.1.up_proj.weight", (64, 32), 30402), ("layers.1.down_proj.weight", (32, 64), 32450),
    ("norm_f.weight", (32,), 34498),
]


def test_worked_example_registry_matches_the_spec():
    registry = example().registry()
    assert [(name, shape) for name, shape, _ in EXAMPLE_REGISTRY] == registry
    offsets = [0]
    for _, shape in registry:
        offsets.append(offsets[-1] + math.prod(shape))
    assert offsets[:-1] == [offset for _, _, offset in EXAMPLE_REGISTRY]
    assert len(registry) == 20 and offsets[-1] == 34530
    assert all(isinstance(shape, tuple) for _, shape in registry)


def test_benchmark_full_config_counts():
    config = SambaConfig(256, 384, ["mamba3", "attention", "mamba3", "attention"], n_heads=6, intermediate=1024)
    registry = config.registry()
    assert len(registry) == 38
    assert sum(math.prod(shape) for _, shape in registry) == 5664944


def test_untied_head_is_appended_last():
    registry = example(tie_embeddings=False).registry()
    assert len(registry) == 21
    assert registry[-1] == ("lm_head.weight", (256, 32))
    assert registry[-2][0] == "norm_f.weight"


def test_attributes_defaults_and_float32_rounding():
    config = example()
    assert config.layers == ("mamba3", "attention")
    assert (config.n_heads, config.n_kv_heads, config.head_dim, config.intermediate) == (2, 2, 16, 64)
    assert config.tie_embeddings is True
    assert config.norm_eps == 9.999999747378752e-06          # float32(1e-5), docs/formats.md §1.1
    assert config.dropout == 0.0
    assert example(dropout=0.1).dropout == 0.10000000149011612  # float32(0.1)
    assert type(config.norm_eps) is float and type(config.vocab) is int


def test_python_conversions_run_first_as_upstream():
    config = SambaConfig(256.9, "32", (kind for kind in ("mamba3", "attention")), n_heads=2.0, intermediate="64",
                         tie_embeddings=0, norm_eps=1, dropout=0)
    assert (config.vocab, config.d_model, config.n_heads, config.intermediate) == (256, 32, 2, 64)
    assert config.layers == ("mamba3", "attention") and config.tie_embeddings is False
    assert config.norm_eps == 1.0 and config.dropout == 0.0
    with pytest.raises(ValueError, match="invalid literal for int"):
        SambaConfig("many", 32, ["mamba3"])
    with pytest.raises(TypeError):
        SambaConfig(None, 32, ["mamba3"])
    with pytest.raises(OverflowError):
        SambaConfig(256, 32, ["mamba3"], norm_eps=1e39)  # struct's own refusal, as upstream's _round_f32
    with pytest.raises(struct.error):
        SambaConfig(256, 32, ["mamba3"], dropout="0.1")


def test_mamba_only_keeps_attention_fields_as_given():
    config = SambaConfig(100, 64, ["mamba3", "mamba3"], n_heads=4)
    assert (config.n_heads, config.n_kv_heads, config.head_dim, config.intermediate) == (4, None, None, None)
    assert len(config.registry()) == 2 + 18
    with pytest.raises(TypeError):
        config.block_shapes("attention")  # upstream multiplies None


SIZES = PREFIX + "vocab >= 2, d_model >= 1 and at least one layer are required"
KINDS = "; the kinds are ('mamba3', 'attention')"
RULES = [
    ("vocab_one", dict(vocab=1), SIZES),
    ("d_model_zero", dict(d_model=0), SIZES),
    ("no_layers", dict(layers=[]), SIZES),
    ("unknown_kind", dict(layers=["mamba3", "mamba2"]), PREFIX + "layer kind 'mamba2'" + KINDS),
    ("kind_case", dict(layers=["Attention"]), PREFIX + "layer kind 'Attention'" + KINDS),
    ("kind_with_quote", dict(layers=["it's"]), PREFIX + "layer kind \"it's\"" + KINDS),
    ("kind_not_str", dict(layers=[3]), PREFIX + "layer kind '3'" + KINDS),
    ("mamba_width", dict(d_model=48, n_heads=3), PREFIX + "a mamba3 layer needs d_model to be a multiple of 32 (Mamba3Block)"),
    ("no_n_heads", dict(n_heads=None), PREFIX + "an attention layer needs n_heads and intermediate"),
    ("no_intermediate", dict(intermediate=None), PREFIX + "an attention layer needs n_heads and intermediate"),
    ("heads_do_not_divide", dict(n_heads=3), PREFIX + "d_model must equal n_heads * head_dim"),
    ("head_dim_wrong", dict(head_dim=8), PREFIX + "d_model must equal n_heads * head_dim"),
    ("zero_heads", dict(n_heads=0), PREFIX + "d_model must equal n_heads * head_dim"),
    ("dropout_one", dict(dropout=1.0), PREFIX + "dropout must be in [0, 1)"),
    ("dropout_rounds_to_one", dict(dropout=0.99999999), PREFIX + "dropout must be in [0, 1)"),
    ("dropout_negative", dict(dropout=-0.1), PREFIX + "dropout must be in [0, 1)"),
    ("dropout_nan", dict(dropout=float("nan")), PREFIX + "dropout must be in [0, 1)"),
    ("norm_eps_negative", dict(norm_eps=-1e-5), PREFIX + "norm_eps must be >= 0"),
    ("norm_eps_nan", dict(norm_eps=float("nan")), PREFIX + "norm_eps must be >= 0"),
    # samebits keeps integers in 64 bits (upstream would carry a bigint until a checkpoint refuses it)
    ("vocab_beyond_int64", dict(vocab=2**70), PREFIX + "vocab = 1180591620717411303424 does not fit a 64-bit integer"),
]


@pytest.mark.parametrize("name,overrides,message", RULES, ids=[r[0] for r in RULES])
def test_every_rule_with_its_message(name, overrides, message):
    with pytest.raises(ValueError) as refused:
        example(**overrides)
    assert str(refused.value) == message


def test_rules_run_in_upstream_order():
    def message(**overrides):
        with pytest.raises(ValueError) as refused:
            example(**overrides)
        return str(refused.value)
    assert "vocab >= 2" in message(vocab=0, layers=["rnn"])
    assert "layer kind 'rnn'" in message(d_model=33, layers=["mamba3", "rnn"])
    assert "multiple of 32" in message(d_model=40, n_heads=None)
    assert "needs n_heads" in message(intermediate=None, dropout=2.0, norm_eps=-1.0)
    assert "dropout" in message(dropout=2.0, norm_eps=-1.0)


def test_accepted_edges():
    assert example(norm_eps=-1e-50).norm_eps == 0.0  # rounds to -0.0, which is >= 0
    assert math.copysign(1.0, example(norm_eps=-1e-50).norm_eps) == -1.0
    assert example(norm_eps=float("inf")).norm_eps == float("inf")  # upstream's rule lets it through
    assert example(dropout=0.999999).dropout < 1.0
    negative = example(n_heads=-2)  # floor division: head_dim -16, (-2) * (-16) == 32
    assert (negative.head_dim, negative.n_kv_heads) == (-16, -2)


def test_to_dict_and_canonical_json_match_the_spec_example():
    config = example()
    assert config.to_dict() == {"vocab": 256, "d_model": 32, "layers": ["mamba3", "attention"], "n_heads": 2,
                                "n_kv_heads": 2, "head_dim": 16, "intermediate": 64, "tie_embeddings": True,
                                "norm_eps": 9.999999747378752e-06, "dropout": 0.0}
    assert list(config.to_dict()) == ["vocab", "d_model", "layers", "n_heads", "n_kv_heads", "head_dim",
                                      "intermediate", "tie_embeddings", "norm_eps", "dropout"]
    # docs/formats.md §3.8's config object, copied from the spec.
    text = json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":"))
    assert text == ('{"d_model":32,"dropout":0.0,"head_dim":16,"intermediate":64,"layers":["mamba3","attention"],'
                    '"n_heads":2,"n_kv_heads":2,"norm_eps":9.999999747378752e-06,"tie_embeddings":true,"vocab":256}')


def test_from_dict_round_trips_and_revalidates():
    for config in (example(), example(tie_embeddings=False, dropout=0.25), SambaConfig(64, 64, ["mamba3"]),
                   SambaConfig(9, 24, ["attention"] * 3, n_heads=4, n_kv_heads=1, intermediate=8, norm_eps=1e-6)):
        again = SambaConfig.from_dict(config.to_dict())
        assert again == config and again.to_dict() == config.to_dict()
        assert SambaConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    d = dict(example().to_dict(), rope_theta=10000.0)  # extras ignored
    assert SambaConfig.from_dict(d) == example()
    missing = example().to_dict()
    del missing["dropout"]
    with pytest.raises(KeyError):
        SambaConfig.from_dict(missing)
    with pytest.raises(ValueError, match="dropout must be in"):
        SambaConfig.from_dict(dict(example().to_dict(), dropout=1.5))


def test_block_shapes():
    config = example()
    mamba = config.block_shapes("mamba3")
    assert mamba == [("block_norm.weight", (32,)), ("in_proj.weight", (419, 32)), ("dt_bias", (1,)),
                     ("B_norm.weight", (128,)), ("C_norm.weight", (128,)), ("B_bias", (1, 128)),
                     ("C_bias", (1, 128)), ("D", (1,)), ("out_proj.weight", (32, 64))]
    attention = config.block_shapes("attention")
    assert [name for name, _ in attention] == [
        "input_layernorm.weight", "post_attention_layernorm.weight", "q_proj.weight", "k_proj.weight",
        "v_proj.weight", "o_proj.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight"]
    assert config.block_shapes("anything else") == attention  # upstream: every kind but "mamba3"
    gqa = SambaConfig(10, 32, ["attention"], n_heads=4, n_kv_heads=1, head_dim=8, intermediate=48)
    assert dict(gqa.block_shapes("attention"))["k_proj.weight"] == (8, 32)
    assert dict(gqa.block_shapes("attention"))["down_proj.weight"] == (32, 48)


@pytest.mark.parametrize("args", [
    (256, 32, ["mamba3", "attention"], 2, None, None, 64),
    (256, 32, ["mamba3", "attention"], 2, None, None, 64, False),
    (100, 64, ["mamba3", "mamba3"]),
    (7, 24, ["attention", "attention", "attention"], 4, 2, None, 40),
    (50, 64, ["attention", "mamba3"], 2, 1, 32, 96),
    (256, 384, ["mamba3", "attention", "mamba3", "attention"], 6, None, None, 1024),
])
def test_registry_agrees_with_the_test_writer(args):
    # The writer spells the registry out from docs/formats.md on its own; both must agree.
    assert SambaConfig(*args).registry() == writer_registry(config_dict(*args))
    assert SambaConfig(*args).to_dict() == config_dict(*args)


def test_equality_hash_and_repr():
    assert example() == example(head_dim=16, n_kv_heads=2, norm_eps=9.999999747378752e-06)
    assert example() != example(tie_embeddings=False)
    assert example() != "SambaConfig"
    assert hash(example()) == hash(example(head_dim=16))
    assert len({example(), example(), example(dropout=0.5)}) == 2
    assert repr(example()) == ("SambaConfig(vocab=256, d_model=32, layers=('mamba3', 'attention'), n_heads=2, "
                               "n_kv_heads=2, head_dim=16, intermediate=64, tie_embeddings=True, "
                               "norm_eps=9.999999747378752e-06, dropout=0.0)")


def test_public_name():
    assert samebits.SambaConfig is SambaConfig
