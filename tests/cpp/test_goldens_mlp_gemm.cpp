// Upstream-recorded digests (docs/goldens.md §2 and §5) for the hashed fixtures: the slabs, GEMM v1 and the
// MLP.
#include <gtest/gtest.h>

#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "golden_fixtures.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using testing::DigestPart;
using testing::golden_digest;

constexpr std::size_t kRows = 20000, kCols = 16;

const std::vector<float>& training_draw() {
  static const std::vector<float> draw = testing::hashed_draw(kRows, kCols, 0);
  return draw;
}
const std::vector<float>& held_out_draw() {
  static const std::vector<float> draw = testing::hashed_draw(kRows, kCols, 1);
  return draw;
}

TEST(Goldens, HashedSlabsMatchRecordedDigests) {
  EXPECT_EQ(golden_digest({{held_out_draw().data(), {2, 16, 32}}}), "803a93350f7ea51b");
  EXPECT_EQ(golden_digest({{training_draw().data(), {2, 16, 32}}}), "c27efc5113530683");
  EXPECT_EQ(fp::bits(held_out_draw()[0]), 0x3ea3bca8u);
  EXPECT_EQ(fp::bits(held_out_draw()[1]), 0x3ff9e1fau);
}

TEST(Goldens, GemmNNHashed) {
  // A = X[:256].T (16, 256) contiguous, B = X[:256] (256, 16): k = 256, two leaves and one fold.
  const auto& x = training_draw();
  std::vector<float> a(16 * 256), b(x.begin(), x.begin() + 256 * 16);
  for (int p = 0; p < 256; ++p)
    for (int i = 0; i < 16; ++i) a[i * 256 + p] = x[p * 16 + i];
  std::vector<float> want(16 * 16);
  gemm::gemm_reference(gemm::Orientation::NN, a.data(), b.data(), want.data(), 16, 16, 256);
  EXPECT_EQ(golden_digest({{want.data(), {16, 16}}}), "4863b43f7882649a");
  testing::for_each_target_and_threads([&](const std::string& where) {
    std::vector<float> got(16 * 16);
    gemm::gemm(gemm::Orientation::NN, a.data(), b.data(), got.data(), 16, 16, 256);
    EXPECT_EQ(golden_digest({{got.data(), {16, 16}}}), "4863b43f7882649a") << where;
    // The TN orientation on the original rows is the same product.
    gemm::gemm(gemm::Orientation::TN, b.data(), b.data(), got.data(), 16, 16, 256);
    EXPECT_EQ(golden_digest({{got.data(), {16, 16}}}), "4863b43f7882649a") << "TN " << where;
  });
}

TEST(Goldens, MlpHashed) {
  // Weights (arange(size) % 7 - 3) / 32 in float32; X = held-out draw [:256, :8].
  auto pattern = [](std::size_t size) {
    std::vector<float> v(size);
    for (std::size_t i = 0; i < size; ++i) v[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 32.0f;
    return v;
  };
  const auto w1 = pattern(128), b1 = pattern(16), w2 = pattern(48), b2 = pattern(3);
  const MLPInference model({w1.data(), {16, 8}}, {b1.data(), {16}}, {w2.data(), {3, 16}}, {b2.data(), {3}});
  std::vector<float> x(256 * 8);
  for (int r = 0; r < 256; ++r)
    for (int c = 0; c < 8; ++c) x[r * 8 + c] = held_out_draw()[r * 16 + c];
  const auto twin = model.predict_logits_reference({x.data(), {256, 8}});
  EXPECT_EQ(golden_digest({{twin.data(), {256, 3}}}), "cdb6dde10999c281");
  testing::for_each_target_and_threads([&](const std::string& where) {
    const auto fast = model.predict_logits({x.data(), {256, 8}});
    EXPECT_EQ(golden_digest({{fast.data(), {256, 3}}}), "cdb6dde10999c281") << where;
  });
}

}  // namespace
}  // namespace samebits
