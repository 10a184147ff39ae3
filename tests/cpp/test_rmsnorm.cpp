// RMSNorm and embedding: hand-checked values, and fast paths equal to the scalar twins bit for bit.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/rmsnorm.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using testing::for_each_target_and_threads;
using testing::Rng;

TEST(RmsNorm, HandCheckedValues) {
  // x = 2 everywhere, d = 4: sum of squares 16, mean 4, rsqrt(4) = 0.5 exactly, so y = w * (2 * 0.5) = w.
  std::vector<float> x(4, 2.0f), w{1.0f, -3.0f, 0.25f, 7.0f}, y(4);
  rmsnorm::rmsnorm_reference(x.data(), w.data(), y.data(), 1, 4, 0.0f);
  EXPECT_EQ(y, w);
  // A zero row with eps 1e-5: rstd = rsqrt(1e-5) finite, y = w * 0 = +0 or -0 by the signs of w and x.
  std::vector<float> z{0.0f, -0.0f}, wz{1.0f, 1.0f}, yz(2);
  rmsnorm::rmsnorm_reference(z.data(), wz.data(), yz.data(), 1, 2, 1e-5f);
  EXPECT_EQ(fp::bits(yz[0]), 0x00000000u);
  EXPECT_EQ(fp::bits(yz[1]), 0x80000000u);  // x first, then the weight: -0 * rstd = -0, 1 * -0 = -0
}

TEST(RmsNorm, FastEqualsTwinOverSizes) {
  Rng rng(5);
  const int rows_list[] = {1, 2, 3, 7, 8, 15, 16, 17, 33, 100};
  const int widths[] = {1, 2, 7, 16, 31, 32, 33, 64, 129, 256, 1000};
  for (int rows : rows_list) {
    for (int d : widths) {
      auto x = rng.uniform_vector(static_cast<std::size_t>(rows) * d, 3.0f);
      auto w = rng.uniform_vector(d, 2.0f);
      for (float eps : {1e-5f, 1e-6f}) {
        std::vector<float> want(x.size());
        rmsnorm::rmsnorm_reference(x.data(), w.data(), want.data(), rows, d, eps);
        for_each_target_and_threads([&](const std::string& where) {
          std::vector<float> got(x.size(), -1.0f);
          rmsnorm::rmsnorm(x.data(), w.data(), got.data(), rows, d, eps);
          ASSERT_EQ(testing::first_difference(want.data(), got.data(), rows * d), -1)
              << "rows=" << rows << " d=" << d << " " << where;
          std::vector<float> in_place = x;  // y may alias x
          rmsnorm::rmsnorm(in_place.data(), w.data(), in_place.data(), rows, d, eps);
          ASSERT_EQ(testing::first_difference(want.data(), in_place.data(), rows * d), -1)
              << "aliased " << where;
        });
      }
    }
  }
}

TEST(RmsNorm, FastEqualsTwinWithSubnormalsAndTinyRows) {
  Rng rng(9);
  const int rows = 37, d = 45;
  std::vector<float> x(rows * d), w(d);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint64_t r = rng.next();
    if (i / d % 3 == 0)
      x[i] = fp::from_bits(static_cast<std::uint32_t>(r & 0x807FFFFFu));  // subnormals of both signs
    else if (i / d % 3 == 1)
      x[i] = rng.uniform() * 1e-19f;  // squares near FLT_MIN
    else
      x[i] = rng.uniform();
  }
  for (auto& v : w) v = (rng.next() % 4 == 0) ? fp::from_bits(0x00000005u) : rng.uniform() * 1e-30f;
  std::vector<float> want(x.size());
  rmsnorm::rmsnorm_reference(x.data(), w.data(), want.data(), rows, d, 1e-5f);
  for_each_target_and_threads([&](const std::string& where) {
    std::vector<float> got(x.size());
    rmsnorm::rmsnorm(x.data(), w.data(), got.data(), rows, d, 1e-5f);
    ASSERT_EQ(testing::first_difference(want.data(), got.data(), rows * d), -1) << where;
  });
}

