// Hand-checked values and threshold behaviour of the exact scalar primitives (docs/numerics.md §2),
// each also pushed through every SIMD target's array twin.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_target.hpp"
#include "numerics/vector_math.hpp"

namespace samebits {
namespace {

using fp::bits;
using fp::from_bits;

constexpr std::uint32_t kQNaN = 0x7FC00000u;
constexpr std::uint32_t kPlusInf = 0x7F800000u;
constexpr std::uint32_t kMinusInf = 0xFF800000u;
constexpr std::uint32_t kPlusZero = 0x00000000u;
constexpr std::uint32_t kMinusZero = 0x80000000u;
constexpr std::uint32_t kOne = 0x3F800000u;
constexpr std::uint32_t kMinusOne = 0xBF800000u;
constexpr std::uint32_t kHalf = 0x3F000000u;
constexpr std::uint32_t kTwo = 0x40000000u;
constexpr std::uint32_t kSmallestSubnormal = 0x00000001u;
constexpr std::uint32_t kLargestSubnormal = 0x007FFFFFu;
constexpr std::uint32_t kFltMax = 0x7F7FFFFFu;
constexpr std::uint32_t kQuietPayload = 0x7FC12345u;      // quiet NaN with a payload
constexpr std::uint32_t kSignalingPayload = 0xFF800001u;  // negative signaling NaN
// float ln 2 = 0x3F317218: logf(2) = FMA(1, 0.693359375, -2.12194440e-4) where 2.12194440e-4f is
// 0xDE8083 * 2^-36 = 3560.03 units of 2^-24 below 0.693359375 = 0x3F318000, which rounds to
// 0x3F318000 - 3560 = 0x3F317218.
constexpr std::uint32_t kLn2 = 0x3F317218u;

enum class Fn { Exp, Log, Log1p, Softplus, Sigmoid, Silu, Tanh, Sqrt, Rsqrt, Sin, Cos };

struct Unary {
  const char* name;
  float (*scalar)(float) noexcept;
  void (*array)(const float*, float*, std::size_t);
};

Unary unary(Fn fn) {
  switch (fn) {
    case Fn::Exp:
      return {"expf", primitives::expf, vector_math::exp};
    case Fn::Log:
      return {"logf", primitives::logf, vector_math::log};
    case Fn::Log1p:
      return {"log1pf", primitives::log1pf, vector_math::log1p};
    case Fn::Softplus:
      return {"softplus", primitives::softplus, vector_math::softplus};
    case Fn::Sigmoid:
      return {"sigmoid", primitives::sigmoid, vector_math::sigmoid};
    case Fn::Silu:
      return {"silu", primitives::silu, vector_math::silu};
    case Fn::Tanh:
      return {"tanhf", primitives::tanhf, vector_math::tanh};
    case Fn::Sqrt:
      return {"sqrtf", primitives::sqrtf, vector_math::sqrt};
    case Fn::Rsqrt:
      return {"rsqrtf", primitives::rsqrtf, vector_math::rsqrt};
    case Fn::Sin:
      return {"sinf", primitives::sinf, vector_math::sin};
    case Fn::Cos:
      return {"cosf", primitives::cosf, vector_math::cos};
  }
  return {"?", nullptr, nullptr};
}

struct Row {
  Fn fn;
  std::uint32_t input;
  std::uint32_t expected;
  const char* why;  // how the value was checked by hand
};

// clang-format off
const Row kRows[] = {
    // expf
    {Fn::Exp, kPlusZero, kOne, "t = 0.5, z = 0, r = +0, y = FMA(q, 0, 0) + 1 = 1, scale 2^0 * 2^0"},
    {Fn::Exp, kMinusZero, kOne, "r = FMA(0, 2.12e-4, FMA(0, -0.69, -0)) = +0, then as expf(+0)"},
    {Fn::Exp, kPlusInf, kPlusInf, "step 2: above the overflow bound"},
    {Fn::Exp, kMinusInf, kPlusZero, "step 2: below the underflow bound"},
    {Fn::Exp, 0x42B17218u, kPlusInf, "first float above 88.722835 (0x42B17217)"},
    {Fn::Exp, 0xC2AEAC51u, kPlusZero, "first float below -87.33655 (0xC2AEAC50)"},
    {Fn::Exp, kQuietPayload, kQuietPayload, "step 1 returns the NaN itself"},
    {Fn::Exp, kSignalingPayload, kSignalingPayload, "step 1 returns the NaN itself, payload and sign kept"},
    {Fn::Exp, kSmallestSubnormal, kOne, "t rounds to 0.5, r = x, y = x + x^2 q rounds, + 1 rounds to 1"},
    // logf
    {Fn::Log, kOne, kPlusZero, "e = 0, m = 1, t = 0: every product is +0 and FMA(0, c, +0) = +0"},
    {Fn::Log, kTwo, kLn2, "e = 1, t = 0: FMA(1, 0.693359375, -2.12194440e-4), see kLn2"},
    {Fn::Log, 0x40800000u, 0x3FB17218u, "logf(4): 1.38671875 less 3560.03 units of 2^-23 rounds to 0x3FB18000 - 3560"},
    {Fn::Log, kHalf, 0xBF317218u, "e = -1, t = 0: the negation of the logf(2) computation, exactly"},
    {Fn::Log, kPlusZero, kMinusInf, "x == 0"},
    {Fn::Log, kMinusZero, kMinusInf, "x == 0 (either sign)"},
    {Fn::Log, kSmallestSubnormal, kMinusInf, "|x| < FLT_MIN is treated as 0"},
    {Fn::Log, 0x80000001u, kMinusInf, "a negative subnormal is also treated as 0, before the sign test"},
    {Fn::Log, kMinusOne, kQNaN, "x < 0"},
    {Fn::Log, kMinusInf, kQNaN, "x < 0"},
    {Fn::Log, kPlusInf, kPlusInf, "x == +inf"},
    {Fn::Log, kQuietPayload, kQuietPayload, "NaN returned as is"},
    // log1pf
    {Fn::Log1p, kPlusZero, kPlusZero, "x == 0 returns x"},
    {Fn::Log1p, kMinusZero, kMinusZero, "x == 0 returns x, keeping the sign"},
    {Fn::Log1p, kSmallestSubnormal, kPlusZero, "F flushes to +0 first"},
    {Fn::Log1p, 0x807FFFFFu, kMinusZero, "F flushes to -0 first"},
    {Fn::Log1p, kMinusOne, kMinusInf, "x == -1"},
    {Fn::Log1p, 0xBF800001u, kQNaN, "first float below -1"},
    {Fn::Log1p, kMinusInf, kQNaN, "x < -1"},
    {Fn::Log1p, kPlusInf, kPlusInf, "x == +inf"},
    {Fn::Log1p, kOne, kLn2, "1 is outside the window: logf(1 + 1) = logf(2)"},
    {Fn::Log1p, 0x0D800000u, 0x0D800000u, "2^-100 in the window: t*t underflows to +0, every term is +0, r = t"},
    {Fn::Log1p, 0x8D800000u, 0x8D800000u, "-2^-100: the terms are -0 or +0, t + -0 and +0 + t both give t"},
    {Fn::Log1p, kSignalingPayload, kSignalingPayload, "NaN returned as is"},
    // softplus
    {Fn::Softplus, 0x41A00001u, 0x41A00001u, "first float above 20 is returned unchanged"},
    {Fn::Softplus, kPlusZero, kLn2, "expf(0) = 1, log1pf(1) = logf(2)"},
    {Fn::Softplus, kPlusInf, kPlusInf, "above 20: x"},
    {Fn::Softplus, kMinusInf, kPlusZero, "expf(-inf) = +0, log1pf(+0) = +0"},
    {Fn::Softplus, 0xC2C80000u, kPlusZero, "softplus(-100): expf gives +0"},
    {Fn::Softplus, kQuietPayload, kQuietPayload, "x <= 20 is false for NaN: x returned"},
    // sigmoid
    {Fn::Sigmoid, kPlusZero, kHalf, "expf(-0) = 1, d = 2, DIV(1, 2) = 0.5"},
    {Fn::Sigmoid, kMinusZero, kHalf, "expf(+0) = 1, d = 2"},
    {Fn::Sigmoid, kPlusInf, kOne, "expf(-inf) = 0, d = 1"},
    {Fn::Sigmoid, kMinusInf, kPlusZero, "expf(+inf) = inf, 1 / inf = +0"},
    {Fn::Sigmoid, 0x42C80000u, kOne, "sigmoid(100): expf(-100) = +0"},
    {Fn::Sigmoid, 0xC2B20000u, kPlusZero, "sigmoid(-89): expf(89) = +inf"},
    {Fn::Sigmoid, kQuietPayload, kQuietPayload, "NaN returned as is"},
    // silu
    {Fn::Silu, kPlusZero, kPlusZero, "DIV(+0, 2)"},
    {Fn::Silu, kMinusZero, kMinusZero, "DIV(-0, 2)"},
    {Fn::Silu, kPlusInf, kPlusInf, "expf(-inf) = 0, inf / 1"},
    {Fn::Silu, 0x42C80000u, 0x42C80000u, "silu(100): expf(-100) = 0, 100 / 1"},
    {Fn::Silu, 0xC2C80000u, kMinusZero, "silu(-100): expf(100) = +inf, -100 / inf = -0"},
    {Fn::Silu, kSignalingPayload, kSignalingPayload, "NaN returned as is"},
    // tanhf
    {Fn::Tanh, kPlusZero, kPlusZero, "x == 0 keeps its sign"},
    {Fn::Tanh, kMinusZero, kMinusZero, "x == 0 keeps its sign"},
    {Fn::Tanh, kSmallestSubnormal, kPlusZero, "F first"},
    {Fn::Tanh, 0x80000001u, kMinusZero, "F first, keeping the sign"},
    {Fn::Tanh, kPlusInf, kOne, "saturation"},
    {Fn::Tanh, kMinusInf, kMinusOne, "saturation, with the sign"},
    {Fn::Tanh, 0x42317219u, kOne, "first float above the saturation bound"},
    {Fn::Tanh, 0x42317218u, kOne, "the bound itself: expf(a + a) = expf(0x42B17218) = inf, 1 - 2/inf = 1"},
    {Fn::Tanh, 0xC2317218u, kMinusOne, "as above, negative"},
    {Fn::Tanh, 0x41200000u, kOne, "tanh(10): q = 2/(e^20 + 1) < 2^-25 so 1 - q rounds to 1"},
    {Fn::Tanh, 0x0D800000u, 0x0D800000u, "2^-100: s underflows to +0, p*s = -0, FMA(-0, x, x) = x"},
    {Fn::Tanh, 0x8D800000u, 0x8D800000u, "-2^-100: FMA(-0, -x, -x) = +0 + -x = -x"},
    {Fn::Tanh, kQuietPayload, kQuietPayload, "NaN returned as is"},
    // sqrtf
    {Fn::Sqrt, 0x40800000u, kTwo, "perfect square 4"},
    {Fn::Sqrt, 0x3E800000u, kHalf, "perfect square 0.25"},
    {Fn::Sqrt, 0x0D800000u, 0x26800000u, "2^-100 (below 2^-96: the scaled path) gives 2^-50"},
    {Fn::Sqrt, 0x00800000u, 0x20000000u, "FLT_MIN = 2^-126 gives 2^-63 (scaled path)"},
    {Fn::Sqrt, 0x7E800000u, 0x5F000000u, "2^126 gives 2^63"},
    {Fn::Sqrt, kTwo, 0x3FB504F3u, "sqrt 2 = 1.41421356..., nearest float 0x3FB504F3"},
    {Fn::Sqrt, kFltMax, 0x5F7FFFFFu, "2^64 sqrt(1 - 2^-24) = 2^64 (1 - 2^-25 - ...) rounds down to 2^64 (1 - 2^-24)"},
    {Fn::Sqrt, kPlusZero, kPlusZero, "zero"},
    {Fn::Sqrt, kMinusZero, kPlusZero, "-0 gives +0 (|x| < FLT_MIN rule)"},
    {Fn::Sqrt, kLargestSubnormal, kPlusZero, "subnormal gives +0"},
    {Fn::Sqrt, 0x80000001u, kPlusZero, "negative subnormal gives +0, not NaN"},
    {Fn::Sqrt, kMinusOne, kQNaN, "x < 0"},
    {Fn::Sqrt, kMinusInf, kQNaN, "x < 0"},
    {Fn::Sqrt, kPlusInf, kPlusInf, "+inf"},
    {Fn::Sqrt, kSignalingPayload, kSignalingPayload, "NaN returned as is"},
    // rsqrtf
    {Fn::Rsqrt, 0x40800000u, kHalf, "1 / 2"},
    {Fn::Rsqrt, 0x3E800000u, kTwo, "1 / 0.5"},
    {Fn::Rsqrt, kOne, kOne, "1 / 1"},
    {Fn::Rsqrt, 0x0D800000u, 0x58800000u, "1 / 2^-50 = 2^50"},
    {Fn::Rsqrt, 0x7E800000u, 0x20000000u, "1 / 2^63 = 2^-63"},
    {Fn::Rsqrt, kFltMax, 0x1F800001u, "1 / (2^64 (1 - 2^-24)) = 2^-64 (1 + 2^-24 + 2^-48...) rounds up"},
    {Fn::Rsqrt, kPlusZero, kPlusInf, "s == 0"},
    {Fn::Rsqrt, kMinusZero, kPlusInf, "-0 is not < 0; sqrtf(-0) = +0"},
    {Fn::Rsqrt, 0x80000001u, kPlusInf, "F gives -0 first"},
    {Fn::Rsqrt, kPlusInf, kPlusZero, "s == +inf"},
    {Fn::Rsqrt, kMinusOne, kQNaN, "x < 0"},
    {Fn::Rsqrt, kQuietPayload, kQuietPayload, "NaN returned as is"},
    // sinf / cosf
    {Fn::Sin, kPlusZero, kPlusZero, "j = 0, x = +0, sin poly y = FMA(-0, p, +0) = +0"},
    {Fn::Sin, kMinusZero, kMinusZero, "sign -1 times y = +0"},
    {Fn::Sin, kSmallestSubnormal, kPlusZero, "sinf flushes its input"},
    {Fn::Sin, 0x80000001u, kMinusZero, "sinf flushes its input, keeping the sign"},
    {Fn::Sin, 0x3FC90FDBu, kOne, "float pi/2: j = 2, cos poly of a reduced x ~ 4e-8 gives exactly 1"},
    {Fn::Sin, kPlusInf, kQNaN, "infinity"},
    {Fn::Sin, kMinusInf, kQNaN, "infinity"},
    {Fn::Sin, kQuietPayload, kQNaN, "NaN gives the canonical qNaN"},
    {Fn::Cos, kPlusZero, kOne, "cos poly: FMA(0, p, FMA(-0.5, 0, 1)) = 1"},
    {Fn::Cos, kMinusZero, kOne, "|x|"},
    {Fn::Cos, kSmallestSubnormal, kOne, "no flush, but x*x = 0 so the cos poly gives 1"},
    {Fn::Cos, 0x40490FDBu, kMinusOne, "float pi: j = 4 -> 0 with the sign flipped, cos poly gives 1"},
    {Fn::Cos, kPlusInf, kQNaN, "infinity"},
    {Fn::Cos, kSignalingPayload, kQNaN, "NaN gives the canonical qNaN"},
};
// clang-format on

TEST(PrimitiveTable, ScalarAndEveryTargetGiveTheHandCheckedBits) {
  for (const Row& row : kRows) {
    const Unary u = unary(row.fn);
    const float x = from_bits(row.input);
    EXPECT_EQ(bits(u.scalar(x)), row.expected) << u.name << "(0x" << std::hex << row.input << "): " << row.why
                                               << " (got 0x" << bits(u.scalar(x)) << ")";
    for (simd::Target target : simd::available_targets()) {
      simd::set_target(target);
      float y = 0.0f;
      u.array(&x, &y, 1);
      EXPECT_EQ(bits(y), row.expected) << u.name << " on " << simd::target_name(target) << "(0x" << std::hex
                                       << row.input << "): " << row.why;
    }
    simd::reset_target();
  }
}

// silu(-inf) is -inf / inf: a NaN (the x86 default NaN), whatever its payload.
TEST(PrimitiveTable, SiluOfMinusInfinityIsNaN) { EXPECT_TRUE(fp::is_nan(primitives::silu(-INFINITY))); }

TEST(Expf, NeverReturnsASubnormal) {
  // Every float from -87.5 to -87 (the underflow edge): the result is +0 or at least FLT_MIN.
  for (std::uint32_t u = 0xC2AE0000u; u <= 0xC2AF0000u; ++u) {
    const float y = primitives::expf(from_bits(u));
    ASSERT_TRUE(bits(y) == 0u || y >= fp::flt_min()) << std::hex << u;
  }
  // The bound itself is not below the bound: it is computed, and must not be a subnormal either.
  const float at_bound = primitives::expf(primitives::lit::kExpUnderflowBound);
  EXPECT_TRUE(bits(at_bound) == 0u || at_bound >= fp::flt_min());
  // The overflow bound itself is finite.
  EXPECT_TRUE(fp::is_finite(primitives::expf(primitives::lit::kExpOverflowBound)));
}

// log1pf's window is [0xBE95F61A, 0x3ED413CD] on bit patterns: log_core(x, 0) inside, logf(x + 1)
// outside. The two branches give different bits at some of these points, so a shifted window fails.
TEST(Log1p, WindowBoundariesSelectTheRightBranch) {
  int branches_differ = 0;
  for (std::uint32_t edge : {0xBE95F61Au, 0x3ED413CDu}) {
    for (int d = -300; d <= 300; ++d) {
      const float x = from_bits(edge + static_cast<std::uint32_t>(d));
      // Bit patterns grow away from zero on both sides: inside means d <= 0.
      const bool inside = d <= 0;
      const float core = primitives::detail::log_core(x, 0);
      const float shifted = primitives::logf(x + 1.0f);
      ASSERT_EQ(bits(primitives::log1pf(x)), bits(inside ? core : shifted)) << std::hex << bits(x);
      if (bits(core) != bits(shifted)) ++branches_differ;
    }
  }
  EXPECT_GT(branches_differ, 100);
}

// softplus: x <= 20 takes log1pf(expf(x)), above 20 x itself. Around 20 the two forms give the same
// bits (log1p(e^x) = x + e^-x and e^-x is below half an ulp of x from about 14.72 up to expf's
// overflow), so the threshold shows in the bits only where the log1p form breaks down: above 88.72
// expf overflows and log1pf(inf) would be inf, while softplus returns x.
TEST(Softplus, ThresholdTwentyIsInclusive) {
  for (int d = -1000; d <= 1000; ++d) {
    const float x = from_bits(0x41A00000u + static_cast<std::uint32_t>(d));
    const float log1p_form = primitives::log1pf(primitives::expf(x));
    ASSERT_EQ(bits(primitives::softplus(x)), bits(d <= 0 ? log1p_form : x)) << std::hex << bits(x);
    ASSERT_EQ(bits(log1p_form), bits(x)) << "the forms agree near 20";
  }
  EXPECT_EQ(bits(primitives::softplus(100.0f)), bits(100.0f)) << "the log1p form would give +inf";
  EXPECT_EQ(bits(primitives::softplus(from_bits(kFltMax))), kFltMax);
  EXPECT_EQ(bits(primitives::log1pf(primitives::expf(100.0f))), kPlusInf);
}

// tanhf: below 0.625 the polynomial, from 0.625 up the expf form (docs/numerics.md §2.7 step 3).
TEST(Tanh, BranchPointSelectsTheRightFormula) {
  auto exp_form = [](float a) { return 1.0f - fp::DIV(2.0f, primitives::expf(a + a) + 1.0f); };
  auto poly_form = [](float a) {
    const float s = a * a;
    float p = primitives::lit::kTanhP0;
    p = fp::FMA(p, s, primitives::lit::kTanhP1);
    p = fp::FMA(p, s, primitives::lit::kTanhP2);
    p = fp::FMA(p, s, primitives::lit::kTanhP3);
    p = fp::FMA(p, s, primitives::lit::kTanhP4);
    return fp::FMA(p * s, a, a);
  };
  int forms_differ = 0;
  for (int d = -200; d <= 200; ++d) {
    const float a = from_bits(0x3F200000u + static_cast<std::uint32_t>(d));
    const float expected = a >= 0.625f ? exp_form(a) : poly_form(a);
    ASSERT_EQ(bits(primitives::tanhf(a)), bits(expected)) << std::hex << bits(a);
    ASSERT_EQ(bits(primitives::tanhf(-a)), bits(expected) ^ 0x80000000u)
        << std::hex << bits(a);  // odd function
    if (bits(exp_form(a)) != bits(poly_form(a))) ++forms_differ;
  }
  EXPECT_GT(forms_differ, 20);
}

// silu is one division x / (expf(-x) + 1), not x * sigmoid(x); the two differ for many inputs.
TEST(Silu, IsOneDivisionNotTimesSigmoid) {
  int differ = 0;
  for (int i = -4000; i <= 4000; ++i) {
    const float x = static_cast<float>(i) / 256.0f;
    ASSERT_EQ(bits(primitives::silu(x)), bits(fp::DIV(x, primitives::expf(-x) + 1.0f)));
    if (bits(primitives::silu(x)) != bits(x * primitives::sigmoid(x))) ++differ;
  }
  EXPECT_GT(differ, 100);
}

TEST(Sqrt, PerfectSquaresAreExact) {
  // k^2 < 2^24 is exact in float, and its square root is k.
  for (int k = 1; k <= 4096; ++k) {
    const float square = static_cast<float>(k * k);
    ASSERT_EQ(primitives::sqrtf(square), static_cast<float>(k));
    ASSERT_EQ(primitives::sqrtf_reference(square), static_cast<float>(k));
    // Scaled by 2^-120 (below 2^-96, the scaled path) while the square stays normal.
    const float tiny = square * 0x1.0p-120f;
    if (tiny >= fp::flt_min()) {
      ASSERT_EQ(primitives::sqrtf_reference(tiny), static_cast<float>(k) * 0x1.0p-60f) << k;
    }
  }
}

// Multiples of pi/4 (as floats, |k| <= 16): the reduction lands on j = k, so sin at odd multiples of
// pi/2 and cos at multiples of pi are exactly +-1 (the cos polynomial of a ~1e-7 argument is 1), and
// the rest are within the accuracy bounds of test_primitives_sweep (1.75 ulp, or 2^-23 near zeros).
TEST(Trig, MultiplesOfPiOverFour) {
  for (int k = -16; k <= 16; ++k) {
    const float x = static_cast<float>(k * 0.78539816339744830962);
    const float s = primitives::sinf(x);
    const float c = primitives::cosf(x);
    const int octant = ((k % 8) + 8) % 8;
    if (octant == 2) {
      EXPECT_EQ(s, 1.0f) << k;
    }
    if (octant == 6) {
      EXPECT_EQ(s, -1.0f) << k;
    }
    if (octant == 0) {
      EXPECT_EQ(c, 1.0f) << k;
    }
    if (octant == 4) {
      EXPECT_EQ(c, -1.0f) << k;
    }
    const std::pair<float, double> results[] = {{s, std::sin(static_cast<double>(x))},
                                                {c, std::cos(static_cast<double>(x))}};
    for (auto [got, ref] : results) {
      const double error = std::fabs(static_cast<double>(got) - ref);
      if (std::fabs(ref) < 0x1.0p-12) {
        EXPECT_LE(error, 0x1.0p-23) << k;
      } else {
        EXPECT_LE(error, 1.75 * std::ldexp(1.0, std::ilogb(ref) - 23)) << k;
      }
    }
  }
  // sin(float pi) = -(float pi - pi) to first order: float pi - pi = 8.742278000372485e-08.
  EXPECT_NEAR(primitives::sinf(3.14159265358979f), -8.742278000372485e-08, 2 * 0x1.0p-47);
  // cos(float pi/2) = -(float pi/2 - pi/2) = -4.371139000186243e-08.
  EXPECT_NEAR(primitives::cosf(1.57079632679490f), -4.371139000186243e-08, 2 * 0x1.0p-48);
}

TEST(Powf, SpecialCases) {
  const float nan = from_bits(kQuietPayload);
  EXPECT_EQ(bits(primitives::powf(nan, 0.0f)), kOne) << "p == 0 is checked first";
  EXPECT_EQ(bits(primitives::powf(nan, -0.0f)), kOne) << "-0 == 0";
  EXPECT_EQ(bits(primitives::powf(-3.0f, 0.0f)), kOne);
  EXPECT_EQ(bits(primitives::powf(2.0f, nan)), kQNaN);
  EXPECT_EQ(bits(primitives::powf(nan, 1.0f)), kQNaN);
  EXPECT_EQ(bits(primitives::powf(0.0f, nan)), kQNaN) << "NaN test comes before the zero test";
  EXPECT_EQ(bits(primitives::powf(-2.0f, 2.0f)), kQNaN) << "x < 0";
  EXPECT_EQ(bits(primitives::powf(-INFINITY, 2.0f)), kQNaN);
  EXPECT_EQ(bits(primitives::powf(0.0f, 2.0f)), kPlusZero);
  EXPECT_EQ(bits(primitives::powf(-0.0f, 3.0f)), kPlusZero) << "-0 is not < 0; x == 0 and p > 0 give +0";
  EXPECT_EQ(bits(primitives::powf(0.0f, -1.0f)), kPlusInf);
  EXPECT_EQ(bits(primitives::powf(-0.0f, -0.5f)), kPlusInf);
  EXPECT_EQ(bits(primitives::powf(1.0f, 5.0f)), kOne) << "logf(1) = +0, 5 * +0 = +0, expf(+0) = 1";
  EXPECT_EQ(bits(primitives::powf(1.0f, -5.0f)), kOne) << "-5 * +0 = -0, expf(-0) = 1";
  EXPECT_EQ(bits(primitives::powf(from_bits(kSmallestSubnormal), 2.0f)), kPlusZero)
      << "logf(subnormal) = -inf";
  EXPECT_EQ(bits(primitives::powf(from_bits(kSmallestSubnormal), -2.0f)), kPlusInf);
  EXPECT_EQ(bits(primitives::powf(INFINITY, 1.0f)), kPlusInf);
  EXPECT_EQ(bits(primitives::powf(INFINITY, -1.0f)), kPlusZero);
  // powf(4, 0.5) is exp(0.5 * logf(4)) = expf(0x3F317218) = expf(float ln 2), within 1 ulp of 2.
  EXPECT_NEAR(primitives::powf(4.0f, 0.5f), 2.0f, 2.4e-7f);
}

TEST(Fmax, ZerosNaNsAndOrder) {
  auto fmax_bits = [](std::uint32_t a, std::uint32_t b) {
    return bits(primitives::fmax(from_bits(a), from_bits(b)));
  };
  EXPECT_EQ(fmax_bits(kMinusZero, kPlusZero), kPlusZero) << "-0 < +0 in the total order";
  EXPECT_EQ(fmax_bits(kPlusZero, kMinusZero), kPlusZero);
  EXPECT_EQ(fmax_bits(kMinusZero, kMinusZero), kMinusZero);
  EXPECT_EQ(fmax_bits(kSmallestSubnormal, kMinusZero), kPlusZero) << "F(subnormal) = +0 > -0";
  EXPECT_EQ(fmax_bits(0x80000001u, 0x80000002u), kMinusZero) << "both flush to -0";
  EXPECT_EQ(fmax_bits(0x80000001u, kPlusZero), kPlusZero);
  EXPECT_EQ(fmax_bits(kQuietPayload, kOne), kQNaN) << "any NaN gives the canonical qNaN";
  EXPECT_EQ(fmax_bits(kOne, kSignalingPayload), kQNaN);
  EXPECT_EQ(fmax_bits(kMinusInf, 0xFF7FFFFFu), 0xFF7FFFFFu);
  EXPECT_EQ(fmax_bits(kPlusInf, kOne), kPlusInf);
  EXPECT_EQ(fmax_bits(kMinusOne, 0xC0000000u), kMinusOne) << "-1 > -2";
  EXPECT_EQ(fmax_bits(0x40400000u, kTwo), 0x40400000u) << "3 > 2";
  // Any fold shape of a mixed list of zeros, subnormals and values gives the same bits.
  const std::vector<float> values{-0.0f, 0.0f, from_bits(0x80000005u), -3.0f, from_bits(kSmallestSubnormal),
                                  -0.0f};
  const float left = primitives::fmax(
      primitives::fmax(
          primitives::fmax(primitives::fmax(primitives::fmax(values[0], values[1]), values[2]), values[3]),
          values[4]),
      values[5]);
  const float right = primitives::fmax(
      values[0],
      primitives::fmax(
          values[1],
          primitives::fmax(values[2], primitives::fmax(values[3], primitives::fmax(values[4], values[5])))));
  const float tree = primitives::fmax(
      primitives::fmax(primitives::fmax(values[5], values[4]), primitives::fmax(values[3], values[2])),
      primitives::fmax(values[1], values[0]));
  EXPECT_EQ(bits(left), kPlusZero);
  EXPECT_EQ(bits(right), kPlusZero);
  EXPECT_EQ(bits(tree), kPlusZero);
}

TEST(Clamp, ZerosNaNsAndBounds) {
  auto clamp_bits = [](std::uint32_t x, std::uint32_t lo, std::uint32_t hi) {
    return bits(primitives::clamp(from_bits(x), from_bits(lo), from_bits(hi)));
  };
  EXPECT_EQ(clamp_bits(kMinusZero, kPlusZero, kOne), kPlusZero) << "key(+0) > key(-0): raised to lo";
  EXPECT_EQ(clamp_bits(kPlusZero, kMinusOne, kMinusZero), kMinusZero) << "key(-0) < key(+0): lowered to hi";
  EXPECT_EQ(clamp_bits(kPlusZero, kMinusZero, kPlusZero), kPlusZero);
  EXPECT_EQ(clamp_bits(0x40A00000u, kPlusZero, kOne), kOne) << "5 -> 1";
  EXPECT_EQ(clamp_bits(0xC0A00000u, kPlusZero, kOne), kPlusZero) << "-5 -> +0";
  EXPECT_EQ(clamp_bits(kHalf, kPlusZero, kOne), kHalf);
  EXPECT_EQ(clamp_bits(kHalf, kTwo, kOne), kOne) << "lo > hi: the hi test comes last and wins";
  EXPECT_EQ(clamp_bits(kQuietPayload, kPlusZero, kOne), kQNaN);
  EXPECT_EQ(clamp_bits(kPlusZero, kSignalingPayload, kOne), kQNaN);
  EXPECT_EQ(clamp_bits(kPlusZero, kPlusZero, kQuietPayload), kQNaN);
  EXPECT_EQ(clamp_bits(kSmallestSubnormal, kMinusOne, kOne), kPlusZero) << "x flushed";
  EXPECT_EQ(clamp_bits(0x80000001u, kMinusOne, kOne), kMinusZero) << "x flushed, sign kept";
  EXPECT_EQ(clamp_bits(kMinusZero, kSmallestSubnormal, kOne), kPlusZero) << "lo flushed to +0 > -0";
  EXPECT_EQ(clamp_bits(kPlusInf, kPlusZero, kOne), kOne);
  EXPECT_EQ(clamp_bits(kMinusInf, 0xFF7FFFFFu, kPlusZero), 0xFF7FFFFFu);
}

TEST(Floor, MatchesFloorfOnEdges) {
  // detail::floor is the floorf of expf step 3 and the sin/cos octant; checked against std::floor.
  const float cases[] = {
      0.0f,         -0.0f,      0.5f,           -0.5f,      1.0f,           -1.0f,
      1.5f,         -1.5f,      2.0f,           -2.0f,      0x1.fffffep22f, -0x1.fffffep22f,
      0x1.0p23f,    -0x1.0p23f, 0x1.000002p23f, 1e30f,      -1e30f,         0x1.0p-149f,
      -0x1.0p-149f, INFINITY,   -INFINITY,      128.49998f, -125.5f,        -0.99999994f};
  for (float v : cases)
    EXPECT_EQ(bits(primitives::detail::floor(v)), bits(std::floor(v))) << std::hexfloat << v;
  EXPECT_TRUE(fp::is_nan(primitives::detail::floor(NAN)));
}

}  // namespace
}  // namespace samebits
