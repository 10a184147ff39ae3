// Bit-exact checks of bf16 narrowing/widening and int8 quantization/dequantization (docs/formats.md §5.2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <samebits/errors.hpp>
#include <samebits/lowbit.hpp>
#include <vector>

#include "numerics/fp.hpp"

namespace lb = samebits::lowbit;
using samebits::fp::bits;
using samebits::fp::from_bits;

namespace {

constexpr std::uint32_t kPosInf = 0x7F800000u;
constexpr std::uint32_t kNegInf = 0xFF800000u;

// ---------------------------------------------------------------- independent oracles
// These reach the answer by a different route than the library: the bf16 oracle rounds in double
// arithmetic on the value; the int8 oracle rounds the exact integer significand with integer shifts.

bool oracle_is_subnormal(float x) { return std::fpclassify(x) == FP_SUBNORMAL; }

std::uint16_t oracle_bf16(float x) {
  if (oracle_is_subnormal(x)) x = std::signbit(x) ? -0.0f : 0.0f;
  std::uint32_t u = bits(x);
  std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7FC0u | ((u >> 16) & 0x003Fu));
  if (std::isinf(x)) return static_cast<std::uint16_t>(sign | 0x7F80u);
  if (x == 0.0f) return sign;
  int k = 0;
  double m = std::frexp(std::fabs(static_cast<double>(x)), &k);  // |x| = m * 2^k, m in [0.5, 1)
  double quantum = std::ldexp(1.0, k - 8);                       // bf16 keeps 8 significant bits
  double q = m * 256.0;                                          // |x| / quantum, exact
  double whole = std::floor(q);
  double frac = q - whole;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(whole, 2.0) == 1.0)) whole += 1.0;
  double rounded = whole * quantum;
  if (rounded >= std::ldexp(1.0, 128)) return static_cast<std::uint16_t>(sign | 0x7F80u);
  std::uint32_t rb = bits(static_cast<float>(rounded));  // exact: 8 significant bits, normal range
  EXPECT_EQ(rb & 0xFFFFu, 0u) << "oracle produced a non-bf16 value";
  return static_cast<std::uint16_t>(sign | (rb >> 16));
}

float oracle_flush(float x) {
  if (oracle_is_subnormal(x)) return std::signbit(x) ? -0.0f : 0.0f;
  return x;
}

std::int32_t oracle_row_exponent(const std::vector<float>& row) {
  double best = 0.0;
  for (float v : row) {
    float f = oracle_flush(v);
    if (std::isnan(f)) continue;
    best = std::max(best, std::fabs(static_cast<double>(f)));
  }
  if (best == 0.0) return 0;
  if (std::isinf(best)) return 128 - 6;  // the infinity reads exponent field 255
  int k = 0;
  std::frexp(best, &k);  // floor(log2 best) = k - 1
  return (k - 1) - 6;
}

std::int8_t oracle_code(float x, std::int32_t e) {
  x = oracle_flush(x);
  if (std::isnan(x)) return 0;
  bool negative = std::signbit(x);
  std::int64_t magnitude_code = 0;
  if (-e > 127) {  // the scale is the infinity: 0 * inf is NaN (code 0), anything else saturates
    magnitude_code = (x == 0.0f) ? 0 : 127;
  } else if (std::isinf(x)) {
    magnitude_code = 127;
  } else if (x != 0.0f) {
    int k = 0;
    double m = std::frexp(std::fabs(static_cast<double>(x)), &k);
    std::int64_t significand = static_cast<std::int64_t>(std::ldexp(m, 24));  // exact 24-bit integer
    int shift = (k - 24) - e;                                                 // value = significand * 2^shift
    if (shift >= 0) {
      magnitude_code = shift > 20 ? 1000 : (significand << shift);
    } else if (-shift > 40) {
      magnitude_code = 0;
    } else {
      int n = -shift;
      std::int64_t q = significand >> n;
      std::int64_t rem = significand & ((std::int64_t{1} << n) - 1);
      std::int64_t half = std::int64_t{1} << (n - 1);
      if (rem > half || (rem == half && (q & 1))) ++q;
      magnitude_code = q;
    }
    if (magnitude_code > 127) magnitude_code = 127;
  }
  return static_cast<std::int8_t>(negative ? -magnitude_code : magnitude_code);
}

