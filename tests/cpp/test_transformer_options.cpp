// TransformerBlockInference under the block options (docs/models.md §2-§11): for each option and a few
// combinations, fast == scalar twin on every SIMD target and 1/2/3 threads (stateless and carried, outputs
// and state), step == forward at every position, a row alone == the row in a batch; the default record
// keeps today's bits (linear at factor 1, rope_dim == head_dim); the refusals name the option.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "numerics/fp.hpp"
#include "test_transformer_support.hpp"

namespace samebits {
namespace {

using testing::BlockShape;
using testing::first_difference;
using testing::random_tokens;

struct Case {
  std::string label;
  std::function<void(TransformerOptions&)> set;
};

std::int64_t diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -2;
  return first_difference(a.data(), b.data(), static_cast<std::int64_t>(a.size()));
}

// The base weights of `shape` plus every optional tensor `options` turns on; no gate when ungated.
testing::BlockWeights option_weights(const BlockShape& s, const TransformerOptions& options,
                                     std::uint64_t seed) {
  testing::BlockWeights w = testing::random_weights(s, seed);
  const std::int64_t hd = s.d_model / s.n_heads, qw = s.n_heads * hd, kw = s.n_kv_heads * hd;
  const bool gated = options.mlp == "swiglu" || options.mlp == "geglu" || options.mlp == "geglu_tanh";
  std::vector<std::pair<std::string, std::int64_t>> extra;
  if (options.qkv_bias)
    extra.insert(extra.end(), {{"q_proj.bias", qw}, {"k_proj.bias", kw}, {"v_proj.bias", kw}});
  if (options.o_bias) extra.push_back({"o_proj.bias", s.d_model});
  if (options.norm_bias)
    extra.insert(extra.end(),
                 {{"input_layernorm.bias", s.d_model}, {"post_attention_layernorm.bias", s.d_model}});
  if (options.mlp_bias) {
    extra.insert(extra.end(), {{"up_proj.bias", s.intermediate}, {"down_proj.bias", s.d_model}});
    if (gated) extra.push_back({"gate_proj.bias", s.intermediate});
  }
  if (options.qk_norm) extra.insert(extra.end(), {{"q_norm.weight", hd}, {"k_norm.weight", hd}});
  testing::Rng rng(seed + 1);
  std::vector<std::vector<float>> values;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < w.named.size(); ++i) {
    if (!gated && w.named[i].first == "gate_proj.weight") continue;
    names.push_back(w.named[i].first);
    values.push_back(w.values[i]);
  }
  for (const auto& [name, n] : extra) {
    names.push_back(name);
    std::vector<float> v = rng.uniform_vector(static_cast<std::size_t>(n), 0.5f);
    if (name.find("norm.weight") != std::string::npos)
      for (auto& x : v) x = 1.0f + 0.25f * x;
    values.push_back(v);
  }
  testing::BlockWeights out;
  out.values = values;
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(out.values[i].size())};
    for (const auto& [name, view] : w.named)
      if (name == names[i]) shape = view.shape;
    out.named.push_back({names[i], {out.values[i].data(), shape}});
  }
  return out;
}

