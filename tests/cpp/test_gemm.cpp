// GEMM profile v1: the fast paths equal the scalar twin bit for bit, and the twin follows the leaf/fold
// rules.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using gemm::Orientation;
using testing::for_each_target_and_threads;
using testing::Rng;

const Orientation kOrientations[] = {Orientation::NT, Orientation::NN, Orientation::TN};
const char* name_of(Orientation o) {
  return o == Orientation::NT ? "NT" : o == Orientation::NN ? "NN" : "TN";
}

TEST(GemmLeaves, LeafLengthFollowsTheProfile) {
  EXPECT_EQ(gemm::leaf_length(0), 0);
  EXPECT_EQ(gemm::leaf_length(-3), 0);
  EXPECT_EQ(gemm::leaf_length(1), 1);
  EXPECT_EQ(gemm::leaf_length(128), 128);
  EXPECT_EQ(gemm::leaf_length(129), 128);
  EXPECT_EQ(gemm::leaf_length(131072), 128);  // ceil(k/128) = 1024 still uses 128
  EXPECT_EQ(gemm::leaf_length(131073), 129);  // ceil(k/128) = 1025 > 1024 -> ceil(k/1024)
  EXPECT_EQ(gemm::leaf_length(1 << 20), 1024);
}

TEST(GemmFold, BalancedPairsWithOddCarry) {
  // Three partials fold as ((l0 + l1) + l2): 1e8 + -1e8 = 0, then + 1 = 1.
  // The other association l0 + (l1 + l2) would give 1e8 + -1e8 = 0 since -1e8 + 1 rounds to -1e8.
  std::vector<float> three{1e8f, -1e8f, 1.0f};
  EXPECT_EQ(gemm::fold_partials(three.data(), 3), 1.0f);
  // Five partials: ((l0+l1)+(l2+l3))+l4.
  std::vector<float> five{1e8f, 1.0f, -1e8f, 1.0f, 0.5f};
  // (1e8+1) = 1e8; (-1e8+1) = -1e8 (1 is below half an ulp of 1e8); sum 0; + 0.5 = 0.5.
  EXPECT_EQ(gemm::fold_partials(five.data(), 5), 0.5f);
  // One partial: returned flushed without any add, so -0.0 stays -0.0.
  std::vector<float> one{-0.0f};
  EXPECT_EQ(fp::bits(gemm::fold_partials(one.data(), 1)), 0x80000000u);
}

TEST(GemmTwin, ThreeLeavesFoldLeftPairsFirst) {
  // k = 384: A = ones, B column chosen so the leaf partials are 1e8, -1e8 and 1.
  const int k = 384;
  std::vector<float> a(k, 1.0f), b(k, 0.0f), c(1);
  b[0] = 1e8f;
  b[128] = -1e8f;
  b[256] = 1.0f;
  gemm::gemm_reference(Orientation::NT, a.data(), b.data(), c.data(), 1, 1, k);
  EXPECT_EQ(c[0], 1.0f);
  // A single serial chain over all 384 would also give 1 here, so check a case where it differs:
  // leaf 0 = 1e8 + 1 (rounds to 1e8), leaf 1 = -1e8, leaf 2 = 0 -> (1e8 + -1e8) + 0 = 0.
  std::fill(b.begin(), b.end(), 0.0f);
  b[0] = 1e8f;
  b[1] = 1.0f;
  b[128] = -1e8f;
  gemm::gemm_reference(Orientation::NT, a.data(), b.data(), c.data(), 1, 1, k);
  EXPECT_EQ(c[0], 0.0f);
}

TEST(GemmTwin, EmptyDepthGivesPositiveZero) {
  std::vector<float> c(6, 7.0f);
  gemm::gemm_reference(Orientation::NT, nullptr, nullptr, c.data(), 2, 3, 0);
  for (float v : c) EXPECT_EQ(fp::bits(v), 0u);
  std::vector<float> d(6, 7.0f);
  gemm::gemm(Orientation::NN, nullptr, nullptr, d.data(), 2, 3, 0);
  for (float v : d) EXPECT_EQ(fp::bits(v), 0u);
}

TEST(GemmTwin, NegativeZeroChainStartsFromPositiveZero) {
  // k = 1: acc = F(FMA(-1, +0, +0)) = +0 (the +0 seed absorbs the -0 product).
  std::vector<float> a{-1.0f}, b{0.0f}, c(1);
  gemm::gemm_reference(Orientation::NT, a.data(), b.data(), c.data(), 1, 1, 1);
  EXPECT_EQ(fp::bits(c[0]), 0u);
}

