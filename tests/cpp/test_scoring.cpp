// Token scoring (include/samebits/scoring.hpp): equal, bit for bit, to the scalar formula with the engine's
// expf and logf (what `samebits eval` computed before), on every thread count; out-of-range targets refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <samebits/sampler.hpp>
#include <samebits/scoring.hpp>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.hpp"
#include "numerics/primitives.hpp"

namespace samebits {
namespace {

double scalar_nll(const float* logits, std::int64_t vocab, std::int32_t target) {
  float top = logits[0];
  for (std::int64_t u = 1; u < vocab; ++u) top = std::max(top, logits[u]);
  double total = 0.0;
  for (std::int64_t u = 0; u < vocab; ++u) total += primitives::expf(logits[u] - top);
  return static_cast<double>(top) - logits[target] + primitives::logf(static_cast<float>(total));
}

std::uint64_t bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}

TEST(Scoring, EqualsTheScalarFormulaOnEveryThreadCount) {
  const std::int64_t rows = 300, vocab = 257;
  SplitMix64 random(3);
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
  for (float& l : logits) l = static_cast<float>(random.uniform() * 40.0 - 20.0);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (auto& t : targets) t = static_cast<std::int32_t>(random.next() % static_cast<std::uint64_t>(vocab));
  const int saved = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const std::vector<double> got = token_nlls(logits.data(), rows, vocab, targets.data());
    ASSERT_EQ(got.size(), static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      const double want = scalar_nll(logits.data() + r * vocab, vocab, targets[static_cast<std::size_t>(r)]);
      ASSERT_EQ(bits(got[static_cast<std::size_t>(r)]), bits(want)) << "row " << r << ", threads " << threads;
      ASSERT_EQ(bits(token_nll(logits.data() + r * vocab, vocab, targets[static_cast<std::size_t>(r)])),
                bits(want));
    }
  }
  set_num_threads(saved);
}

TEST(Scoring, AUniformRowScoresLogVocab) {
  const std::vector<float> flat(256, 1.5f);
  EXPECT_NEAR(token_nll(flat.data(), 256, 7), std::log(256.0), 1e-6);
}

TEST(Scoring, RefusesATargetOutsideTheVocabulary) {
  const std::vector<float> row(4, 0.0f);
  EXPECT_THROW(token_nll(row.data(), 4, 4), std::runtime_error);
  EXPECT_THROW(token_nll(row.data(), 4, -1), std::runtime_error);
  const std::int32_t targets[2] = {1, 9};
  const std::vector<float> two(8, 0.0f);
  EXPECT_THROW(token_nlls(two.data(), 2, 4, targets), std::runtime_error);
}

}  // namespace
}  // namespace samebits
