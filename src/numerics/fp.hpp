// The fp32 notation of docs/numerics.md §1.2: bits, F (flush-to-signed-zero), FMA, MUL, DIV and the order
// key.
#pragma once

#include <bit>
#include <cstdint>

// Every helper here is forced inline: a header function compiled inside an AVX TU must never be
// emitted out of line, or the linker could hand that copy to baseline code (ODR across ISA flags).
#define SAMEBITS_ALWAYS_INLINE [[gnu::always_inline]] inline

namespace samebits::fp {

SAMEBITS_ALWAYS_INLINE std::uint32_t bits(float x) noexcept { return std::bit_cast<std::uint32_t>(x); }
SAMEBITS_ALWAYS_INLINE float from_bits(std::uint32_t u) noexcept { return std::bit_cast<float>(u); }

inline constexpr std::uint32_t kSignMask = 0x80000000u;
inline constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu;
inline constexpr std::uint32_t kInfBits = 0x7F800000u;
inline constexpr std::uint32_t kQuietNaNBits = 0x7FC00000u;
inline constexpr std::uint32_t kFltMinBits = 0x00800000u;

SAMEBITS_ALWAYS_INLINE float quiet_nan() noexcept { return from_bits(kQuietNaNBits); }
SAMEBITS_ALWAYS_INLINE bool is_nan(float x) noexcept { return (bits(x) & kAbsMask) > kInfBits; }
SAMEBITS_ALWAYS_INLINE bool is_inf(float x) noexcept { return (bits(x) & kAbsMask) == kInfBits; }
SAMEBITS_ALWAYS_INLINE bool is_finite(float x) noexcept { return (bits(x) & kAbsMask) < kInfBits; }
SAMEBITS_ALWAYS_INLINE bool is_subnormal(float x) noexcept {
  std::uint32_t a = bits(x) & kAbsMask;
  return a != 0 && a < kFltMinBits;
}

// F(x): a subnormal becomes the zero of its sign; everything else passes unchanged.
SAMEBITS_ALWAYS_INLINE float F(float x) noexcept {
  std::uint32_t u = bits(x);
  std::uint32_t a = u & kAbsMask;
  return (a != 0 && a < kFltMinBits) ? from_bits(u & kSignMask) : x;
}

// One IEEE fused multiply-add with a single rounding. With hardware FMA compiled in this is one
// instruction; otherwise the exact product goes through double and the sum is rounded to odd
// before the final rounding to float, which is correctly rounded (53 >= 24 + 2 bits). No libm.
SAMEBITS_ALWAYS_INLINE float FMA(float a, float b, float c) noexcept {
#if defined(__FMA__)
  return __builtin_fmaf(a, b, c);
#else
  double product = static_cast<double>(a) * static_cast<double>(b);  // exact: 48 <= 53 bits
  double addend = static_cast<double>(c);
  double sum = product + addend;
  std::uint64_t sum_bits = std::bit_cast<std::uint64_t>(sum);
  if ((sum_bits & 0x7FF0000000000000ull) != 0x7FF0000000000000ull && sum != 0.0) {
    double addend_part = sum - product;  // TwoSum: product + addend == sum + error exactly
    double product_part = sum - addend_part;
    double error = (product - product_part) + (addend - addend_part);
    if (error != 0.0 && (sum_bits & 1u) == 0) {
      bool away_from_zero = (error > 0.0) == (sum > 0.0);
      sum = std::bit_cast<double>(away_from_zero ? sum_bits + 1 : sum_bits - 1);
    }
  }
  return static_cast<float>(sum);
#endif
}

// A correctly rounded product that is never contracted into a following add.
// Every translation unit is compiled with -ffp-contract=off, so a plain product stays a product.
SAMEBITS_ALWAYS_INLINE float MUL(float a, float b) noexcept { return a * b; }

// DIV(a, b) = F(F(a) / F(b)).
SAMEBITS_ALWAYS_INLINE float DIV(float a, float b) noexcept { return F(F(a) / F(b)); }

// Total-order key used by fmax and clamp: orders every non-NaN float, with -0.0 < +0.0.
SAMEBITS_ALWAYS_INLINE std::uint32_t key(float v) noexcept {
  std::uint32_t u = bits(v);
  return (u & kSignMask) ? ~u : (u | kSignMask);
}

// The smallest normal float32.
SAMEBITS_ALWAYS_INLINE float flt_min() noexcept { return from_bits(kFltMinBits); }

}  // namespace samebits::fp
