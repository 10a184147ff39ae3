// The transformer options' kernels (docs/models.md §3, §6, §7, §9, §10): hand-checked values, and every fast
// path equal to its scalar twin bit for bit on every SIMD target and thread count, over size sweeps and the
// special values (NaN, infinities, signed zeros, subnormals, branch edges).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "numerics/block_ops.hpp"
#include "numerics/fp.hpp"
#include "numerics/rope.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using testing::first_difference;
using testing::for_each_target_and_threads;
using testing::Rng;

// Special values, the erf/erfc branch edges (|x| = 1, 2, the erfc underflow), GELU's useful range and
// random bit patterns of every exponent.
std::vector<float> activation_inputs() {
  std::vector<float> x{0.0f,
                       -0.0f,
                       1.0f,
                       -1.0f,
                       2.0f,
                       -2.0f,
                       0.5f,
                       -0.5f,
                       9.4f,
                       -9.4f,
                       13.3f,
                       -13.3f,
                       1e-20f,
                       -1e-20f,
                       1e30f,
                       -1e30f,
                       fp::from_bits(0x7F800000u),
                       fp::from_bits(0xFF800000u),
                       fp::quiet_nan(),
                       fp::from_bits(0x7FA00001u),
                       fp::from_bits(0x00000001u),
                       fp::from_bits(0x807FFFFFu),
                       fp::from_bits(0x3F800001u),
                       fp::from_bits(0x3F7FFFFFu),
                       fp::from_bits(0x3FB504F3u),
                       fp::from_bits(0xBFB504F3u),
                       fp::from_bits(0x40000001u)};
  for (float v = -12.0f; v <= 12.0f; v += 0.0625f) x.push_back(v);
  Rng rng(71);
  for (int i = 0; i < 4000; ++i) x.push_back(fp::from_bits(static_cast<std::uint32_t>(rng.next())));
  for (int i = 0; i < 2000; ++i) x.push_back(rng.uniform() * 8.0f);
  return x;
}

TEST(BlockOps, ErfHandValues) {
  EXPECT_EQ(fp::bits(block_ops::erff(0.0f)), 0u);
  EXPECT_EQ(fp::bits(block_ops::erff(-0.0f)), 0x80000000u);
  EXPECT_EQ(block_ops::erff(fp::from_bits(0x7F800000u)), 1.0f);
  EXPECT_EQ(block_ops::erff(fp::from_bits(0xFF800000u)), -1.0f);
  EXPECT_TRUE(fp::is_nan(block_ops::erff(fp::quiet_nan())));
  // A Cephes float erf: within a few ulps of the double one everywhere on a sweep.
  for (float v = -6.0f; v <= 6.0f; v += 0.01f)
    EXPECT_NEAR(block_ops::erff(v), std::erf(static_cast<double>(v)), 4e-7) << v;
  for (float v = -6.0f; v <= 6.0f; v += 0.01f) {
    const double x = v;
    EXPECT_NEAR(block_ops::gelu_erf(v), 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))), 2e-6) << v;
    const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    EXPECT_NEAR(block_ops::gelu_tanh(v), 0.5 * x * (1.0 + std::tanh(inner)), 2e-6) << v;
  }
}

TEST(BlockOps, GeluFastEqualsTwinEveryTarget) {
  const std::vector<float> x = activation_inputs();
  using ArrayFn = void (*)(const float*, float*, std::size_t);
  struct Pair {
    ArrayFn fast, twin;
    const char* name;
  };
  for (const Pair& pair : {Pair{&block_ops::gelu_erf, &block_ops::gelu_erf_reference, "gelu_erf"},
                           Pair{&block_ops::gelu_tanh, &block_ops::gelu_tanh_reference, "gelu_tanh"}}) {
    const ArrayFn fast = pair.fast, twin = pair.twin;
    const char* name = pair.name;
    std::vector<float> want(x.size());
    twin(x.data(), want.data(), x.size());
    for_each_target_and_threads([&](const std::string& where) {
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{17},
                            std::size_t{33}, x.size()}) {
        std::vector<float> got(n, -3.0f);
        fast(x.data(), got.data(), n);
        ASSERT_EQ(first_difference(want.data(), got.data(), static_cast<std::int64_t>(n)), -1)
            << name << " n " << n << " " << where;
      }
      std::vector<float> in_place = x;
      fast(in_place.data(), in_place.data(), x.size());
      ASSERT_EQ(first_difference(want.data(), in_place.data(), static_cast<std::int64_t>(x.size())), -1)
          << name << " in place " << where;
    });
  }
}