TransformerBlockInference make(const BlockShape& s, TransformerOptions options, std::uint64_t seed) {
  options.n_heads = s.n_heads;
  options.n_kv_heads = s.n_kv_heads;
  options.window = s.window;
  testing::BlockWeights w = option_weights(s, options, seed);
  return TransformerBlockInference(w.named, options);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      {"rope_theta 500000", [](TransformerOptions& o) { o.rope_theta = 500000.0f; }},
      {"qkv_bias", [](TransformerOptions& o) { o.qkv_bias = true; }},
      {"qk_norm", [](TransformerOptions& o) { o.qk_norm = true; }},
      {"llama3",
       [](TransformerOptions& o) {
         o.rope_theta = 500000.0f;
         o.rope_scaling = "llama3";
         o.rope_factor = 8.0f;
         o.rope_low_freq_factor = 1.0f;
         o.rope_high_freq_factor = 4.0f;
         o.rope_original_max_position_embeddings = 64;
       }},
      {"linear 2",
       [](TransformerOptions& o) {
         o.rope_scaling = "linear";
         o.rope_factor = 2.0f;
       }},
      {"norm_eps 1e-5", [](TransformerOptions& o) { o.norm_eps = 1e-5f; }},
      {"rope_dim 4", [](TransformerOptions& o) { o.rope_dim = 4; }},
      {"o_bias mlp_bias",
       [](TransformerOptions& o) {
         o.o_bias = true;
         o.mlp_bias = true;
       }},
      {"gelu mlp_bias",
       [](TransformerOptions& o) {
         o.mlp = "gelu";
         o.mlp_bias = true;
       }},
      {"gelu_tanh", [](TransformerOptions& o) { o.mlp = "gelu_tanh"; }},
      {"geglu", [](TransformerOptions& o) { o.mlp = "geglu"; }},
      {"geglu_tanh", [](TransformerOptions& o) { o.mlp = "geglu_tanh"; }},
      {"layernorm bias",
       [](TransformerOptions& o) {
         o.norm = "layernorm";
         o.norm_bias = true;
       }},
      {"layernorm", [](TransformerOptions& o) { o.norm = "layernorm"; }},
      {"rmsnorm_offset qk_norm",
       [](TransformerOptions& o) {
         o.norm = "rmsnorm_offset";
         o.qk_norm = true;
       }},
      {"softcap 0.5", [](TransformerOptions& o) { o.attn_softcap = 0.5f; }},
      {"softcap 50", [](TransformerOptions& o) { o.attn_softcap = 50.0f; }},
      {"qwen2-like",
       [](TransformerOptions& o) {
         o.rope_theta = 1000000.0f;
         o.qkv_bias = true;
       }},
      {"gemma-like",
       [](TransformerOptions& o) {
         o.norm = "rmsnorm_offset";
         o.mlp = "geglu_tanh";
         o.attn_softcap = 30.0f;
         o.qk_norm = true;
         o.rope_dim = 4;
       }},
      {"phi-like",
       [](TransformerOptions& o) {
         o.norm = "layernorm";
         o.norm_bias = true;
         o.mlp = "gelu_tanh";
         o.mlp_bias = true;
         o.qkv_bias = true;
         o.o_bias = true;
         o.rope_dim = 8;
         o.rope_scaling = "linear";
         o.rope_factor = 0.5f;
       }},
  };
  return all;
}

const std::vector<BlockShape>& shapes() {
  static const std::vector<BlockShape> all{
      {32, 4, 2, 48, 0}, {32, 4, 1, 48, 8}, {48, 2, 1, 300, 3}, {160, 2, 2, 40, 0}};
  return all;
}

TEST(TransformerOptions, FastEqualsTwinEveryTargetAndThreadCount) {
  std::uint64_t seed = 1000;
  for (const Case& c : cases()) {
    for (const BlockShape& shape : shapes()) {
      TransformerOptions options;
      c.set(options);
      const TransformerBlockInference block = make(shape, options, seed++);
      const std::int64_t batch = 2, dm = shape.d_model;
      for (std::int64_t length : {1, 13}) {
        const std::vector<float> x = random_tokens(batch, length, dm, seed++);
        const TensorView view{x.data(), {batch, length, dm}};
        const std::vector<float> want = block.forward_reference(view);
        testing::for_each_target_and_threads([&](const std::string& where) {
          ASSERT_EQ(diff(want, block.forward(view)), -1)
              << c.label << " " << shape.label() << " L " << length << " " << where;
        });
      }
      // Carried 5 + 7: outputs and the whole state, fast against the twin.
      const std::vector<float> x = random_tokens(batch, 12, dm, seed++);
      TransformerState fast = block.allocate_state(batch, 20), twin = block.allocate_state(batch, 20);
      for (auto [from, count] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 7}}) {
        std::vector<float> part;
        for (std::int64_t b = 0; b < batch; ++b)
          part.insert(part.end(), x.begin() + (b * 12 + from) * dm, x.begin() + (b * 12 + from + count) * dm);
        const TensorView view{part.data(), {batch, count, dm}};
        ASSERT_EQ(diff(block.forward_reference(view, twin, false), block.forward(view, fast)), -1)
            << c.label << " " << shape.label() << " carried from " << from;
        ASSERT_EQ(diff(twin.k_cache_copy(), fast.k_cache_copy()), -1) << c.label << " k state";
        ASSERT_EQ(diff(twin.v_cache_copy(), fast.v_cache_copy()), -1) << c.label << " v state";
      }
    }
  }
}

