// SambaConfig: the worked example's registry (docs/formats.md §1.6), every validation rule in upstream's
// order with its message, float32 rounding of the two floats, block shapes and saturation of absurd sizes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "models/samba_config.hpp"
#include "test_samba_support.hpp"

using samebits::models::SambaConfig;
using samebits::models::SambaConfigArgs;
using samebits::models::SambaLayerKind;
using samebits::models::SambaRegistry;

namespace {

SambaConfigArgs example_args() { return samebits::testing::upstream_example_args(); }

// The refusal message of building a config from `args`, or "" when it builds.
std::string refusal(const SambaConfigArgs& args) {
  try {
    SambaConfig config(args);
  } catch (const samebits::Error& error) {
    EXPECT_EQ(error.kind(), samebits::ErrorKind::Value);
    return error.what();
  }
  return "";
}

const std::string kPrefix = "samebits.SambaConfig: ";

}  // namespace

TEST(SambaConfig, WorkedExampleRegistryHasTheSpecOffsets) {
  SambaConfig config(example_args());
  SambaRegistry registry = config.registry();
  // docs/formats.md §1.6, worked example: T = 20, N = 34,530 and these offsets, copied from the spec's list.
  struct Expected {
    const char* name;
    std::vector<std::int64_t> shape;
    std::int64_t offset;
  };
  const std::vector<Expected> expected = {
      {"embed.weight", {256, 32}, 0},
      {"layers.0.block_norm.weight", {32}, 8192},
      {"layers.0.in_proj.weight", {419, 32}, 8224},
      {"layers.0.dt_bias", {1}, 21632},
      {"layers.0.B_norm.weight", {128}, 21633},
      {"layers.0.C_norm.weight", {128}, 21761},
      {"layers.0.B_bias", {1, 128}, 21889},
      {"layers.0.C_bias", {1, 128}, 22017},
      {"layers.0.D", {1}, 22145},
      {"layers.0.out_proj.weight", {32, 64}, 22146},
      {"layers.1.input_layernorm.weight", {32}, 24194},
      {"layers.1.post_attention_layernorm.weight", {32}, 24226},
      {"layers.1.q_proj.weight", {32, 32}, 24258},
      {"layers.1.k_proj.weight", {32, 32}, 25282},
      {"layers.1.v_proj.weight", {32, 32}, 26306},
      {"layers.1.o_proj.weight", {32, 32}, 27330},
      {"layers.1.gate_proj.weight", {64, 32}, 28354},
      {"layers.1.up_proj.weight", {64, 32}, 30402},
      {"layers.1.down_proj.weight", {32, 64}, 32450},
      {"norm_f.weight", {32}, 34498},
  };
  ASSERT_EQ(registry.entries.size(), expected.size());
  EXPECT_EQ(config.tensor_count(), 20);
  EXPECT_EQ(registry.total, 34530);
  EXPECT_TRUE(registry.exact);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(registry.entries[i].name, expected[i].name);
    EXPECT_EQ(registry.entries[i].shape, expected[i].shape);
    EXPECT_EQ(registry.entries[i].offset, expected[i].offset);
    std::int64_t size = 1;
    for (auto d : expected[i].shape) size *= d;
    EXPECT_EQ(registry.entries[i].size, size);
  }
  EXPECT_EQ(registry.index_of("layers.1.o_proj.weight"), 15u);
  EXPECT_EQ(registry.index_of("lm_head.weight"), SambaRegistry::npos);
  // Defaults filled because an attention layer exists.
  EXPECT_EQ(config.head_dim(), 16);
  EXPECT_EQ(config.n_kv_heads(), 2);
}

TEST(SambaConfig, BenchmarkFullConfigCounts) {
  SambaConfigArgs args;
  args.vocab = 256;
  args.d_model = 384;
  args.layers = {"mamba3", "attention", "mamba3", "attention"};
  args.n_heads = 6;
  args.intermediate = 1024;
  SambaConfig config(args);
  SambaRegistry registry = config.registry();
  EXPECT_EQ(registry.entries.size(), 38u);  // docs/formats.md §1.6
  EXPECT_EQ(registry.total, 5664944);
}