TEST(BlockOps, BiasAndSoftcapFastEqualTwinEveryTarget) {
  Rng rng(72);
  const std::vector<float> special = activation_inputs();
  for (std::size_t n : {1, 3, 8, 15, 16, 31, 64, 100, 1000}) {
    std::vector<float> y(n), b(n);
    for (std::size_t i = 0; i < n; ++i) {
      y[i] = i % 5 == 0 ? special[(i * 7) % special.size()] : rng.uniform() * 4.0f;
      b[i] = i % 7 == 0 ? fp::from_bits(0x80000003u) : rng.uniform();
    }
    std::vector<float> want_bias = y;
    block_ops::bias_add_reference(want_bias.data(), b.data(), n);
    for (float cap : {0.5f, 30.0f, 50.0f, 1e-30f, 3e38f}) {
      std::vector<float> want_cap = y;
      block_ops::softcap_reference(want_cap.data(), n, cap);
      for_each_target_and_threads([&](const std::string& where) {
        std::vector<float> got = y;
        block_ops::bias_add(got.data(), b.data(), n);
        ASSERT_EQ(first_difference(want_bias.data(), got.data(), static_cast<std::int64_t>(n)), -1)
            << "bias n " << n << " " << where;
        got = y;
        block_ops::softcap(got.data(), n, cap);
        ASSERT_EQ(first_difference(want_cap.data(), got.data(), static_cast<std::int64_t>(n)), -1)
            << "softcap " << cap << " n " << n << " " << where;
      });
    }
  }
  // Plain add after the product: -0 + +0 = +0, the bias's subnormal flushed first.
  std::vector<float> y{-0.0f, 1.0f}, b{0.0f, fp::from_bits(0x00000001u)};
  block_ops::bias_add_reference(y.data(), b.data(), 2);
  EXPECT_EQ(fp::bits(y[0]), 0u);
  EXPECT_EQ(y[1], 1.0f);
}

TEST(BlockOps, ResidualAddGatedProductAndSwigluFastEqualTwinEveryTarget) {
  Rng rng(74);
  const std::vector<float> special = activation_inputs();
  using Binary = void (*)(const float*, const float*, float*, std::size_t);
  const struct {
    const char* name;
    Binary twin, fast;
  } ops[] = {{"residual_add", block_ops::residual_add_reference, block_ops::residual_add},
             {"gated_product", block_ops::gated_product_reference, block_ops::gated_product},
             {"swiglu", block_ops::swiglu_reference, block_ops::swiglu}};
  for (std::size_t n : {1, 3, 8, 15, 16, 17, 31, 64, 100, 1000}) {
    std::vector<float> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = i % 5 == 0 ? special[(i * 7) % special.size()] : rng.uniform() * 4.0f;
      // Subnormal operands, and products that land in the subnormal range (flushed by the outer F).
      b[i] = i % 7 == 0 ? fp::from_bits(0x80000003u) : (i % 11 == 0 ? 1e-30f : rng.uniform() * 3.0f);
      if (i % 13 == 0) a[i] = 1e-10f;
    }
    for (const auto& op : ops) {
      std::vector<float> want(n);
      op.twin(a.data(), b.data(), want.data(), n);
      for_each_target_and_threads([&](const std::string& where) {
        std::vector<float> got(n, -1.0f);
        op.fast(a.data(), b.data(), got.data(), n);
        ASSERT_EQ(first_difference(want.data(), got.data(), static_cast<std::int64_t>(n)), -1)
            << op.name << " n " << n << " " << where;
        std::vector<float> in_place = b;  // out aliasing the second operand, as the block's tail does
        op.fast(a.data(), in_place.data(), in_place.data(), n);
        ASSERT_EQ(first_difference(want.data(), in_place.data(), static_cast<std::int64_t>(n)), -1)
            << op.name << " in place n " << n << " " << where;
      });
    }
  }
  // The twins' steps: F of each operand first, then F of the result.
  const float sub = fp::from_bits(0x00000005u);
  float out = 1.0f;
  block_ops::residual_add_reference(&sub, &sub, &out, 1);
  EXPECT_EQ(fp::bits(out), 0u);
  const float big = 1e-20f, small = 1e-20f;
  block_ops::gated_product_reference(&big, &small, &out, 1);  // 1e-40 is subnormal: flushed to +0
  EXPECT_EQ(fp::bits(out), 0u);
}

