// fp::FMA as the baseline (software) build compiles it: equal to an exact integer reference and to the
// C library's fmaf on over 10^6 inputs, including subnormal products, cancellation and overflow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "numerics/fp.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using fp::bits;
using fp::from_bits;
using testing::Rng;
using u128 = unsigned __int128;

// |f| = mantissa * 2^exponent exactly, for a finite float.
struct Unpacked {
  bool negative;
  std::uint64_t mantissa;
  int exponent;
};

Unpacked unpack(float f) {
  const std::uint32_t u = bits(f);
  const std::uint32_t field = (u >> 23) & 0xFFu;
  const std::uint64_t fraction = u & 0x7FFFFFu;
  if (field == 0) return {(u >> 31) != 0, fraction, -149};
  return {(u >> 31) != 0, fraction | 0x800000u, static_cast<int>(field) - 150};
}

int bit_length(u128 v) {
  int n = 0;
  while (v != 0) {
    v >>= 1;
    ++n;
  }
  return n;
}

// value * 2^shift, truncated, with every bit shifted out ORed into bit 0 (a sticky bit).
u128 shift_with_sticky(u128 value, int shift) {
  if (shift >= 0) return value << shift;
  if (-shift >= 128) return value != 0 ? 1 : 0;
  const u128 kept = value >> -shift;
  const bool lost = (kept << -shift) != value;
  return kept | (lost ? 1 : 0);
}

// The correctly rounded (nearest-even) float of (-1)^negative * magnitude * 2^exponent.
float round_to_float(bool negative, u128 magnitude, int exponent) {
  const std::uint32_t sign = negative ? 0x80000000u : 0u;
  if (magnitude == 0) return from_bits(sign);
  const int top = bit_length(magnitude) - 1 + exponent;  // the value lies in [2^top, 2^(top+1))
  const int lsb = std::max(top - 23, -149);              // exponent of the float's last mantissa bit
  const int drop = lsb - exponent;
  u128 m;
  if (drop <= 0) {
    m = magnitude << -drop;
  } else if (drop >= 127) {
    m = 0;  // below half of the smallest subnormal (the magnitude has fewer than 127 bits)
  } else {
    m = magnitude >> drop;
    const u128 rest = magnitude - (m << drop);
    const u128 half = u128{1} << (drop - 1);
    if (rest > half || (rest == half && (m & 1) != 0)) ++m;
  }
  int q = lsb;
  if (m == (u128{1} << 24)) {  // rounding carried into a new binade
    m >>= 1;
    ++q;
  }
  if (m == 0) return from_bits(sign);
  if (m < (u128{1} << 23)) return from_bits(sign | static_cast<std::uint32_t>(m));  // subnormal
  const int field = q + 150;
  if (field >= 255) return from_bits(sign | 0x7F800000u);
  return from_bits(sign | (static_cast<std::uint32_t>(field) << 23) |
                   (static_cast<std::uint32_t>(m) & 0x7FFFFFu));
}

// a * b + c with one rounding, computed exactly in integers. NaN results are returned as the
// canonical quiet NaN (only NaN-ness is compared).
float exact_fma(float a, float b, float c) {
  const float nan = from_bits(0x7FC00000u);
  if (fp::is_nan(a) || fp::is_nan(b) || fp::is_nan(c)) return nan;
  const bool product_negative = std::signbit(a) != std::signbit(b);
  if (fp::is_inf(a) || fp::is_inf(b)) {
    if (a == 0.0f || b == 0.0f) return nan;  // inf * 0
    if (fp::is_inf(c) && std::signbit(c) != product_negative) return nan;
    return from_bits(product_negative ? 0xFF800000u : 0x7F800000u);
  }
  if (fp::is_inf(c)) return c;
  const Unpacked ua = unpack(a), ub = unpack(b), uc = unpack(c);
  const u128 product = u128{ua.mantissa} * ub.mantissa;  // exact, at most 48 bits
  const int product_exponent = ua.exponent + ub.exponent;
  const u128 addend = uc.mantissa;
  if (product == 0 && addend == 0) {
    // Exact zero sum of two zeros: -0 only when both are -0 (round to nearest).
    return from_bits(product_negative && uc.negative ? 0x80000000u : 0u);
  }
  // Align both on a common exponent that puts the larger top bit at position 100; whatever falls
  // below bit 0 only matters as a sticky bit, far below the rounding position.
  const int product_top = product == 0 ? -100000 : bit_length(product) + product_exponent;
  const int addend_top = addend == 0 ? -100000 : bit_length(addend) + uc.exponent;
  const int base = std::max(product_top, addend_top) - 100;
  const u128 p = product == 0 ? 0 : shift_with_sticky(product, product_exponent - base);
  const u128 q = addend == 0 ? 0 : shift_with_sticky(addend, uc.exponent - base);
  if (product_negative == uc.negative) return round_to_float(product_negative, p + q, base);
  if (p == q) return from_bits(0u);  // exact cancellation gives +0
  return p > q ? round_to_float(product_negative, p - q, base) : round_to_float(uc.negative, q - p, base);
}

float random_with_exponent(Rng& rng, int unbiased) {
  const std::uint64_t r = rng.next();
  const int field = std::clamp(unbiased + 127, 0, 254);
  return from_bits(static_cast<std::uint32_t>((r >> 63) << 31) | (static_cast<std::uint32_t>(field) << 23) |
                   static_cast<std::uint32_t>(r & 0x7FFFFFu));
}

