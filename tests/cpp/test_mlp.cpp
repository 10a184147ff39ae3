// MLPInference through the C++ API: bits equal the twin on every target and thread count, rows are
// independent, weights are copied, and every refusal names its input with upstream's wording.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "numerics/fp.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using testing::Rng;
using testing::value_error_of;

struct Weights {
  std::vector<float> w1, b1, w2, b2;
  explicit Weights(std::uint64_t seed) {
    Rng rng(seed);
    w1 = rng.uniform_vector(128, 0.5f);
    b1 = rng.uniform_vector(16, 0.1f);
    w2 = rng.uniform_vector(48, 0.5f);
    b2 = rng.uniform_vector(3, 0.1f);
  }
  MLPInference build() const {
    return MLPInference({w1.data(), {16, 8}}, {b1.data(), {16}}, {w2.data(), {3, 16}}, {b2.data(), {3}});
  }
};

TEST(Mlp, FastEqualsTwinOnEveryTargetAndThreadCount) {
  const Weights w(1);
  const MLPInference model = w.build();
  Rng rng(2);
  for (int rows : {1, 2, 3, 7, 64, 255, 256}) {
    const auto x = rng.uniform_vector(static_cast<std::size_t>(rows) * 8, 3.0f);
    const auto want = model.predict_logits_reference({x.data(), {rows, 8}});
    testing::for_each_target_and_threads([&](const std::string& where) {
      const auto got = model.predict_logits({x.data(), {rows, 8}});
      ASSERT_TRUE(testing::same_bits(want, got)) << "rows=" << rows << " " << where;
    });
  }
}

TEST(Mlp, ZeroProductsAndNegativeZeroBiasesGivePositiveZero) {
  // GEMM chains start at +0.0, so zero weights give +0 projections; +0 + -0 = +0 in both bias adds.
  std::vector<float> w1(128, 0.0f), b1(16, -0.0f), w2(48, 0.0f), b2(3, -0.0f);
  const MLPInference model({w1.data(), {16, 8}}, {b1.data(), {16}}, {w2.data(), {3, 16}}, {b2.data(), {3}});
  std::vector<float> x(8, 1.0f);
  for (float v : model.predict_logits({x.data(), {1, 8}})) EXPECT_EQ(fp::bits(v), 0u);
}

TEST(Mlp, RowAloneEqualsRowInBatch) {
  const MLPInference model = Weights(3).build();
  Rng rng(4);
  const auto x = rng.uniform_vector(256 * 8, 2.0f);
  const auto all = model.predict_logits({x.data(), {256, 8}});
  for (int r : {0, 1, 7, 63, 128, 255}) {
    const auto one = model.predict_logits({x.data() + r * 8, {1, 8}});
    ASSERT_EQ(testing::first_difference(one.data(), all.data() + r * 3, 3), -1) << "row " << r;
  }
  const auto slice = model.predict_logits({x.data() + 8, {7, 8}});
  ASSERT_EQ(testing::first_difference(slice.data(), all.data() + 3, 21), -1);
}

TEST(Mlp, WeightsAreCopiedAtConstruction) {
  Weights w(5);
  const MLPInference model = w.build();
  std::vector<float> x(8, 0.5f);
  const auto before = model.predict_logits({x.data(), {1, 8}});
  w.w1[0] += 1.0f;
  w.b2[2] = 100.0f;
  EXPECT_TRUE(testing::same_bits(before, model.predict_logits({x.data(), {1, 8}})));
  EXPECT_EQ(model.repr(), "MLPInference(architecture=[8, 16, 3])");
  EXPECT_EQ(model.weight_format(), "float32");
}