TEST(BlockOps, LayernormFastEqualsTwinOverSizes) {
  Rng rng(73);
  for (int rows : {1, 2, 7, 8, 9, 16, 17, 33}) {
    for (int d : {1, 2, 7, 16, 31, 32, 33, 64, 129, 300}) {
      std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(rows) * d, 3.0f);
      for (std::size_t i = 3; i < x.size(); i += 29) x[i] = fp::from_bits(0x80000011u);  // subnormals
      if (rows > 2)
        for (int j = 0; j < d; ++j) x[static_cast<std::size_t>(d + j)] = 0.25f;  // a constant row: var 0
      const std::vector<float> w = rng.uniform_vector(static_cast<std::size_t>(d), 2.0f);
      const std::vector<float> b = rng.uniform_vector(static_cast<std::size_t>(d), 0.5f);
      for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
        for (float eps : {1e-5f, 1e-6f}) {
          std::vector<float> want(x.size());
          block_ops::layernorm_reference(x.data(), w.data(), bias, want.data(), rows, d, eps);
          for_each_target_and_threads([&](const std::string& where) {
            std::vector<float> got(x.size(), -1.0f);
            block_ops::layernorm(x.data(), w.data(), bias, got.data(), rows, d, eps);
            ASSERT_EQ(first_difference(want.data(), got.data(), rows * d), -1)
                << "rows " << rows << " d " << d << " bias " << (bias != nullptr) << " " << where;
            std::vector<float> in_place = x;
            block_ops::layernorm(in_place.data(), w.data(), bias, in_place.data(), rows, d, eps);
            ASSERT_EQ(first_difference(want.data(), in_place.data(), rows * d), -1) << "aliased " << where;
          });
        }
      }
    }
  }
}

TEST(BlockOps, LayernormHandValues) {
  // x = (1, 3): mean 2, deviations -1, 1, var 1, rstd = rsqrt(1 + 0) = 1 with eps 0 -> y = w * dev + b.
  std::vector<float> x{1.0f, 3.0f}, w{2.0f, -0.5f}, b{0.25f, 0.0f}, y(2);
  block_ops::layernorm_reference(x.data(), w.data(), b.data(), y.data(), 1, 2, 0.0f);
  EXPECT_EQ(y[0], -1.75f);
  EXPECT_EQ(y[1], -0.5f);
}

TEST(RopeScaling, LinearAtOneIsTheDefaultAndLlama3FollowsTheFormula) {
  for (std::int64_t rd : {2, 8, 16, 64, 128}) {
    const std::vector<float> plain = rope::inverse_frequencies(rd, 500000.0f);
    rope::ScalingParams linear;
    linear.kind = rope::Scaling::kLinear;
    linear.factor = 1.0f;
    EXPECT_TRUE(testing::same_bits(plain, rope::inverse_frequencies(rd, 500000.0f, linear))) << rd;
    linear.factor = 4.0f;
    const std::vector<float> quarter = rope::inverse_frequencies(rd, 500000.0f, linear);
    for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(quarter[i], plain[i] / 4.0f);
    // llama3 (Llama 3.1's numbers) against the double formula of HF's _compute_llama3_parameters.
    rope::ScalingParams l3;
    l3.kind = rope::Scaling::kLlama3;
    l3.factor = 8.0f;
    l3.low_freq_factor = 1.0f;
    l3.high_freq_factor = 4.0f;
    l3.original = 8192;
    const std::vector<float> scaled = rope::inverse_frequencies(rd, 500000.0f, l3);
    for (std::size_t i = 0; i < plain.size(); ++i) {
      const double inv = plain[i], wavelength = 2.0 * M_PI / inv;
      double want = inv;
      if (wavelength > 8192.0) want = inv / 8.0;
      if (wavelength >= 8192.0 / 4.0 && wavelength <= 8192.0) {
        const double s = (8192.0 / wavelength - 1.0) / 3.0;
        want = (1.0 - s) * inv / 8.0 + s * inv;
      }
      EXPECT_NEAR(scaled[i], want, 4e-7 * want + 1e-30) << rd << " column " << i;
    }
  }
}

}  // namespace
}  // namespace samebits