TEST(SoftwareFma, EqualsExactReferenceAndLibraryFma) {
#if defined(__FMA__)
  GTEST_SKIP() << "this translation unit has hardware FMA; the software path is not compiled here";
#endif
  Rng rng(2024);
  std::size_t checked = 0, subnormal_results = 0, overflows = 0, cancellations = 0;
  auto check = [&](float a, float b, float c) {
    const float got = fp::FMA(a, b, c);
    const float want = exact_fma(a, b, c);
    const float library = std::fma(a, b, c);  // glibc fmaf: the FMA instruction where the CPU has one
    ++checked;
    if (fp::is_nan(want)) {
      ASSERT_TRUE(fp::is_nan(got)) << std::hexfloat << a << " " << b << " " << c;
      ASSERT_TRUE(fp::is_nan(library));
      return;
    }
    ASSERT_EQ(bits(got), bits(want)) << std::hexfloat << a << " * " << b << " + " << c;
    ASSERT_EQ(bits(library), bits(want)) << "library fmaf disagrees with the exact reference";
    subnormal_results += fp::is_subnormal(got);
    overflows += fp::is_inf(got) && fp::is_finite(a) && fp::is_finite(b) && fp::is_finite(c);
    cancellations += fp::is_finite(c) && std::fabs(got) < std::fabs(c) * 0x1.0p-20f;  // most bits cancelled
  };
  // Random bit patterns over the whole range (NaN and infinity included).
  for (int i = 0; i < 200000; ++i)
    check(from_bits(static_cast<std::uint32_t>(rng.next())),
          from_bits(static_cast<std::uint32_t>(rng.next())),
          from_bits(static_cast<std::uint32_t>(rng.next())));
  // Products near and below the subnormal range, with small addends.
  for (int i = 0; i < 200000; ++i) {
    const int ea = static_cast<int>(rng.next() % 100) - 100;
    const int eb = -126 - ea - static_cast<int>(rng.next() % 30);
    const float c =
        rng.next() % 4 == 0 ? 0.0f : random_with_exponent(rng, -126 - static_cast<int>(rng.next() % 30));
    check(random_with_exponent(rng, ea), random_with_exponent(rng, eb), c);
  }
  // Products near overflow, with addends that push over or pull back.
  for (int i = 0; i < 150000; ++i) {
    const int ea = static_cast<int>(rng.next() % 127);
    const int eb = 126 - ea + static_cast<int>(rng.next() % 3);
    check(random_with_exponent(rng, ea), random_with_exponent(rng, eb),
          random_with_exponent(rng, 120 + static_cast<int>(rng.next() % 8)));
  }
  // Cancellation: c near -a*b, and exact ties on the rounding boundary.
  for (int i = 0; i < 250000; ++i) {
    const float a = random_with_exponent(rng, static_cast<int>(rng.next() % 60) - 30);
    const float b = random_with_exponent(rng, static_cast<int>(rng.next() % 60) - 30);
    const float rounded = a * b;
    const std::uint32_t nudge = static_cast<std::uint32_t>(rng.next() % 5);
    check(a, b, from_bits((bits(-rounded) + nudge - 2u)));
  }
  // Ties: 24-bit products whose exact value sits halfway between floats once c is added.
  for (int i = 0; i < 100000; ++i) {
    const float a = static_cast<float>((rng.next() % 4096) | 1);
    const float b = static_cast<float>((rng.next() % 4096) | 1);
    const float c = std::ldexp(static_cast<float>(rng.next() % (1 << 24)), static_cast<int>(rng.next() % 8));
    check(a, b, c);
    check(a, b, -c);
  }
  // Every combination of special values.
  const std::uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu,
                                    0x00800000u, 0x3F800000u, 0xBF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                    0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x3F000000u, 0x34000000u};
  for (std::uint32_t a : specials)
    for (std::uint32_t b : specials)
      for (std::uint32_t c : specials) check(from_bits(a), from_bits(b), from_bits(c));
  // Fill up to 10^6 with moderate random values.
  while (checked < 1000000)
    check(random_with_exponent(rng, static_cast<int>(rng.next() % 40) - 20),
          random_with_exponent(rng, static_cast<int>(rng.next() % 40) - 20),
          random_with_exponent(rng, static_cast<int>(rng.next() % 80) - 40));
  EXPECT_GE(checked, 1000000u);
  EXPECT_GT(subnormal_results, 10000u);
  EXPECT_GT(overflows, 10000u);
  EXPECT_GT(cancellations, 1000u);
}

// The integer reference itself, on cases worked out by hand.
TEST(SoftwareFma, ReferenceHandChecked) {
  EXPECT_EQ(exact_fma(2.0f, 3.0f, 1.0f), 7.0f);
  // (1 + 2^-23)^2 - 1 = 2^-22 + 2^-46 exactly; a separate product would round it to 2^-22.
  const float a = 1.0f + 0x1.0p-23f;
  EXPECT_EQ(exact_fma(a, a, -1.0f), 0x1.0p-22f + 0x1.0p-46f);
  EXPECT_EQ(bits(exact_fma(1.0f, 1.0f, -1.0f)), 0u) << "exact cancellation is +0";
  EXPECT_EQ(bits(exact_fma(-0.0f, 1.0f, -0.0f)), 0x80000000u);
  EXPECT_EQ(bits(exact_fma(0x1.0p-75f, 0x1.0p-75f, 0.0f)), 0u)
      << "2^-150: halfway between 0 and 2^-149, ties to even";
  EXPECT_EQ(bits(exact_fma(0x1.8p-75f, 0x1.0p-75f, 0.0f)), 1u) << "1.5 * 2^-150 rounds up to 2^-149";
  EXPECT_EQ(bits(exact_fma(0x1.0p127f, 2.0f, 0.0f)), 0x7F800000u) << "overflow";
  EXPECT_EQ(bits(exact_fma(0x1.0p127f, 2.0f, -0x1.0p127f)), 0x7F000000u) << "2^128 - 2^127 is finite";
}

}  // namespace
}  // namespace samebits