float oracle_dequantize(std::int8_t code, std::int32_t e) {
  if (e > 127) {
    if (code == 0) return std::numeric_limits<float>::quiet_NaN();
    return code > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  if (e < -126) return code < 0 ? -0.0f : 0.0f;
  double v = std::ldexp(static_cast<double>(code), e);
  if (std::fabs(v) >= std::ldexp(1.0, 128)) {
    return v > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(v);  // exact: at most 7 significant bits, at least 2^-126 in magnitude
}

std::uint32_t same_bits_or_both_nan(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  return bits(a) ^ bits(b);
}

// Random float32 inputs: raw bit patterns (every class), values spread over exponents, and specials.
std::vector<float> random_values(std::mt19937_64& rng, std::size_t count) {
  static const std::uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x007FFFFFu,
                                           0x00800000u, 0x80800000u, kPosInf,     kNegInf,     0x7FC00000u,
                                           0xFFC00000u, 0x7F800001u, 0xFFBFFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                           0x7F7F8000u, 0x3F808000u, 0x3F818000u, 0x477FE000u, 0x38000000u};
  std::vector<float> out(count);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-140, 130);
  std::uniform_int_distribution<std::size_t> special_index(0, std::size(specials) - 1);
  for (float& v : out) {
    int k = kind(rng);
    if (k <= 3) {
      v = from_bits(any_bits(rng));
    } else if (k <= 7) {
      v = static_cast<float>(std::ldexp(unit(rng), exponent(rng)));
    } else if (k == 8) {
      // A pattern whose low 16 bits are exactly the bf16 halfway point.
      v = from_bits((any_bits(rng) & 0xFFFF0000u) | 0x8000u);
    } else {
      v = from_bits(specials[special_index(rng)]);
    }
  }
  return out;
}

// ---------------------------------------------------------------- bf16, hand-checked values

TEST(LowbitBf16, HandCheckedNarrowing) {
  // Each expectation was worked out by hand from the float32 bit pattern: keep the top 16 bits and
  // round on the discarded low 16 (halfway 0x8000 goes to the even top).
  EXPECT_EQ(lb::bf16_from_f32(1.0f), 0x3F80u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x3F808000u)), 0x3F80u);  // tie, 0x3F80 is even: down
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x3F818000u)), 0x3F82u);  // tie, 0x3F81 is odd: up
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x3F808001u)), 0x3F81u);  // just above the tie: up
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x3F807FFFu)), 0x3F80u);  // just below the tie: down
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0xBF818000u)), 0xBF82u);  // ties are symmetric in sign
  EXPECT_EQ(lb::bf16_from_f32(0.0f), 0x0000u);
  EXPECT_EQ(lb::bf16_from_f32(-0.0f), 0x8000u);
  // 1e-40 is the subnormal 0x000116C2: flushed first, so a signed zero (not a bf16 subnormal 0x0001).
  EXPECT_EQ(lb::bf16_from_f32(1e-40f), 0x0000u);
  EXPECT_EQ(lb::bf16_from_f32(-1e-40f), 0x8000u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x007FFFFFu)), 0x0000u);  // would round up to FLT_MIN unflushed
  // 65504 = 0x477FE000 lies between 65280 (0x477F) and 65536 (0x4780), above the midpoint 65408.
  EXPECT_EQ(lb::bf16_from_f32(65504.0f), 0x4780u);
  EXPECT_EQ(lb::bf16_from_f32(0.000030517578125f), 0x3800u);  // 2^-15 = 0x38000000, exact
  // 3e38 = 0x7F61B1E6 is below the largest bf16 (0x7F7F, about 3.39e38): rounds up to 0x7F62.
  EXPECT_EQ(lb::bf16_from_f32(3e38f), 0x7F62u);
  // Overflow: FLT_MAX and the exact tie above 0x7F7F (odd) round to the infinity.
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x7F7FFFFFu)), 0x7F80u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x7F7F8000u)), 0x7F80u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0xFF7F8000u)), 0xFF80u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x7F7F7FFFu)), 0x7F7Fu);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(kPosInf)), 0x7F80u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(kNegInf)), 0xFF80u);
}

