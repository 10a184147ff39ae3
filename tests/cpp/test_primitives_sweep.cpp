// Over 2^20 inputs per primitive: each scalar primitive against a double-precision reference within a
// measured ULP bound, and every SIMD target's array twin against the scalar primitive bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_target.hpp"
#include "numerics/vector_math.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using fp::bits;
using fp::from_bits;
using testing::Rng;

constexpr std::size_t kInputsPerPrimitive = std::size_t{1} << 20;

// Error bounds against the double-precision libm reference, in ulps of the float result. Each is
// the maximum this suite measures (printed by every test) rounded up to the next quarter ulp, so a
// wrong coefficient, a swapped step or a missing FMA shows up as a failure. Measured maxima:
// expf 1.010 (Cephes expf: about 1 ulp), logf 0.819, log1pf 2.370 (log(x+1) outside the window
// rounds x+1 first), softplus 2.478 (exp's error enters log1p), sigmoid 2.347 and silu 2.323
// (exp's error survives the division, plus the add and the division's roundings), tanhf 1.274,
// rsqrtf 1.472 (the correctly rounded sqrt, then one division), sinf 1.560 and cosf 1.547 (every
// 7th float of [0, 8192); absolute error at most 2^-23.36 there).
constexpr double kExpUlps = 1.25;
constexpr double kLogUlps = 1.0;
constexpr double kLog1pUlps = 2.5;
constexpr double kSoftplusUlps = 2.5;
constexpr double kSigmoidUlps = 2.5;
constexpr double kSiluUlps = 2.5;
constexpr double kTanhUlps = 1.5;
constexpr double kRsqrtUlps = 1.5;
constexpr double kTrigUlps = 1.75;
constexpr double kTrigAbsoluteError = 0x1.0p-23;

// Every boundary the step lists name, plus the places where a result changes regime. Each is swept
// densely (both signs, +-kSweepUlps bit patterns) by make_inputs.
const std::uint32_t kBoundaryBits[] = {
    0x00000000u,  // zero: +-0 and the smallest subnormals
    0x00800000u,  // FLT_MIN: subnormal / normal edge
    0x3F800000u,  // 1 (log(1) = 0, log1p(-1) pole)
    0x3F000000u,  // 0.5
    0x40000000u,  // 2
    0x42B17217u,  // expf overflow bound 88.722835
    0xC2AEAC50u,  // expf underflow bound -87.33655 (its negation is silu / sigmoid's)
    0x3F3504F3u,  // logf mantissa split sqrt(1/2)
    0xBE95F61Au,  // log1pf window low
    0x3ED413CDu,  // log1pf window high
    0x3EB17218u,  // ln 2 / 2: exp(x) crosses log1pf's window high inside softplus
    0x41A00000u,  // softplus threshold 20
    0x42317218u,  // tanhf saturation bound
    0x3F200000u,  // tanhf branch point 0.625
    0x0F800000u,  // sqrtf scaling threshold 2^-96
    0x7F7FFFFFu,  // FLT_MAX
    0x7F800000u,  // infinity (and the NaNs just above it)
    0x46000000u,  // 8192, the sin/cos domain edge
    0x3F490FDBu,  // pi/4
    0x3FC90FDBu,  // pi/2
    0x40490FDBu,  // pi
    0x40C90FDBu,  // 2 pi
    0x4116CBE4u,  // 3 pi
    0x45C90FDBu,  // 2048 pi
};
constexpr std::uint32_t kSweepUlps = 1500;

const std::uint32_t kSpecialBits[] = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu, 0x00800000u, 0x80800000u,
    0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBFFFFFu, 0x7FFFFFFFu,
    0xFFFFFFFFu, 0x7FC12345u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x3F800000u, 0xBF800000u, 0x7FA00000u, 0xFFD00001u,
};