// The fast GEMM on every target and thread count gives the twin's bits for a (m, k) x (n, k) product in
// orientation o; `what` names the case in a failure.
void expect_fast_equals_twin(Orientation o, const std::vector<float>& a, const std::vector<float>& b, int m,
                             int n, int k, const std::string& what) {
  std::vector<float> want(static_cast<std::size_t>(m) * n);
  gemm::gemm_reference(o, a.data(), b.data(), want.data(), m, n, k);
  for_each_target_and_threads([&](const std::string& where) {
    std::vector<float> got(want.size(), -1.0f);
    gemm::gemm(o, a.data(), b.data(), got.data(), m, n, k);
    ASSERT_EQ(testing::first_difference(want.data(), got.data(), m * n), -1)
        << name_of(o) << " " << what << " " << where;
  });
}

// Fast path == twin over the size sweep of the issue, every orientation, target and thread count.
TEST(GemmFast, EqualsTwinOverSizeSweep) {
  const int sizes[] = {1, 2, 3, 7, 16, 33, 100};
  const int depths[] = {1, 2, 127, 128, 129, 255, 256, 257, 1000, 1025};
  Rng rng(42);
  for (Orientation o : kOrientations) {
    for (int k : depths) {
      for (int m : sizes) {
        for (int n : sizes) {
          auto a = rng.uniform_vector(static_cast<std::size_t>(m) * k);
          auto b = rng.uniform_vector(static_cast<std::size_t>(n) * k);
          expect_fast_equals_twin(
              o, a, b, m, n, k,
              "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
        }
      }
    }
  }
}

// Every row count up to two of the tallest register tiles plus one, so each target's float32 tile and
// narrow tile meets every remainder (a last tile of 1 .. tile rows - 1 rows), with a ragged last panel,
// one leaf and several.
TEST(GemmFast, EqualsTwinForEveryTileRemainder) {
  Rng rng(23);
  for (int k : {5, 129, 300}) {
    for (int m = 1; m <= 25; ++m) {
      const int n = 33 + (m % 3) * 32;
      auto a = rng.uniform_vector(static_cast<std::size_t>(m) * k);
      auto b = rng.uniform_vector(static_cast<std::size_t>(n) * k);
      expect_fast_equals_twin(
          Orientation::NT, a, b, m, n, k,
          "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
    }
  }
}

// Leaf counts whose fold carries odd nodes up at different levels (5, 6, 7, 11, 13 leaves, SmolLM2's depths
// among them) through a tall tile and its one-row remainder: the fast fold must add what the twin's tree
// adds.
TEST(GemmFast, EqualsTwinAcrossFoldShapes) {
  Rng rng(29);
  for (int k : {576, 700, 896, 1300, 1664}) {
    const int m = 13, n = 33;
    auto a = rng.uniform_vector(static_cast<std::size_t>(m) * k);
    auto b = rng.uniform_vector(static_cast<std::size_t>(n) * k);
    expect_fast_equals_twin(Orientation::NT, a, b, m, n, k, "k=" + std::to_string(k));
  }
}

// Operands and intermediate results near and below FLT_MIN: every flush seam must act as in the twin
// (row counts up to 25, so every tile height and remainder runs its flushing kernel),
// including the fast kernels' fallback when a skipped flush would have mattered.
TEST(GemmFast, EqualsTwinWithPlantedSubnormals) {
  Rng rng(7);
  const float tiny = fp::flt_min();
  for (int trial = 0; trial < 40; ++trial) {
    const int m = 1 + trial % 25, n = 1 + (trial * 7) % 40,
              k = (trial % 4 == 0) ? 300 : 1 + (trial * 13) % 140;
    std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(n) * k);
    for (auto& x : a) {
      std::uint64_t r = rng.next();
      switch (r % 5) {
        case 0:  // a subnormal operand
          x = fp::from_bits(static_cast<std::uint32_t>((r >> 8) & 0x007FFFFF) |
                            ((r >> 40) & 1 ? 0x80000000u : 0));
          break;
        case 1:  // products near FLT_MIN: 2^-63 * 2^-63 scale
          x = rng.uniform() * 1.0842022e-19f;
          break;
        default:
          x = rng.uniform() * 1.0842022e-19f * (1 + static_cast<float>(r % 3));
      }
    }
    for (auto& x : b) x = (rng.next() % 7 == 0) ? tiny * rng.uniform() : rng.uniform() * 1.0842022e-19f;
    for (Orientation o : kOrientations)
      expect_fast_equals_twin(o, a, b, m, n, k, "trial=" + std::to_string(trial));
  }
}

// Exact cancellation to a subnormal: an intermediate accumulator that is an exact subnormal must be
// flushed before the next FMA uses it (its use raises DE in the fast kernels, forcing the exact rerun).
TEST(GemmFast, ExactSubnormalIntermediateIsFlushed) {
  const float a0 = fp::from_bits(0x00C00000);  // 1.5 * FLT_MIN, normal
  const float a1 = -fp::flt_min();             // a0 + a1 = 0.5 * FLT_MIN exactly: a subnormal
  std::vector<float> a{a0, a1, fp::flt_min()}, b{1.0f, 1.0f, 1.0f};
  std::vector<float> want(1);
  gemm::gemm_reference(Orientation::NT, a.data(), b.data(), want.data(), 1, 1, 3);
  // Flushed to +0 after step 2, then +0 + FLT_MIN = FLT_MIN (unflushed it would be 1.5 * FLT_MIN).
  EXPECT_EQ(fp::bits(want[0]), 0x00800000u);
  for_each_target_and_threads([&](const std::string& where) {
    std::vector<float> got(1, -1.0f);
    gemm::gemm(Orientation::NT, a.data(), b.data(), got.data(), 1, 1, 3);
    EXPECT_EQ(fp::bits(got[0]), fp::bits(want[0])) << where;
  });
}

TEST(GemmFast, RowAloneEqualsRowInBatch) {
  Rng rng(3);
  const int m = 37, n = 70, k = 300;
  auto a = rng.uniform_vector(m * k);
  auto w = rng.uniform_vector(n * k);
  const auto packed = gemm::PackedRhs::from_transposed(w.data(), n, k);
  std::vector<float> all(m * n);
  gemm::gemm_packed({a.data(), k, 1}, m, packed, all.data());
  for (int i = 0; i < m; ++i) {
    std::vector<float> one(n);
    gemm::gemm_packed({a.data() + i * k, k, 1}, 1, packed, one.data());
    ASSERT_EQ(testing::first_difference(one.data(), all.data() + i * n, n), -1) << "row " << i;
  }
}

// A task's own panels: those columns equal the whole product's, the others are left untouched, for row
// counts around the skinny and register tiles, ragged last panels, and depths across the leaf seams.
TEST(GemmFast, PanelRangeEqualsWholeProduct) {
  Rng rng(19);
  const int rows[] = {1, 2, 5, 9, 33};
  const int widths[] = {1, 31, 32, 70, 129};
  const int depths[] = {0, 1, 48, 128, 129, 300};
  for (int k : depths) {
    for (int n : widths) {
      auto w = rng.uniform_vector(static_cast<std::size_t>(n) * k);
      const auto packed = gemm::PackedRhs::from_transposed(w.data(), n, k);
      for (int m : rows) {
        auto a = rng.uniform_vector(static_cast<std::size_t>(m) * k);
        std::vector<float> want(static_cast<std::size_t>(m) * n);
        gemm::gemm_reference(Orientation::NT, a.data(), w.data(), want.data(), m, n, k);
        for_each_target_and_threads([&](const std::string& where) {
          for (std::int64_t first = 0; first < packed.panel_count(); ++first) {
            for (std::int64_t count = 1; first + count <= packed.panel_count() + 1; ++count) {
              std::vector<float> got(want.size(), -1.0f);
              gemm::gemm_packed_panels({a.data(), k, 1}, m, packed, first, count, got.data());
              for (int i = 0; i < m; ++i) {
                for (int j = 0; j < n; ++j) {
                  const bool owned =
                      j >= first * gemm::kPanelWidth && j < (first + count) * gemm::kPanelWidth;
                  const float expected = owned ? want[i * n + j] : -1.0f;
                  ASSERT_EQ(fp::bits(got[i * n + j]), fp::bits(expected))
                      << "m=" << m << " n=" << n << " k=" << k << " panels " << first << "+" << count
                      << " cell (" << i << ", " << j << ") " << where;
                }
              }
            }
          }
        });
      }
    }
  }
}

TEST(GemmFast, LargeDepthUsesWideLeaves) {
  Rng rng(11);
  const int k = 131073, m = 2, n = 3;  // leaf 129, 1017 leaves
  auto a = rng.uniform_vector(static_cast<std::size_t>(m) * k);
  auto b = rng.uniform_vector(static_cast<std::size_t>(n) * k);
  std::vector<float> want(m * n);
  gemm::gemm_reference(Orientation::NT, a.data(), b.data(), want.data(), m, n, k);
  for_each_target_and_threads([&](const std::string& where) {
    std::vector<float> got(m * n);
    gemm::gemm(Orientation::NT, a.data(), b.data(), got.data(), m, n, k);
    ASSERT_EQ(testing::first_difference(want.data(), got.data(), m * n), -1) << where;
  });
}

}  // namespace
}  // namespace samebits