TEST(LowbitBf16, NaNKeepsSignAndTopPayloadAndIsQuieted) {
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x7FC00000u)), 0x7FC0u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0xFFC00000u)), 0xFFC0u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x7FA12345u)), 0x7FE1u);  // signalling, payload 0x21 kept
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0xFF812345u)), 0xFFC1u);  // negative signalling
  // Payload only in the discarded bits: plain rounding would give the infinity 0x7F80; quieting keeps NaN.
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x7F800001u)), 0x7FC0u);
  EXPECT_EQ(lb::bf16_from_f32(from_bits(0x7FFFFFFFu)), 0x7FFFu);  // no carry out of the NaN
}

TEST(LowbitBf16, WideningIsTheShift) {
  EXPECT_EQ(bits(lb::f32_from_bf16(0x3F80u)), 0x3F800000u);
  EXPECT_EQ(bits(lb::f32_from_bf16(0x8000u)), 0x80000000u);
  EXPECT_EQ(bits(lb::f32_from_bf16(0x0001u)), 0x00010000u);  // a bf16 subnormal widens unflushed
  EXPECT_EQ(bits(lb::f32_from_bf16(0x7F81u)), 0x7F810000u);  // a signalling NaN widens unchanged
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    ASSERT_EQ(bits(lb::f32_from_bf16(static_cast<std::uint16_t>(b))), b << 16);
  }
}

// f16 widening against an oracle that builds each value in double from its fields (exact: every f16 is a
// double and a float32), over all 65,536 patterns; NaNs keep sign and payload.
TEST(LowbitF16, ExhaustiveWideningEqualsTheFieldOracle) {
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const std::uint32_t sign = b >> 15, exponent = (b >> 10) & 0x1Fu, mantissa = b & 0x3FFu;
    std::uint32_t want;
    if (exponent == 31) {
      want = (sign << 31) | 0x7F800000u | (mantissa << 13);
    } else {
      const double magnitude =
          exponent == 0 ? std::ldexp(static_cast<double>(mantissa), -24)
                        : std::ldexp(static_cast<double>(1024 + mantissa), static_cast<int>(exponent) - 25);
      want = bits(static_cast<float>(sign ? -magnitude : magnitude));
    }
    ASSERT_EQ(bits(lb::f32_from_f16(h)), want) << std::hex << b;
  }
  std::vector<std::uint16_t> in = {0x3C00u, 0x0001u, 0x8400u, 0x7C01u};
  std::vector<float> out(in.size());
  lb::f32_from_f16_array(in.data(), in.size(), out.data());
  EXPECT_EQ(bits(out[0]), 0x3F800000u);  // 1.0
  EXPECT_EQ(bits(out[1]), 0x33800000u);  // 2^-24, the smallest subnormal, as a normal float32
  EXPECT_EQ(bits(out[2]), 0xB8800000u);  // -2^-14
  EXPECT_EQ(bits(out[3]), 0x7F802000u);  // a signalling NaN keeps its payload
}

TEST(LowbitBf16, ExhaustiveRoundTripOverAllBf16Patterns) {
  // Every bf16 pattern widened and narrowed again: unchanged, except bf16 subnormals (flushed to the
  // signed zero) and NaNs (quieted).
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    std::uint16_t h = static_cast<std::uint16_t>(b);
    std::uint16_t back = lb::bf16_from_f32(lb::f32_from_bf16(h));
    bool subnormal = (h & 0x7F80u) == 0 && (h & 0x007Fu) != 0;
    bool nan = (h & 0x7F80u) == 0x7F80u && (h & 0x007Fu) != 0;
    std::uint16_t expected = subnormal ? static_cast<std::uint16_t>(h & 0x8000u)
                             : nan     ? static_cast<std::uint16_t>(h | 0x0040u)
                                       : h;
    ASSERT_EQ(back, expected) << std::hex << b;
    // Narrowing is idempotent on its own output.
    ASSERT_EQ(lb::bf16_from_f32(lb::f32_from_bf16(back)), back) << std::hex << b;
  }
}