// A deterministic mix: specials, dense sweeps around every boundary, random bit patterns over the
// whole float range, and random values in the primitive's working range [lo, hi].
std::vector<float> make_inputs(std::uint64_t seed, float lo, float hi) {
  std::vector<float> inputs;
  inputs.reserve(kInputsPerPrimitive);
  for (std::uint32_t special : kSpecialBits) inputs.push_back(from_bits(special));
  for (std::uint32_t boundary : kBoundaryBits)
    for (std::uint32_t sign : {0u, 0x80000000u})
      for (std::uint32_t d = 0; d <= 2 * kSweepUlps; ++d)
        inputs.push_back(from_bits(((boundary & 0x7FFFFFFFu) | sign) + d - kSweepUlps));
  Rng rng(seed);
  const std::size_t random_bits = inputs.size() + 300000;
  while (inputs.size() < random_bits) inputs.push_back(from_bits(static_cast<std::uint32_t>(rng.next())));
  while (inputs.size() < kInputsPerPrimitive) {
    const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    inputs.push_back(static_cast<float>(lo + (static_cast<double>(hi) - lo) * u));
  }
  return inputs;
}

// |got - ref| in units of the float spacing at ref (2^-149 below FLT_MIN).
double ulp_error(float got, double ref) {
  int exponent = 0;
  std::frexp(ref, &exponent);  // |ref| = m * 2^exponent, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

struct ErrorStats {
  double max_ulps = 0;
  float worst_input = 0;
  std::size_t checked = 0;
  void add(double ulps, float input) {
    ++checked;
    if (ulps > max_ulps) {
      max_ulps = ulps;
      worst_input = input;
    }
  }
  void report(const char* name) const {
    std::printf("%-9s max error %.3f ulp at %a (0x%08X) over %zu reference checks\n", name, max_ulps,
                static_cast<double>(worst_input), bits(worst_input), checked);
  }
};

using UnaryPrim = float (*)(float) noexcept;
using ArrayFn = void (*)(const float*, float*, std::size_t);

// Every available target's array function equals the scalar primitive bit for bit on all inputs.
void expect_targets_match_scalar(const char* name, UnaryPrim scalar, ArrayFn array,
                                 const std::vector<float>& x) {
  std::vector<float> expected(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) expected[i] = scalar(x[i]);
  std::vector<float> got(x.size());
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    std::fill(got.begin(), got.end(), 0.0f);
    array(x.data(), got.data(), x.size());
    const std::int64_t diff =
        testing::first_difference(expected.data(), got.data(), static_cast<std::int64_t>(x.size()));
    EXPECT_EQ(diff, -1) << name << " on " << simd::target_name(target) << ": input 0x" << std::hex
                        << (diff >= 0 ? bits(x[diff]) : 0u) << " scalar 0x"
                        << (diff >= 0 ? bits(expected[diff]) : 0u) << " vector 0x"
                        << (diff >= 0 ? bits(got[diff]) : 0u);
  }
  simd::reset_target();
}

bool is_finite_double(double v) { return std::isfinite(v); }

// Checks `got` against the double reference: within max_ulps, or a flushed zero where the true
// value lies below FLT_MIN (the primitives flush subnormal results).
void expect_near(const char* name, float x, float got, double ref, double max_ulps, ErrorStats& stats) {
  if (std::fabs(ref) < fp::flt_min() && got == 0.0f) return;
  if (!is_finite_double(ref) || std::fabs(ref) > 3.4028234663852886e38) {
    EXPECT_TRUE(fp::is_inf(got) && (got > 0) == (ref > 0)) << name << "(" << x << ") = " << got;
    return;
  }
  const double ulps = ulp_error(got, ref);
  stats.add(ulps, x);
  EXPECT_LE(ulps, max_ulps) << name << "(" << std::hexfloat << x << ") = " << got << " reference " << ref;
}

// What a unary primitive must return for one input: exactly these bits, some NaN, or a float within the
// primitive's ULP bound of this double-precision reference.
struct Want {
  enum Kind { Exact, AnyNan, Near } kind;
  std::uint32_t bits = 0;
  double reference = 0;
};
Want exactly(std::uint32_t b) { return {Want::Exact, b, 0}; }
Want any_nan() { return {Want::AnyNan, 0, 0}; }
Want near(double reference) { return {Want::Near, 0, reference}; }