TEST(TransformerOptions, StepEqualsForwardAndRowsAlone) {
  std::uint64_t seed = 2000;
  for (const Case& c : cases()) {
    const BlockShape shape{32, 4, 2, 48, 0};
    TransformerOptions options;
    c.set(options);
    const TransformerBlockInference block = make(shape, options, seed++);
    const std::int64_t batch = 3, length = 10, dm = shape.d_model;
    const std::vector<float> x = random_tokens(batch, length, dm, seed++);
    const std::vector<float> whole = block.forward(TensorView{x.data(), {batch, length, dm}});
    TransformerState state = block.allocate_state(batch, length);
    for (std::int64_t t = 0; t < length; ++t) {
      const std::vector<float> token = testing::tokens_at(x, batch, length, dm, t);
      const std::vector<float> y = block.step(TensorView{token.data(), {batch, 1, dm}}, state);
      for (std::int64_t b = 0; b < batch; ++b)
        ASSERT_EQ(std::memcmp(y.data() + b * dm, whole.data() + (b * length + t) * dm, dm * sizeof(float)), 0)
            << c.label << " step " << t << " row " << b;
    }
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::vector<float> row(x.begin() + b * length * dm, x.begin() + (b + 1) * length * dm);
      const std::vector<float> alone = block.forward(TensorView{row.data(), {1, length, dm}});
      ASSERT_EQ(std::memcmp(alone.data(), whole.data() + b * length * dm, alone.size() * sizeof(float)), 0)
          << c.label << " row " << b;
    }
  }
}

// Options at their default values (spelled out, or equal to the default by value) give today's bits.
TEST(TransformerOptions, DefaultRecordsKeepTheDefaultBits) {
  const BlockShape shape{32, 2, 1, 64, 0};
  const TransformerBlockInference plain = make(shape, {}, 77);
  const std::vector<float> x = random_tokens(2, 9, 32, 78);
  const TensorView view{x.data(), {2, 9, 32}};
  const std::vector<float> want = plain.forward(view);
  for (const auto& set :
       std::vector<std::function<void(TransformerOptions&)>>{[](TransformerOptions& o) { o.rope_dim = 16; },
                                                             [](TransformerOptions& o) {
                                                               o.rope_scaling = "linear";
                                                               o.rope_factor = 1.0f;
                                                             },
                                                             [](TransformerOptions& o) {
                                                               o.rope_theta = 10000.0f;
                                                               o.norm_eps = 1e-6f;
                                                               o.max_positions = 8192;
                                                             }}) {
    TransformerOptions options;
    set(options);
    EXPECT_EQ(diff(want, make(shape, options, 77).forward(view)), -1);
  }
}