TEST(LowbitBf16, MatchesDoubleOracleOnRandomValues) {
  std::mt19937_64 rng(20260917);
  std::vector<float> values = random_values(rng, 300000);
  std::vector<std::uint16_t> got(values.size());
  lb::bf16_from_f32_array(values.data(), values.size(), got.data());
  std::size_t nan_count = 0, tie_count = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(got[i], oracle_bf16(values[i])) << "input bits 0x" << std::hex << bits(values[i]);
    ASSERT_EQ(lb::bf16_from_f32(values[i]), got[i]);
    nan_count += std::isnan(values[i]);
    tie_count += (bits(values[i]) & 0xFFFFu) == 0x8000u;
  }
  EXPECT_GT(nan_count, 100u);  // the sample really exercises every branch
  EXPECT_GT(tie_count, 1000u);
  std::vector<float> widened(values.size());
  lb::f32_from_bf16_array(got.data(), got.size(), widened.data());
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(bits(widened[i]), std::uint32_t{got[i]} << 16);
}

// ---------------------------------------------------------------- pow2

TEST(LowbitPow2, RangeAndSaturation) {
  EXPECT_EQ(bits(lb::pow2(0)), 0x3F800000u);
  EXPECT_EQ(bits(lb::pow2(-15)), 0x38000000u);
  EXPECT_EQ(bits(lb::pow2(127)), 0x7F000000u);
  EXPECT_EQ(bits(lb::pow2(-126)), 0x00800000u);  // FLT_MIN
  EXPECT_EQ(bits(lb::pow2(128)), kPosInf);
  EXPECT_EQ(bits(lb::pow2(1000)), kPosInf);
  EXPECT_EQ(bits(lb::pow2(-127)), 0x00000000u);  // +0.0, not the subnormal 2^-127
  EXPECT_EQ(bits(lb::pow2(std::numeric_limits<std::int32_t>::min())), 0x00000000u);
  EXPECT_EQ(bits(lb::pow2(std::numeric_limits<std::int32_t>::max())), kPosInf);
  for (int e = -126; e <= 127; ++e) ASSERT_EQ(static_cast<double>(lb::pow2(e)), std::ldexp(1.0, e));
}

// ---------------------------------------------------------------- int8, hand-checked rows

struct Quantized {
  std::vector<std::int8_t> codes;
  std::int32_t exponent;
};

Quantized quantize(const std::vector<float>& row) {
  Quantized q{std::vector<std::int8_t>(row.size()), 12345};
  lb::quantize_int8_row(row.data(), row.size(), q.codes.data(), &q.exponent);
  return q;
}