TEST(SambaConfig, UntiedHeadIsTheLastTensor) {
  SambaConfigArgs args = example_args();
  args.tie_embeddings = false;
  SambaConfig config(args);
  SambaRegistry registry = config.registry();
  ASSERT_EQ(registry.entries.size(), 21u);
  EXPECT_EQ(config.tensor_count(), 21);
  EXPECT_EQ(registry.entries.back().name, "lm_head.weight");
  EXPECT_EQ(registry.entries.back().shape, (std::vector<std::int64_t>{256, 32}));
  EXPECT_EQ(registry.entries.back().offset, 34530);
  EXPECT_EQ(registry.total, 34530 + 8192);
}

TEST(SambaConfig, FloatsAreRoundedToFloat32AndKeptAsDoubles) {
  SambaConfigArgs args = example_args();
  SambaConfig defaults(args);
  // 1e-5 -> float32 0x3727C5AC -> 9.999999747378752e-06 (docs/formats.md §1.1)
  EXPECT_EQ(defaults.norm_eps(), 9.999999747378752e-06);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(defaults.norm_eps_f32()), 0x3727C5ACu);
  args.dropout = 0.1;
  EXPECT_EQ(SambaConfig(args).dropout(), 0.10000000149011612);
  // A tiny negative eps rounds to -0.0, which satisfies >= 0 exactly as upstream's check does.
  args.dropout = 0.0;
  args.norm_eps = -1e-50;
  SambaConfig negative_zero(args);
  EXPECT_TRUE(std::signbit(negative_zero.norm_eps()));
  EXPECT_EQ(negative_zero.norm_eps(), 0.0);
  // Infinity passes the rule (upstream too); only a finite value past float32's range cannot be packed.
  args.norm_eps = std::numeric_limits<double>::infinity();
  EXPECT_EQ(refusal(args), "");
  args.norm_eps = 3.4028234663852886e38;  // FLT_MAX itself
  EXPECT_EQ(refusal(args), "");
  // The midpoint between FLT_MAX and 2^128 (2^128 - 2^103) rounds to infinity; just below it, to FLT_MAX.
  // Python's struct.pack('<f', x) gives the same split (checked by hand: OverflowError at the midpoint).
  const double midpoint = 3.4028235677973366e38;
  args.norm_eps = std::nextafter(midpoint, 0.0);
  EXPECT_EQ(SambaConfig(args).norm_eps(), 3.4028234663852886e38);
  args.norm_eps = midpoint;
  EXPECT_EQ(refusal(args), kPrefix + "norm_eps does not fit float32 (float too large to pack with f format)");
  args.norm_eps = -midpoint;
  EXPECT_EQ(refusal(args), kPrefix + "norm_eps does not fit float32 (float too large to pack with f format)");
}