TEST(TransformerOptions, RefusalsNameTheOption) {
  const BlockShape shape{32, 2, 1, 64, 0};
  auto refusal = [&](const std::function<void(TransformerOptions&)>& set, bool with_tensors = true) {
    TransformerOptions options;
    set(options);
    options.n_heads = 2;
    options.n_kv_heads = 1;
    testing::BlockWeights w =
        with_tensors ? option_weights(shape, options, 5) : testing::random_weights(shape, 5);
    return testing::value_error_of([&] { TransformerBlockInference block(w.named, options); });
  };
  // Each option set wrongly (on a weight dict with the tensors those options need, or without them).
  struct Case {
    std::function<void(TransformerOptions&)> set;
    std::string message;
    bool with_tensors = true;
  };
  const std::vector<Case> cases{
      {[](TransformerOptions& o) { o.rope_theta = 0.0f; },
       "rope_theta must be a finite positive float, got 0.0"},
      {[](TransformerOptions& o) { o.rope_scaling = "yarn"; }, "rope_scaling type 'yarn' is not supported"},
      {[](TransformerOptions& o) { o.rope_scaling = "linear"; }, "rope_scaling 'linear' needs 'factor'"},
      {[](TransformerOptions& o) {
         o.rope_scaling = "llama3";
         o.rope_factor = 8.0f;
       },
       "rope_scaling 'llama3' needs 'low_freq_factor'"},
      {[](TransformerOptions& o) { o.rope_dim = 7; },
       "rope_dim must be an even integer in (0, head_dim=16], got 7"},
      {[](TransformerOptions& o) { o.norm = "batchnorm"; },
       "norm='batchnorm' is not supported; one of ['layernorm', 'rmsnorm', 'rmsnorm_offset']"},
      {[](TransformerOptions& o) { o.norm_bias = true; },
       "norm_bias=True needs norm='layernorm', got norm='rmsnorm'"},
      {[](TransformerOptions& o) { o.mlp = "relu"; }, "mlp='relu' is not supported"},
      {[](TransformerOptions& o) {
         o.norm = "layernorm";
         o.qk_norm = true;
       },
       "qk_norm=True with norm='layernorm' is not supported"},
      {[](TransformerOptions& o) { o.attn_softcap = 0.0f; },
       "attn_softcap must be a finite positive float, got 0.0"},
      {[](TransformerOptions& o) { o.qkv_bias = true; },
       "q_proj.bias is required by the options passed and is missing from the weight dict", false},
      {[](TransformerOptions& o) { o.mlp = "gelu"; }, "gate_proj.weight is present but mlp='gelu' is ungated",
       false},
  };
  for (const Case& c : cases) {
    const std::string got = refusal(c.set, c.with_tensors);
    EXPECT_NE(got.find(c.message), std::string::npos) << got;
  }
  // A tensor present with its option off.
  TransformerOptions with_bias;
  with_bias.qkv_bias = true;
  testing::BlockWeights w = option_weights(shape, with_bias, 5);
  TransformerOptions plain;
  plain.n_heads = 2;
  plain.n_kv_heads = 1;
  EXPECT_NE(testing::value_error_of([&] {
              TransformerBlockInference block(w.named, plain);
            }).find("q_proj.bias is present in the weight dict but its option is off"),
            std::string::npos);
}

// max_positions: a smaller ceiling refuses earlier; a larger one with linear scaling admits a longer table.
TEST(TransformerOptions, MaxPositionsAndTheAngleDomain) {
  const BlockShape shape{32, 2, 1, 64, 0};
  TransformerOptions small;
  small.max_positions = 16;
  const TransformerBlockInference a = make(shape, small, 9);
  EXPECT_NE(testing::value_error_of([&] {
              (void)a.allocate_state(1, 17);
              auto s = a.allocate_state(1, 17);
              const std::vector<float> x = random_tokens(1, 1, 32, 1);
              (void)a.forward(TensorView{x.data(), {1, 1, 32}}, s);
            }).find("exceeds max_positions 16"),
            std::string::npos);
  TransformerOptions big;
  big.max_positions = 16384;
  big.rope_scaling = "linear";
  big.rope_factor = 2.0f;
  const TransformerBlockInference b = make(shape, big, 9);
  TransformerState state = b.allocate_state(1, 9000);
  const std::vector<float> x = random_tokens(1, 2, 32, 2);
  EXPECT_EQ(b.forward(TensorView{x.data(), {1, 2, 32}}, state).size(), 64u);
  TransformerOptions unscaled;
  unscaled.max_positions = 16384;
  const TransformerBlockInference c = make(shape, unscaled, 9);
  TransformerState too_far = c.allocate_state(1, 9000);
  EXPECT_NE(testing::value_error_of([&] {
              (void)c.forward(TensorView{x.data(), {1, 2, 32}}, too_far);
            }).find("sin/cos domain"),
            std::string::npos);
}

}  // namespace
}  // namespace samebits