TEST(LowbitInt8, HandCheckedRows) {
  // Expectations worked out by hand: e = (exponent field of absmax) - 133, code = rne(x * 2^-e) from the
  // float32 significand (see each comment), clamped to [-127, 127].
  {
    Quantized q = quantize({0.0f, -0.0f, 0.0f, 0.0f});  // all zero (incl. -0): e = 0, codes 0
    EXPECT_EQ(q.exponent, 0);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{0, 0, 0, 0}));
  }
  {
    // Subnormals flush before the absmax: 1.0 (field 127) gives e = -6, so +-1.0 -> +-64.
    Quantized q = quantize({1e-40f, -1e-40f, 1.0f, -1.0f});
    EXPECT_EQ(q.exponent, -6);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{0, 0, 64, -64}));
    Quantized only_subnormal = quantize({1e-40f, -1e-40f});
    EXPECT_EQ(only_subnormal.exponent, 0);
    EXPECT_EQ(only_subnormal.codes, (std::vector<std::int8_t>{0, 0}));
  }
  {
    // absmax 2.5 (field 128): e = -5, scale 32: 16, 48, 80, -80 exactly.
    Quantized q = quantize({0.5f, 1.5f, 2.5f, -2.5f});
    EXPECT_EQ(q.exponent, -5);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{16, 48, 80, -80}));
  }
  {
    // absmax 100 (field 133): e = 0, so halves tie to even: 2.5->2, 3.5->4, -2.5->-2, 0.5->0, -1.5->-2.
    Quantized q = quantize({100.0f, 2.5f, 3.5f, -2.5f, 0.5f, -1.5f});
    EXPECT_EQ(q.exponent, 0);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{100, 2, 4, -2, 0, -2}));
  }
  {
    // The 1e-30 row: absmax 4e-30 (0x0EA24260, field 29) gives e = -104. Significands: 1e-30 =
    // 1.26765*2^-100 -> 20.28 -> 20; 2e-30 -> 40.56 -> 41; -3e-30 = -1.90148*2^-99 -> -60.85 -> -61;
    // 4e-30 -> 81.13 -> 81.
    Quantized q = quantize({1e-30f, 2e-30f, -3e-30f, 4e-30f});
    EXPECT_EQ(q.exponent, -104);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{20, 41, -61, 81}));
  }
  {
    // The 3e38 row: absmax 3e38 (0x7F61B1E6, field 254) gives e = 121; 3e38 = 1.76324*2^127 ->
    // 112.85 -> 113; -1e38 = -1.17549*2^126 -> -37.62 -> -38; 1.0 and 2.0 scale to about 2^-121 -> 0.
    Quantized q = quantize({3e38f, -1e38f, 1.0f, 2.0f});
    EXPECT_EQ(q.exponent, 121);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{113, -38, 0, 0}));
  }
  {
    // 65504 (field 142): e = 9; 65504 / 512 = 127.9375 rounds to 128 and clamps to 127; 2^-15 and 100
    // scale below one half.
    Quantized q = quantize({65504.0f, 0.000030517578125f, -0.000030517578125f, 100.0f});
    EXPECT_EQ(q.exponent, 9);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{127, 0, 0, 0}));
  }
  {
    // -128 is never produced: -127.5 (e = 0) rounds to the even -128 and clamps to -127; 127.5 likewise.
    Quantized q = quantize({-127.5f, 127.5f, -64.0f});
    EXPECT_EQ(q.exponent, 0);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{-127, 127, -64}));
    // A power of two -128 only moves the exponent: -128 (field 134) gives e = 1 and code -64.
    Quantized p = quantize({-128.0f, 1.0f});
    EXPECT_EQ(p.exponent, 1);
    EXPECT_EQ(p.codes, (std::vector<std::int8_t>{-64, 0}));
  }
  {
    // NaN never wins the absmax and codes to 0; an infinity wins (field 255 -> e = 122) and saturates.
    float nan = std::numeric_limits<float>::quiet_NaN();
    float inf = std::numeric_limits<float>::infinity();
    Quantized q = quantize({nan, 1.0f, -inf, 2.0f});
    EXPECT_EQ(q.exponent, 122);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{0, 0, -127, 0}));
    Quantized all_nan = quantize({nan, -nan});
    EXPECT_EQ(all_nan.exponent, 0);
    EXPECT_EQ(all_nan.codes, (std::vector<std::int8_t>{0, 0}));
    Quantized nan_and_finite = quantize({nan, 3.0f});  // 3.0 (field 128): e = -5, 96
    EXPECT_EQ(nan_and_finite.exponent, -5);
    EXPECT_EQ(nan_and_finite.codes, (std::vector<std::int8_t>{0, 96}));
  }
  {
    // A row exponent below -126: absmax FLT_MIN (field 1) gives e = -132, so the scale 2^132 is the
    // infinity: nonzero values saturate, a zero is 0 * inf = NaN and codes 0.
    float m = from_bits(0x00800000u);
    Quantized q = quantize({m, -m, 0.0f, -0.0f});
    EXPECT_EQ(q.exponent, -132);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{127, -127, 0, 0}));
  }
  {
    // A wide-range row: absmax 1000 = 1.953125*2^9 (field 136), e = 3: 125, -0.4375 -> 0, 0.001 -> 0,
    // 7.0 / 8 = 0.875 -> 1, -12.0 / 8 = -1.5 -> -2 (tie to even).
    Quantized q = quantize({1000.0f, -3.5f, 0.001f, 7.0f, -12.0f});
    EXPECT_EQ(q.exponent, 3);
    EXPECT_EQ(q.codes, (std::vector<std::int8_t>{125, 0, 0, 1, -2}));
  }
  {
    Quantized empty = quantize({});  // no columns: absmax 0
    EXPECT_EQ(empty.exponent, 0);
  }
}