// The want of a primitive that flushes its input first (F) and returns a zero as it is: NaN and the zero of
// F(v)'s sign exactly, every other input as rest(F(v)) says.
template <typename RestFn>
auto flushing_first(RestFn rest) {
  return [rest](float v) {
    const float f = fp::F(v);
    if (fp::is_nan(v)) return exactly(bits(v));
    if (f == 0.0f) return exactly(bits(f));
    return rest(f);
  };
}

// The sweep of one unary primitive `name` over x: each result as want(v) says (the ULP errors gathered
// and reported), also(v, y) for any further check on every input, then every SIMD target's array twin
// against the scalar primitive (named `twin`) bit for bit. A failed ASSERT ends the sweep.
template <typename WantFn, typename AlsoFn>
void sweep(const char* name, const char* twin, UnaryPrim scalar, ArrayFn array, const std::vector<float>& x,
           double max_ulps, WantFn want, AlsoFn also) {
  ErrorStats stats;
  for (float v : x) {
    const float y = scalar(v);
    const Want w = want(v);
    if (w.kind == Want::Exact) {
      ASSERT_EQ(bits(y), w.bits) << name << "(" << std::hexfloat << v << ")";
    } else if (w.kind == Want::AnyNan) {
      ASSERT_TRUE(fp::is_nan(y)) << name << "(" << std::hexfloat << v << ")";
    } else {
      expect_near(name, v, y, w.reference, max_ulps, stats);
    }
    also(v, y);
    if (::testing::Test::HasFatalFailure()) return;
  }
  stats.report(name);
  expect_targets_match_scalar(twin, scalar, array, x);
}

template <typename WantFn>
void sweep(const char* name, const char* twin, UnaryPrim scalar, ArrayFn array, const std::vector<float>& x,
           double max_ulps, WantFn want) {
  sweep(name, twin, scalar, array, x, max_ulps, want, [](float, float) {});
}

TEST(PrimitiveSweep, Exp) {
  sweep(
      "expf", "exp", primitives::expf, vector_math::exp, make_inputs(1, -104.0f, 90.0f), kExpUlps,
      [](float v) {
        if (fp::is_nan(v)) return exactly(bits(v));
        if (v > primitives::lit::kExpOverflowBound) return exactly(0x7F800000u);
        if (v < primitives::lit::kExpUnderflowBound) return exactly(0u);
        return near(std::exp(static_cast<double>(v)));
      },
      [](float v, float y) {
        ASSERT_FALSE(fp::is_subnormal(y)) << "expf never returns a subnormal; input " << std::hexfloat << v;
        // docs/goldens.md §6: step 3 unfused gives the same floor as the FMA for every float32 input.
        if (v >= primitives::lit::kExpUnderflowBound && v <= primitives::lit::kExpOverflowBound) {
          const float fused = fp::FMA(v, primitives::lit::kLog2e, 0.5f);
          const float product = v * primitives::lit::kLog2e;
          ASSERT_EQ(primitives::detail::floor(fused), primitives::detail::floor(product + 0.5f))
              << std::hexfloat << v;
        }
      });
}

TEST(PrimitiveSweep, Log) {
  sweep("logf", "log", primitives::logf, vector_math::log, make_inputs(2, 0.0f, 4.0f), kLogUlps, [](float v) {
    if (fp::is_nan(v)) return exactly(bits(v));
    if (std::fabs(v) < fp::flt_min()) return exactly(0xFF800000u);
    if (v < 0) return exactly(0x7FC00000u);
    return near(std::log(static_cast<double>(v)));
  });
}

TEST(PrimitiveSweep, Log1p) {
  sweep("log1pf", "log1p", primitives::log1pf, vector_math::log1p, make_inputs(3, -1.0f, 3.0f), kLog1pUlps,
        flushing_first([](float f) {
          if (f < -1.0f) return exactly(0x7FC00000u);
          return near(std::log1p(static_cast<double>(f)));
        }));
}

