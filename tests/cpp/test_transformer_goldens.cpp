// Upstream-recorded digests of docs/goldens.md §4 / §4a for the transformer lanes on the hashed fixtures
// (the numpy "base" fixtures are checked by tests/python/test_transformer_goldens.py): the stateless
// forward, the same slab decoded token by token, and one decode step after a carried prefill.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "golden_fixtures.hpp"
#include "numerics/simd_target.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using testing::digest;
using testing::hashed_uniform;

// docs/goldens.md §3: w(shape, seed) = u * f32(1/4) + f32(-1/8), two roundings.
std::vector<float> golden_weight(std::size_t size, const std::string& seed) {
  std::vector<float> u = hashed_uniform(size, 1, seed);
  for (float& v : u) v = v * 0.25f + -0.125f;
  return u;
}

struct Lane {
  std::vector<std::vector<float>> values;
  TransformerBlockInference::NamedWeights named;
};

Lane transformer_lane(bool near_one) {
  blocks::TransformerDims d{32, 2, 1, 16, 64, 0};
  Lane lane;
  const auto tensors = blocks::transformer_tensors(d);
  for (const auto& t : tensors) {
    std::size_t n = 1;
    for (auto e : t.shape) n *= static_cast<std::size_t>(e);
    const bool norm = t.shape.size() == 1;
    if (norm && near_one) {
      std::vector<float> w = golden_weight(n, std::string("transformer:near_one:") + t.name);
      for (float& v : w) v = 1.0f + v;
      lane.values.push_back(w);
    } else if (norm) {
      lane.values.emplace_back(n, 1.0f);
    } else {
      lane.values.push_back(golden_weight(n, std::string("transformer:") + t.name));
    }
  }
  for (std::size_t i = 0; i < tensors.size(); ++i)
    lane.named.push_back({tensors[i].name, {lane.values[i].data(), tensors[i].shape}});
  return lane;
}

TransformerBlockInference lane_block(bool near_one, std::int64_t window) {
  const Lane lane = transformer_lane(near_one);
  TransformerOptions options;
  options.n_heads = 2;
  options.n_kv_heads = 1;
  options.window = window;
  return TransformerBlockInference(lane.named, options);
}

// The (2, 16, 32) slab: the first 1024 floats of the hashed draw of `seed`.
std::vector<float> hashed_slab(int seed) {
  std::vector<float> draw = testing::hashed_draw(20000, 16, seed);
  draw.resize(1024);
  return draw;
}

TEST(TransformerGoldens, WeightAndSlabChecks) {
  const Lane near = transformer_lane(true);
  EXPECT_EQ(near.values[0][0], 0.9321880340576172f);  // docs/goldens.md §3 weight check
  EXPECT_EQ(near.values[0][1], 1.076145052909851f);
  EXPECT_EQ(digest(hashed_slab(1), {2, 16, 32}), "803a93350f7ea51b");
  EXPECT_EQ(digest(hashed_slab(0), {2, 16, 32}), "c27efc5113530683");
}

struct ForwardGolden {
  bool near_one;
  std::int64_t window;
  const char* hashed;
};

TEST(TransformerGoldens, HeldOutForwardAndTokenByTokenDecode) {
  const std::vector<float> slab = hashed_slab(1);
  const TensorView x{slab.data(), {2, 16, 32}};
  for (const ForwardGolden& g :
       {ForwardGolden{false, 0, "33aa6df81aac0bcd"}, ForwardGolden{true, 0, "0e628f9d48f2496e"},
        ForwardGolden{false, 8, "980b88a5ef026b11"}, ForwardGolden{true, 8, "2e437a2b86507bbb"}}) {
    const TransformerBlockInference block = lane_block(g.near_one, g.window);
    const std::string label =
        std::string(g.near_one ? "near" : "ones") + " window " + std::to_string(g.window);
    for (simd::Target target : simd::available_targets()) {
      simd::set_target(target);
      EXPECT_EQ(digest(block.forward(x), {2, 16, 32}), g.hashed) << label << " " << simd::target_name(target);
    }
    simd::reset_target();
    EXPECT_EQ(digest(block.forward_reference(x), {2, 16, 32}), g.hashed) << label << " twin";
    // Token by token from a fresh state: the same bytes, position by position.
    TransformerState state = block.allocate_state(2, 16);
    std::vector<float> decoded(slab.size());
    for (std::int64_t t = 0; t < 16; ++t) {
      std::vector<float> token;
      for (std::int64_t b = 0; b < 2; ++b)
        token.insert(token.end(), slab.begin() + (b * 16 + t) * 32, slab.begin() + (b * 16 + t + 1) * 32);
      const std::vector<float> y = block.step(TensorView{token.data(), {2, 1, 32}}, state);
      for (std::int64_t b = 0; b < 2; ++b)
        std::memcpy(decoded.data() + (b * 16 + t) * 32, y.data() + b * 32, 32 * sizeof(float));
    }
    EXPECT_EQ(digest(decoded, {2, 16, 32}), g.hashed) << label << " decoded token by token";
  }
}

TEST(TransformerGoldens, OneDecodeStepAfterACarriedPrefill) {
  // docs/goldens.md §4a: prefill the training slab into allocate_state(2, 32), then step token 0 again.
  const std::vector<float> slab = hashed_slab(0);
  const TransformerBlockInference block = lane_block(false, 0);
  TransformerState state = block.allocate_state(2, 32);
  block.forward(TensorView{slab.data(), {2, 16, 32}}, state);
  std::vector<float> token(slab.begin(), slab.begin() + 32);
  token.insert(token.end(), slab.begin() + 16 * 32, slab.begin() + 17 * 32);
  EXPECT_EQ(digest(block.step(TensorView{token.data(), {2, 1, 32}}, state), {2, 1, 32}), "24d0838231c0cad8");
  EXPECT_EQ(state.cached_tokens(), 17);
}

}  // namespace
}  // namespace samebits