TEST(SambaConfig, EveryRuleWithItsMessage) {
  const std::string sizes = kPrefix + "vocab >= 2, d_model >= 1 and at least one layer are required";
  SambaConfigArgs args = example_args();
  args.vocab = 1;
  EXPECT_EQ(refusal(args), sizes);
  args = example_args();
  args.d_model = 0;
  EXPECT_EQ(refusal(args), sizes);
  args = example_args();
  args.layers.clear();
  EXPECT_EQ(refusal(args), sizes);

  args = example_args();
  args.layers = {"mamba3", "Attention"};
  EXPECT_EQ(refusal(args), kPrefix + "layer kind 'Attention'; the kinds are ('mamba3', 'attention')");
  args.layers = {"it's"};
  EXPECT_EQ(refusal(args), kPrefix + "layer kind \"it's\"; the kinds are ('mamba3', 'attention')");
  args.layers = {"tab\there\\"};
  EXPECT_EQ(refusal(args), kPrefix + "layer kind 'tab\\there\\\\'; the kinds are ('mamba3', 'attention')");

  args = example_args();
  args.d_model = 48;
  args.n_heads = 3;
  EXPECT_EQ(refusal(args), kPrefix + "a mamba3 layer needs d_model to be a multiple of 32 (Mamba3Block)");

  const std::string needs = kPrefix + "an attention layer needs n_heads and intermediate";
  args = example_args();
  args.n_heads.reset();
  EXPECT_EQ(refusal(args), needs);
  args = example_args();
  args.intermediate.reset();
  EXPECT_EQ(refusal(args), needs);

  const std::string product = kPrefix + "d_model must equal n_heads * head_dim";
  args = example_args();
  args.n_heads = 3;  // head_dim = 32 // 3 = 10, 30 != 32
  EXPECT_EQ(refusal(args), product);
  args = example_args();
  args.head_dim = 8;
  EXPECT_EQ(refusal(args), product);
  args = example_args();
  args.n_heads = 0;  // a ZeroDivisionError upstream; refused by the rule it breaks
  EXPECT_EQ(refusal(args), product);

  args = example_args();
  args.dropout = 1.0;
  EXPECT_EQ(refusal(args), kPrefix + "dropout must be in [0, 1)");
  args.dropout = 0.99999999;  // rounds to 1.0f
  EXPECT_EQ(refusal(args), kPrefix + "dropout must be in [0, 1)");
  args.dropout = -0.25;
  EXPECT_EQ(refusal(args), kPrefix + "dropout must be in [0, 1)");
  args.dropout = std::nan("");
  EXPECT_EQ(refusal(args), kPrefix + "dropout must be in [0, 1)");
  args.dropout = 0.999999;  // below 1 in float32
  EXPECT_EQ(refusal(args), "");

  args = example_args();
  args.norm_eps = -1e-5;
  EXPECT_EQ(refusal(args), kPrefix + "norm_eps must be >= 0");
  args.norm_eps = std::nan("");
  EXPECT_EQ(refusal(args), kPrefix + "norm_eps must be >= 0");
}

TEST(SambaConfig, RulesRunInUpstreamOrder) {
  SambaConfigArgs args = example_args();
  // sizes before kinds
  args.vocab = 0;
  args.layers = {"rnn"};
  EXPECT_NE(refusal(args).find("vocab >= 2"), std::string::npos);
  // kinds before the mamba3 width
  args = example_args();
  args.d_model = 33;
  args.layers = {"mamba3", "rnn"};
  EXPECT_NE(refusal(args).find("layer kind 'rnn'"), std::string::npos);
  // mamba3 width before the attention fields
  args = example_args();
  args.d_model = 40;
  args.n_heads.reset();
  EXPECT_NE(refusal(args).find("multiple of 32"), std::string::npos);
  // attention fields before dropout, dropout before norm_eps
  args = example_args();
  args.intermediate.reset();
  args.dropout = 2.0;
  args.norm_eps = -1.0;
  EXPECT_NE(refusal(args).find("needs n_heads and intermediate"), std::string::npos);
  args = example_args();
  args.dropout = 2.0;
  args.norm_eps = -1.0;
  EXPECT_NE(refusal(args).find("dropout"), std::string::npos);
  // float32 packing runs before every rule (upstream normalizes first)
  args = example_args();
  args.vocab = 0;
  args.dropout = 1e300;
  EXPECT_NE(refusal(args).find("dropout does not fit float32"), std::string::npos);
}

TEST(SambaConfig, AttentionDefaultsOnlyWithAnAttentionLayer) {
  SambaConfigArgs args;
  args.vocab = 100;
  args.d_model = 64;
  args.layers = {"mamba3", "mamba3"};
  args.n_heads = 4;  // kept as given, nothing filled in
  SambaConfig mamba_only(args);
  EXPECT_EQ(mamba_only.n_heads(), 4);
  EXPECT_FALSE(mamba_only.head_dim().has_value());
  EXPECT_FALSE(mamba_only.n_kv_heads().has_value());
  EXPECT_FALSE(mamba_only.intermediate().has_value());
  EXPECT_EQ(mamba_only.registry().entries.size(), 2u + 18u);
  // Attention shapes of a config without the fields: upstream multiplies None (a TypeError).
  try {
    mamba_only.block_shapes("attention");
    FAIL() << "expected a refusal";
  } catch (const samebits::Error& error) {
    EXPECT_EQ(error.kind(), samebits::ErrorKind::Type);
  }

  // Negative heads whose product is d_model pass upstream's rules (Python floor division), and so here.
  args = example_args();
  args.n_heads = -2;
  SambaConfig negative(args);
  EXPECT_EQ(negative.head_dim(), -16);
  EXPECT_EQ(negative.n_kv_heads(), -2);
  EXPECT_EQ(negative.registry().entries[13].shape, (std::vector<std::int64_t>{32, 32}));  // k_proj: (-2)(-16)
}