TEST(PrimitiveSweep, Softplus) {
  sweep("softplus", "softplus", primitives::softplus, vector_math::softplus, make_inputs(4, -100.0f, 40.0f),
        kSoftplusUlps, [](float v) {
          if (fp::is_nan(v) || v > 20.0f) return exactly(bits(v));
          return near(std::log1p(std::exp(static_cast<double>(v))));
        });
}

TEST(PrimitiveSweep, Sigmoid) {
  sweep("sigmoid", "sigmoid", primitives::sigmoid, vector_math::sigmoid, make_inputs(5, -100.0f, 40.0f),
        kSigmoidUlps, [](float v) {
          if (fp::is_nan(v)) return exactly(bits(v));
          return near(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
        });
}

TEST(PrimitiveSweep, Silu) {
  sweep("silu", "silu", primitives::silu, vector_math::silu, make_inputs(6, -110.0f, 40.0f), kSiluUlps,
        [](float v) {
          if (fp::is_nan(v)) return exactly(bits(v));
          if (v == -INFINITY) return any_nan();  // -inf / inf
          // expf(-x) = +inf, so d = +inf and DIV(x, inf) = -0 although x * e^x is still a normal float down
          // to about -103: a property of the step list, not an error of this code.
          if (-v > primitives::lit::kExpOverflowBound) return exactly(0x80000000u);
          const double d = static_cast<double>(v);
          return near(d / (1.0 + std::exp(-d)));
        });
}

TEST(PrimitiveSweep, Tanh) {
  sweep("tanhf", "tanh", primitives::tanhf, vector_math::tanh, make_inputs(7, -12.0f, 12.0f), kTanhUlps,
        flushing_first([](float f) { return near(std::tanh(static_cast<double>(f))); }));
}

TEST(PrimitiveSweep, SqrtIsCorrectlyRounded) {
  const auto x = make_inputs(8, 0.0f, 1000.0f);
  for (float v : x) {
    const float y = primitives::sqrtf(v);
    if (fp::is_nan(v)) {
      ASSERT_EQ(bits(y), bits(v));
    } else if (std::fabs(v) < fp::flt_min()) {
      ASSERT_EQ(bits(y), 0u);  // +0 for both signs of zero and every subnormal
    } else if (v < 0) {
      ASSERT_EQ(bits(y), 0x7FC00000u);
    } else {
      // double has 53 >= 2 * 24 + 2 bits, so rounding the double root to float is correctly rounded.
      ASSERT_EQ(bits(y), bits(static_cast<float>(std::sqrt(static_cast<double>(v))))) << std::hexfloat << v;
      ASSERT_EQ(bits(y), bits(primitives::sqrtf_reference(v))) << std::hexfloat << v;
    }
  }
  expect_targets_match_scalar("sqrt", primitives::sqrtf, vector_math::sqrt, x);
}

TEST(PrimitiveSweep, Rsqrt) {
  sweep("rsqrtf", "rsqrt", primitives::rsqrtf, vector_math::rsqrt, make_inputs(9, 0.0f, 1000.0f), kRsqrtUlps,
        [](float v) {
          const float f = fp::F(v);
          if (fp::is_nan(v)) return exactly(bits(v));
          if (f == 0.0f) return exactly(0x7F800000u);  // sqrt gives +0 for both zeros
          if (f < 0) return exactly(0x7FC00000u);
          if (fp::is_inf(f)) return exactly(0u);
          return near(1.0 / std::sqrt(static_cast<double>(f)));
        });
}

// sin and cos: a ULP bound where |result| >= 2^-12; closer to their zeros the reduction's absolute
// error dominates, so the bound there is absolute.
void check_trig(const char* name, UnaryPrim fn, ArrayFn array, double (*ref_fn)(double), std::uint64_t seed,
                bool flush_input) {
  const auto x = make_inputs(seed, -8192.0f, 8192.0f);
  ErrorStats stats;
  for (float v : x) {
    const float y = fn(v);
    if (!fp::is_finite(v)) {
      ASSERT_EQ(bits(y), 0x7FC00000u);
      continue;
    }
    const float arg = flush_input ? fp::F(v) : v;
    if (!(std::fabs(arg) < 8192.0f)) continue;  // outside the domain: only the SIMD twins are checked
    const double ref = ref_fn(static_cast<double>(arg));
    if (std::fabs(ref) < 0x1.0p-12) {
      ASSERT_LE(std::fabs(static_cast<double>(y) - ref), kTrigAbsoluteError)
          << name << "(" << std::hexfloat << v << ")";
      continue;
    }
    expect_near(name, v, y, ref, kTrigUlps, stats);
  }
  stats.report(name);
  expect_targets_match_scalar(name, fn, array, x);
}

TEST(PrimitiveSweep, Sin) {
  check_trig(
      "sinf", primitives::sinf, vector_math::sin, [](double v) { return std::sin(v); }, 10, true);
}
TEST(PrimitiveSweep, Cos) {
  check_trig(
      "cosf", primitives::cosf, vector_math::cos, [](double v) { return std::cos(v); }, 11, false);
}

TEST(PrimitiveSweep, Flush) {
  const auto x = make_inputs(12, -1.0f, 1.0f);
  for (float v : x) {
    const std::uint32_t u = bits(v);
    const bool subnormal = (u & 0x7F800000u) == 0 && (u & 0x007FFFFFu) != 0;
    ASSERT_EQ(bits(fp::F(v)), subnormal ? (u & 0x80000000u) : u);
  }
  expect_targets_match_scalar(
      "flush", [](float v) noexcept { return fp::F(v); }, vector_math::flush, x);
}

// Tails and in-place calls: every length 0..70 at every misalignment 0..3 equals the scalar loop.
TEST(PrimitiveSweep, TailsAndInPlace) {
  const auto pool = make_inputs(13, -30.0f, 30.0f);
  struct Case {
    const char* name;
    UnaryPrim scalar;
    ArrayFn array;
  };
  const Case cases[] = {
      {"exp", primitives::expf, vector_math::exp},
      {"log", primitives::logf, vector_math::log},
      {"log1p", primitives::log1pf, vector_math::log1p},
      {"softplus", primitives::softplus, vector_math::softplus},
      {"sigmoid", primitives::sigmoid, vector_math::sigmoid},
      {"silu", primitives::silu, vector_math::silu},
      {"tanh", primitives::tanhf, vector_math::tanh},
      {"sqrt", primitives::sqrtf, vector_math::sqrt},
      {"rsqrt", primitives::rsqrtf, vector_math::rsqrt},
      {"sin", primitives::sinf, vector_math::sin},
      {"cos", primitives::cosf, vector_math::cos},
  };
  Rng rng(99);
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    for (const Case& c : cases) {
      for (std::size_t n = 0; n <= 70; ++n) {
        for (std::size_t offset = 0; offset < 4; ++offset) {
          std::vector<float> buffer(n + 8, -7.25f);
          const std::size_t start = rng.next() % (pool.size() - n);
          for (std::size_t i = 0; i < n; ++i) buffer[offset + i] = pool[start + i];
          std::vector<float> out(n + 8, 3.5f);
          c.array(buffer.data() + offset, out.data() + offset, n);
          std::vector<float> in_place = buffer;
          c.array(in_place.data() + offset, in_place.data() + offset, n);
          for (std::size_t i = 0; i < n + 8; ++i) {
            const bool inside = i >= offset && i < offset + n;
            const float expected_out = inside ? c.scalar(buffer[i]) : 3.5f;  // nothing outside is written
            const float expected_in_place = inside ? c.scalar(buffer[i]) : buffer[i];
            ASSERT_EQ(bits(out[i]), bits(expected_out))
                << c.name << " " << simd::target_name(target) << " n=" << n;
            ASSERT_EQ(bits(in_place[i]), bits(expected_in_place))
                << c.name << " in place " << simd::target_name(target) << " n=" << n;
          }
        }
      }
    }
  }
  simd::reset_target();
}