TEST(LowbitInt8, HandCheckedDequantization) {
  EXPECT_EQ(static_cast<double>(lb::dequantize_int8(113, 121)), std::ldexp(113.0, 121));
  EXPECT_EQ(lb::dequantize_int8(127, 9), 65024.0f);
  EXPECT_EQ(lb::dequantize_int8(-64, -6), -1.0f);
  EXPECT_EQ(bits(lb::dequantize_int8(0, 0)), 0u);
  // Exponent 127: 1 * 2^127 is finite, 2 * 2^127 overflows to the infinity.
  EXPECT_EQ(bits(lb::dequantize_int8(1, 127)), 0x7F000000u);
  EXPECT_EQ(bits(lb::dequantize_int8(2, 127)), kPosInf);
  EXPECT_EQ(bits(lb::dequantize_int8(-127, 127)), kNegInf);
  // Exponent above 127: pow2 is the infinity; a zero code gives 0 * inf = NaN.
  EXPECT_EQ(bits(lb::dequantize_int8(1, 128)), kPosInf);
  EXPECT_EQ(bits(lb::dequantize_int8(-1, 200)), kNegInf);
  EXPECT_TRUE(samebits::fp::is_nan(lb::dequantize_int8(0, 128)));
#if defined(__x86_64__) || defined(_M_X64)
  // SSE's default NaN for an invalid operation ("QNaN floating-point indefinite") is 0xFFC00000.
  EXPECT_EQ(bits(lb::dequantize_int8(0, 128)), 0xFFC00000u);
#endif
  // Exponent -126: 1 * 2^-126 is FLT_MIN, normal, kept. Below -126: pow2 is +0.0, so signed zeros.
  EXPECT_EQ(bits(lb::dequantize_int8(1, -126)), 0x00800000u);
  EXPECT_EQ(bits(lb::dequantize_int8(5, -127)), 0x00000000u);
  EXPECT_EQ(bits(lb::dequantize_int8(-5, -127)), 0x80000000u);
  EXPECT_EQ(bits(lb::dequantize_int8(0, -300)), 0x00000000u);
  // -128 is not produced by the quantizer but is a legal stored code: 128 * 2^e exactly.
  EXPECT_EQ(lb::dequantize_int8(-128, 0), -128.0f);
}

// ---------------------------------------------------------------- int8, oracle on random rows

std::vector<float> random_row(std::mt19937_64& rng, std::size_t cols) {
  std::uniform_int_distribution<int> kind(0, 5);
  int k = kind(rng);
  std::vector<float> row(cols);
  if (k == 0) return random_values(rng, cols);  // every class, all exponents
  std::uniform_int_distribution<int> band_center(-150, 128);
  std::uniform_int_distribution<int> band_width(0, k == 1 ? 60 : 6);
  int center = band_center(rng);
  int width = band_width(rng);
  std::uniform_int_distribution<int> exponent(center - width, center + width);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (float& v : row) v = static_cast<float>(std::ldexp(unit(rng), exponent(rng)));
  if (k == 2) {  // sprinkle specials into an ordinary row
    std::vector<float> specials = random_values(rng, 4);
    std::uniform_int_distribution<std::size_t> where(0, cols - 1);
    for (float s : specials) row[where(rng)] = s;
  }
  if (k == 3) {  // exact halves after scaling: multiples of 2^(e-1)
    std::uniform_int_distribution<int> half_units(-255, 255);
    for (float& v : row) v = static_cast<float>(std::ldexp(half_units(rng), center - 1));
  }
  return row;
}