// Rows whose sum of squares crosses FLT_MIN part way (the fast chains drop their flushes from there on)
// and then meets subnormals, zeros, squares near FLT_MIN, infinities or NaN: lone rows and full blocks.
// The rows stay tiny and eps is 0, so that a flush done or skipped in the wrong place shows in the output
// (with eps = 1e-5 a sum this small would vanish in mean + eps).
TEST(RmsNorm, FlushesStopOnlyOnceTheSumIsNormal) {
  Rng rng(21);
  const int d = 70;
  for (int rows : {1, 3, 16, 35}) {
    std::vector<float> x(static_cast<std::size_t>(rows) * d);
    for (int r = 0; r < rows; ++r) {
      const int cross = 1 + (r * 7) % (d - 2);  // the first index whose square is normal-sized
      for (int j = 0; j < d; ++j) {
        float& v = x[static_cast<std::size_t>(r) * d + j];
        const std::uint64_t pick = rng.next();
        if (j < cross)
          v = pick % 3 == 0 ? fp::from_bits(static_cast<std::uint32_t>(pick >> 8) & 0x807FFFFFu)
                            : rng.uniform() * 3e-20f;  // squares below and near FLT_MIN
        else if (j == cross)
          v = 1.5e-19f + rng.uniform() * 1e-20f;  // the sum reaches FLT_MIN here or soon after
        else
          switch (pick % 5) {
            case 0:
              v = fp::from_bits(static_cast<std::uint32_t>(pick >> 8) & 0x807FFFFFu);
              break;
            case 1:
              v = (pick >> 8) & 1 ? 0.0f : -0.0f;
              break;
            case 2:
              v = rng.uniform() * 1e-19f;
              break;
            default:
              v = rng.uniform() * 1e-18f;
          }
      }
      if (r % 11 == 5) x[static_cast<std::size_t>(r) * d + d - 3] = std::numeric_limits<float>::infinity();
      if (r % 13 == 7)
        x[static_cast<std::size_t>(r) * d + cross + 1] = std::numeric_limits<float>::quiet_NaN();
    }
    const auto w = rng.uniform_vector(d, 2.0f);
    std::vector<float> want(x.size());
    rmsnorm::rmsnorm_reference(x.data(), w.data(), want.data(), rows, d, 0.0f);
    for_each_target_and_threads([&](const std::string& where) {
      std::vector<float> got(x.size(), -1.0f);
      rmsnorm::rmsnorm(x.data(), w.data(), got.data(), rows, d, 0.0f);
      ASSERT_EQ(testing::first_difference(want.data(), got.data(), rows * d), -1)
          << "rows=" << rows << " " << where;
    });
  }
}

TEST(Embedding, GatherFlushesAndEqualsTwin) {
  Rng rng(1);
  const int vocab = 50, d = 37;
  auto table = rng.uniform_vector(vocab * d);
  table[3 * d + 4] = fp::from_bits(0x80000001u);  // a negative subnormal becomes -0.0
  std::vector<std::int32_t> ids;
  for (int t = 0; t < 301; ++t) ids.push_back(static_cast<std::int32_t>(rng.next() % vocab));
  ids[7] = 3;
  std::vector<float> want(ids.size() * d);
  rmsnorm::embedding_reference(table.data(), d, ids.data(), static_cast<std::int64_t>(ids.size()),
                               want.data());
  EXPECT_EQ(fp::bits(want[7 * d + 4]), 0x80000000u);
  for_each_target_and_threads([&](const std::string& where) {
    std::vector<float> got(want.size());
    rmsnorm::embedding(table.data(), d, ids.data(), static_cast<std::int64_t>(ids.size()), got.data());
    ASSERT_EQ(testing::first_difference(want.data(), got.data(), static_cast<std::int64_t>(want.size())), -1)
        << where;
  });
}

}  // namespace
}  // namespace samebits