// powf: exp(y) with y = p * logf(x) in float. logf's error (<= kLogUlps ulp, at most 2 * 0.82 * 2^-24
// relative) plus the product's rounding (<= 2^-24 relative) give |dy| <= 2.64 * 2^-24 * |y|, which exp
// turns into a relative error of the same size, i.e. at most 2.64 * |y| ulps (an ulp is >= 2^-24
// relative), on top of expf's own kExpUlps: allowed = 1.25 + 2.75 * |y| ulps.
TEST(PrimitiveSweep, Pow) {
  Rng rng(14);
  const auto xs = make_inputs(15, 0.0f, 10.0f);
  const auto ps = make_inputs(16, -8.0f, 8.0f);
  ErrorStats stats;
  std::size_t checked = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i];
    const float p = ps[(i * 7919 + rng.next() % 13) % ps.size()];
    const float y = primitives::powf(x, p);
    if (p == 0.0f) {
      ASSERT_EQ(bits(y), 0x3F800000u);
    } else if (fp::is_nan(x) || fp::is_nan(p) || x < 0.0f) {
      ASSERT_EQ(bits(y), 0x7FC00000u);
    } else if (x == 0.0f) {
      ASSERT_EQ(bits(y), p > 0.0f ? 0u : 0x7F800000u);
    } else if (fp::is_finite(x) && fp::is_finite(p) && !fp::is_subnormal(x)) {
      const double lnx = std::log(static_cast<double>(x));
      const double exponent = static_cast<double>(p) * lnx;
      if (exponent > 88.72 || exponent < -87.3) continue;  // the overflow / flush edges of expf
      ++checked;
      expect_near("powf", x, y, std::exp(exponent), kExpUlps + 2.75 * std::fabs(exponent), stats);
    }
  }
  stats.report("powf");
  EXPECT_GT(checked, std::size_t{300000});
}