TEST(Mlp, PackedWeightsEqualTheirMaterializedFloat32) {
  const Weights w(8);
  Rng rng(9);
  const auto x = rng.uniform_vector(100 * 8, 2.0f);
  for (auto format : {lowbit::WeightFormat::BFloat16, lowbit::WeightFormat::Int8}) {
    const auto p1 = lowbit::pack_matrix(w.w1.data(), 16, 8, format);
    const auto p2 = lowbit::pack_matrix(w.w2.data(), 3, 16, format);
    const MLPInference packed(p1, {w.b1.data(), {16}}, p2, {w.b2.data(), {3}});
    EXPECT_EQ(packed.weight_format(), lowbit::format_name(format));
    const auto m1 = lowbit::materialize(p1), m2 = lowbit::materialize(p2);
    const MLPInference plain({m1.data(), {16, 8}}, {w.b1.data(), {16}}, {m2.data(), {3, 16}},
                             {w.b2.data(), {3}});
    EXPECT_TRUE(testing::same_bits(packed.predict_logits({x.data(), {100, 8}}),
                                   plain.predict_logits({x.data(), {100, 8}})));
    EXPECT_FALSE(testing::same_bits(packed.predict_logits({x.data(), {100, 8}}),
                                    w.build().predict_logits({x.data(), {100, 8}})));
  }
  const auto a = lowbit::pack_matrix(w.w1.data(), 16, 8, lowbit::WeightFormat::Int8);
  const auto b = lowbit::pack_matrix(w.w2.data(), 3, 16, lowbit::WeightFormat::BFloat16);
  EXPECT_EQ(value_error_of([&] {
              MLPInference(a, {w.b1.data(), {16}}, b, {w.b2.data(), {3}});
            }),
            "samebits.lowbit: weights mix formats ['int8', 'bfloat16']; store a model one way");
}

TEST(Mlp, RefusesBadWeightsWithUpstreamWording) {
  Weights w(6);
  EXPECT_EQ(
      value_error_of([&] {
        MLPInference({w.w1.data(), {8, 16}}, {w.b1.data(), {16}}, {w.w2.data(), {3, 16}}, {w.b2.data(), {3}});
      }),
      "SmallMLPTrainer weight1 must have shape (16, 8)");
  EXPECT_EQ(value_error_of([&] {
              MLPInference({w.w1.data(), {16, 8}}, {w.b1.data(), {1, 16}}, {w.w2.data(), {3, 16}},
                           {w.b2.data(), {3}});
            }),
            "SmallMLPTrainer bias1 must have shape (16,)");
  w.b1[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(value_error_of([&] { w.build(); }), "SmallMLPTrainer bias1 must be finite");
  w.b1[4] = 0.0f;
  w.w2[47] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(value_error_of([&] { w.build(); }), "SmallMLPTrainer weight2 must be finite");
}

TEST(Mlp, RefusesBadBatches) {
  const MLPInference model = Weights(7).build();
  std::vector<float> x(257 * 8, 0.25f);
  EXPECT_EQ(value_error_of([&] {
              model.predict_logits({x.data(), {4, 7}});
            }),
            "SmallMLPTrainer X must have shape (batch, 8)");
  EXPECT_EQ(value_error_of([&] {
              model.predict_logits({x.data(), {32}});
            }),
            "SmallMLPTrainer X must have shape (batch, 8)");
  EXPECT_EQ(value_error_of([&] {
              model.predict_logits({x.data(), {257, 8}});
            }),
            "SmallMLPTrainer batch must be in [1, 256]");
  EXPECT_EQ(value_error_of([&] {
              model.predict_logits({x.data(), {0, 8}});
            }),
            "SmallMLPTrainer batch must be in [1, 256]");
  x[13] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(value_error_of([&] {
              model.predict_logits({x.data(), {3, 8}});
            }),
            "SmallMLPTrainer X must be finite");
}

TEST(Mlp, OverflowingLogitsAreAnInvalidResult) {
  std::vector<float> w1(128, 3e38f), b1(16, 0.0f), w2(48, 3e38f), b2(3, 0.0f);
  const MLPInference model({w1.data(), {16, 8}}, {b1.data(), {16}}, {w2.data(), {3, 16}}, {b2.data(), {3}});
  std::vector<float> x(8, 1e30f);
  try {
    model.predict_logits({x.data(), {1, 8}});
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_STREQ(e.what(), "MLPInference returned an invalid result");
  }
}

}  // namespace
}  // namespace samebits