TEST(LowbitInt8, MatchesIntegerOracleOnRandomRows) {
  std::mt19937_64 rng(0x5A3EB175);
  std::uniform_int_distribution<std::size_t> width(1, 40);
  std::size_t elements = 0, saturated_scale_rows = 0, nan_inputs = 0;
  while (elements < 200000) {
    std::size_t cols = width(rng);
    std::vector<float> row = random_row(rng, cols);
    Quantized q = quantize(row);
    std::int32_t e = oracle_row_exponent(row);
    ASSERT_EQ(q.exponent, e);
    saturated_scale_rows += (-e > 127);
    for (std::size_t c = 0; c < cols; ++c) {
      ASSERT_EQ(q.codes[c], oracle_code(row[c], e))
          << "x bits 0x" << std::hex << bits(row[c]) << std::dec << " e " << e;
      ASSERT_NE(q.codes[c], -128);
      ASSERT_EQ(bits(lb::dequantize_int8(q.codes[c], e)), bits(oracle_dequantize(q.codes[c], e)));
      nan_inputs += std::isnan(row[c]);
    }
    elements += cols;
  }
  EXPECT_GT(saturated_scale_rows, 10u);
  EXPECT_GT(nan_inputs, 100u);
}

TEST(LowbitInt8, DequantizationMatchesOracleForEveryCodeAndExponent) {
  for (int e = -300; e <= 300; ++e) {
    for (int code = -128; code <= 127; ++code) {
      float got = lb::dequantize_int8(static_cast<std::int8_t>(code), e);
      float want = oracle_dequantize(static_cast<std::int8_t>(code), e);
      ASSERT_EQ(same_bits_or_both_nan(got, want), 0u) << code << " * 2^" << e;
    }
  }
}

TEST(LowbitInt8, MatrixHelpersAgreeWithRowsAndRequantizingIsIdempotent) {
  std::mt19937_64 rng(7);
  const std::size_t rows = 37, cols = 29;
  std::vector<float> w(rows * cols);
  std::uniform_real_distribution<float> unit(-0.125f, 0.125f);
  for (float& v : w) v = unit(rng);
  w[5] = 3e38f;  // one large row
  w[cols] = 1e-30f;
  std::vector<std::int8_t> codes(rows * cols);
  std::vector<std::int32_t> exponents(rows);
  lb::quantize_int8_matrix(w.data(), rows, cols, codes.data(), exponents.data());
  for (std::size_t r = 0; r < rows; ++r) {
    Quantized q = quantize(std::vector<float>(w.begin() + r * cols, w.begin() + (r + 1) * cols));
    ASSERT_EQ(exponents[r], q.exponent);
    ASSERT_TRUE(std::equal(q.codes.begin(), q.codes.end(), codes.begin() + r * cols));
  }
  std::vector<float> materialized(rows * cols);
  lb::dequantize_int8_matrix(codes.data(), exponents.data(), rows, cols, materialized.data());
  for (std::size_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(bits(materialized[i]), bits(lb::dequantize_int8(codes[i], exponents[i / cols])));
  }
  // Quantizing the materialized weights gives the same codes and exponents (values are code * 2^e).
  std::vector<std::int8_t> codes_again(rows * cols);
  std::vector<std::int32_t> exponents_again(rows);
  lb::quantize_int8_matrix(materialized.data(), rows, cols, codes_again.data(), exponents_again.data());
  EXPECT_EQ(codes_again, codes);
  EXPECT_EQ(exponents_again, exponents);
}

// ---------------------------------------------------------------- PackedMatrix