// fmax and clamp against an independent formulation: an ordinary comparison on the flushed values,
// with -0 < +0 decided by the sign bit.
float total_max(float a, float b) {
  if (a == b) return std::signbit(a) ? b : a;  // equal values differ only for +-0; prefer +0
  return a > b ? a : b;
}
float total_min(float a, float b) {
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

TEST(PrimitiveSweep, FmaxAndClamp) {
  const auto pool = make_inputs(17, -4.0f, 4.0f);
  Rng rng(18);
  auto pick = [&]() {
    // Mostly values from the pool, with many exact ties and zeros of both signs.
    const std::uint64_t r = rng.next();
    if (r % 8 == 0) return from_bits((r >> 8) % 2 ? 0x80000000u : 0u);
    if (r % 8 == 1) return pool[(r >> 8) % 64];
    return pool[(r >> 8) % pool.size()];
  };
  for (std::size_t i = 0; i < kInputsPerPrimitive; ++i) {
    const float a = pick(), b = pick(), c = pick();
    const float m = primitives::fmax(a, b);
    if (fp::is_nan(a) || fp::is_nan(b)) {
      ASSERT_EQ(bits(m), 0x7FC00000u);
    } else {
      ASSERT_EQ(bits(m), bits(total_max(fp::F(a), fp::F(b)))) << std::hexfloat << a << " " << b;
      ASSERT_EQ(bits(m), bits(primitives::fmax(b, a)));  // commutative
      if (!fp::is_nan(c)) {                              // associative
        ASSERT_EQ(bits(primitives::fmax(primitives::fmax(a, b), c)),
                  bits(primitives::fmax(a, primitives::fmax(b, c))));
      }
    }
    const float v = primitives::clamp(a, b, c);
    if (fp::is_nan(a) || fp::is_nan(b) || fp::is_nan(c)) {
      ASSERT_EQ(bits(v), 0x7FC00000u);
    } else {
      ASSERT_EQ(bits(v), bits(total_min(total_max(fp::F(a), fp::F(b)), fp::F(c))))
          << std::hexfloat << a << " " << b << " " << c;
    }
  }
}

}  // namespace
}  // namespace samebits