TEST(SambaConfig, BlockShapesFollowTheBlockOrder) {
  SambaConfig config(example_args());
  auto mamba = config.block_shapes(SambaLayerKind::Mamba3);
  auto attention = config.block_shapes("attention");
  auto other = config.block_shapes("anything else reads as attention");
  ASSERT_EQ(mamba.size(), 9u);
  ASSERT_EQ(attention.size(), 9u);
  for (std::size_t i = 0; i < 9; ++i) {
    EXPECT_STREQ(mamba[i].name, samebits::models::kMamba3TensorNames[i]);
    EXPECT_STREQ(attention[i].name, samebits::models::kAttentionTensorNames[i]);
    EXPECT_STREQ(other[i].name, attention[i].name);
    EXPECT_EQ(other[i].shape, attention[i].shape);
  }
  // d_in_proj = 4*dm + 256 + 3*H + 32 with H = dm / 32 (docs/formats.md §1.4)
  EXPECT_EQ(mamba[1].shape, (std::vector<std::int64_t>{4 * 32 + 256 + 3 + 32, 32}));
  EXPECT_EQ(mamba[8].shape, (std::vector<std::int64_t>{32, 64}));
  // GQA: k/v use n_kv_heads * head_dim
  SambaConfigArgs args = example_args();
  args.n_heads = 4;
  args.n_kv_heads = 1;
  args.head_dim = 8;
  auto gqa = SambaConfig(args).block_shapes(SambaLayerKind::Attention);
  EXPECT_EQ(gqa[2].shape, (std::vector<std::int64_t>{32, 32}));
  EXPECT_EQ(gqa[3].shape, (std::vector<std::int64_t>{8, 32}));
  EXPECT_EQ(gqa[4].shape, (std::vector<std::int64_t>{8, 32}));
  EXPECT_EQ(gqa[6].shape, (std::vector<std::int64_t>{64, 32}));
}

TEST(SambaConfig, AbsurdSizesSaturateInsteadOfWrapping) {
  SambaConfigArgs args = example_args();
  args.vocab = std::numeric_limits<std::int64_t>::max();
  SambaRegistry registry = SambaConfig(args).registry();
  EXPECT_FALSE(registry.exact);
  EXPECT_EQ(registry.entries[0].size, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(registry.total, std::numeric_limits<std::int64_t>::max());
  EXPECT_GT(registry.total, samebits::models::kSambaMaxParameters);
  // A zero-width feed-forward is a config upstream admits; its tensors have size 0.
  args = example_args();
  args.intermediate = 0;
  SambaRegistry empty = SambaConfig(args).registry();
  EXPECT_EQ(empty.entries[16].size, 0);
  EXPECT_TRUE(empty.exact);
}

TEST(SambaConfig, EqualityComparesTheNormalizedFields) {
  SambaConfigArgs args = example_args();
  SambaConfigArgs explicit_args = example_args();
  explicit_args.head_dim = 16;
  explicit_args.n_kv_heads = 2;
  explicit_args.norm_eps = 9.999999747378752e-06;
  EXPECT_EQ(SambaConfig(args), SambaConfig(explicit_args));
  explicit_args.tie_embeddings = false;
  EXPECT_FALSE(SambaConfig(args) == SambaConfig(explicit_args));
}

TEST(SambaConfig, PythonStrRepr) {
  using samebits::models::python_str_repr;
  EXPECT_EQ(python_str_repr("mamba3"), "'mamba3'");
  EXPECT_EQ(python_str_repr(""), "''");
  EXPECT_EQ(python_str_repr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(python_str_repr("a'b"), "\"a'b\"");
  EXPECT_EQ(python_str_repr("\x01\x7f\n"), "'\\x01\\x7f\\n'");
  EXPECT_EQ(python_str_repr("caf\xc3\xa9"), "'caf\xc3\xa9'");  // printable non-ASCII is kept
  EXPECT_EQ(python_str_repr("\xc2\xa0"), "'\\xa0'");           // NO-BREAK SPACE is not printable
}