TEST(LowbitPacked, FormatNames) {
  EXPECT_STREQ(lb::format_name(lb::WeightFormat::Float32), "float32");
  EXPECT_STREQ(lb::format_name(lb::WeightFormat::BFloat16), "bfloat16");
  EXPECT_STREQ(lb::format_name(lb::WeightFormat::Int8), "int8");
  EXPECT_EQ(lb::format_from_name("bfloat16"), lb::WeightFormat::BFloat16);
  EXPECT_EQ(lb::format_from_name("int8"), lb::WeightFormat::Int8);
  EXPECT_EQ(lb::format_from_name("float32"), lb::WeightFormat::Float32);
  EXPECT_FALSE(lb::format_from_name("float16").has_value());
  EXPECT_FALSE(lb::format_from_name("").has_value());
}

TEST(LowbitPacked, PackAndMaterializeEveryFormat) {
  const std::size_t rows = 7, cols = 4;
  std::vector<float> w = {0.0f,
                          -0.0f,
                          0.0f,
                          0.0f,
                          1e-40f,
                          -1e-40f,
                          1.0f,
                          -1.0f,
                          0.5f,
                          1.5f,
                          2.5f,
                          -2.5f,
                          1e-30f,
                          2e-30f,
                          -3e-30f,
                          4e-30f,
                          3e38f,
                          -1e38f,
                          1.0f,
                          2.0f,
                          0.1f,
                          -0.2f,
                          0.3f,
                          -0.4f,
                          65504.0f,
                          0.000030517578125f,
                          -0.000030517578125f,
                          100.0f};
  lb::PackedMatrix f = lb::pack_matrix(w.data(), rows, cols, lb::WeightFormat::Float32);
  EXPECT_EQ(f.f32, w);
  EXPECT_TRUE(f.bf16_bits.empty() && f.codes.empty() && f.exponents.empty());
  EXPECT_EQ(lb::materialize(f), w);

  lb::PackedMatrix b = lb::pack_matrix(w.data(), rows, cols, lb::WeightFormat::BFloat16);
  ASSERT_EQ(b.bf16_bits.size(), rows * cols);
  EXPECT_TRUE(b.f32.empty() && b.codes.empty());
  std::vector<float> bw = lb::materialize(b);
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(b.bf16_bits[i], oracle_bf16(w[i]));
    EXPECT_EQ(bits(bw[i]), std::uint32_t{b.bf16_bits[i]} << 16);
  }

  lb::PackedMatrix q = lb::pack_matrix(w.data(), rows, cols, lb::WeightFormat::Int8);
  ASSERT_EQ(q.codes.size(), rows * cols);
  ASSERT_EQ(q.exponents.size(), rows);
  EXPECT_EQ(q.exponents, (std::vector<std::int32_t>{0, -6, -5, -104, 121, -8, 9}));
  std::vector<float> qw = lb::materialize(q);
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::int32_t e = q.exponents[i / cols];
    EXPECT_EQ(q.codes[i], oracle_code(w[i], e));
    EXPECT_EQ(bits(qw[i]), bits(oracle_dequantize(q.codes[i], e)));
  }
  // The 0.1 row: absmax 0.4 = 1.6*2^-2 (field 125) gives e = -8: 0.1*256 = 25.6 -> 26, -51.2 -> -51,
  // 76.8 -> 77, -102.4 -> -102 (hand-checked).
  EXPECT_EQ(std::vector<std::int8_t>(q.codes.begin() + 20, q.codes.begin() + 24),
            (std::vector<std::int8_t>{26, -51, 77, -102}));
}

TEST(LowbitPacked, MaterializeRefusesInconsistentSizes) {
  lb::PackedMatrix p;
  p.format = lb::WeightFormat::Int8;
  p.rows = 2;
  p.cols = 3;
  p.codes.assign(6, 1);
  p.exponents.assign(1, 0);
  EXPECT_THROW(lb::materialize(p), samebits::Error);
  p.format = lb::WeightFormat::BFloat16;
  p.bf16_bits.assign(5, 0);
  EXPECT_THROW(lb::materialize(p), samebits::Error);
  p.format = lb::WeightFormat::Float32;
  EXPECT_THROW(lb::materialize(p), samebits::Error);
  lb::PackedMatrix empty = lb::pack_matrix(nullptr, 0, 5, lb::WeightFormat::Int8);
  EXPECT_TRUE(lb::materialize(empty).empty());
}

}  // namespace
