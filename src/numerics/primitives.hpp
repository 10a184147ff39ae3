// The exact scalar primitives of docs/numerics.md §2 and their Appendix A literals.
#pragma once

#include <bit>
#include <cstdint>

#include "numerics/checked_literal.hpp"

namespace samebits::primitives {

// Every decimal literal of the step lists, rounded once to float32, each checked against docs/numerics.md
// Appendix A. They live here (constexpr data, no code) so the scalar primitives and the SIMD twins in
// vector_math_*.cpp share one spelling.
namespace lit {

// expf
SAMEBITS_FLOAT_LITERAL(kExpOverflowBound, 88.722835f, 0x42B17217u);
SAMEBITS_FLOAT_LITERAL(kExpUnderflowBound, -87.33655f, 0xC2AEAC50u);
SAMEBITS_FLOAT_LITERAL(kLog2e, 1.4426950408889634f, 0x3FB8AA3Bu);
SAMEBITS_FLOAT_LITERAL(kExpLn2Hi, -0.693359375f, 0xBF318000u);
SAMEBITS_FLOAT_LITERAL(kExpLn2Lo, 2.12194440e-4f, 0x395E8083u);
SAMEBITS_FLOAT_LITERAL(kExpP0, 1.9875691500e-4f, 0x39506967u);
SAMEBITS_FLOAT_LITERAL(kExpP1, 1.3981999507e-3f, 0x3AB743CEu);
SAMEBITS_FLOAT_LITERAL(kExpP2, 8.3334519073e-3f, 0x3C088908u);
SAMEBITS_FLOAT_LITERAL(kExpP3, 4.1665795894e-2f, 0x3D2AA9C1u);
SAMEBITS_FLOAT_LITERAL(kExpP4, 1.6666665459e-1f, 0x3E2AAAAAu);
SAMEBITS_FLOAT_LITERAL(kExpP5, 5.0000001201e-1f, 0x3F000000u);
SAMEBITS_FLOAT_LITERAL(kFltMin, 1.1754943508222875e-38f, 0x00800000u);

// logf / log_core / log1pf
SAMEBITS_FLOAT_LITERAL(kSqrtHalf, 0.7071067811865476f, 0x3F3504F3u);
SAMEBITS_FLOAT_LITERAL(kLogP0, 7.0376836292e-2f, 0x3D9021BBu);
SAMEBITS_FLOAT_LITERAL(kLogP1, -1.1514610310e-1f, 0xBDEBD1B8u);
SAMEBITS_FLOAT_LITERAL(kLogP2, 1.1676998740e-1f, 0x3DEF251Au);
SAMEBITS_FLOAT_LITERAL(kLogP3, -1.2420140846e-1f, 0xBDFE5D4Fu);
SAMEBITS_FLOAT_LITERAL(kLogP4, 1.4249322787e-1f, 0x3E11E9BFu);
SAMEBITS_FLOAT_LITERAL(kLogP5, -1.6668057665e-1f, 0xBE2AAE50u);
SAMEBITS_FLOAT_LITERAL(kLogP6, 2.0000714765e-1f, 0x3E4CCEACu);
SAMEBITS_FLOAT_LITERAL(kLogP7, -2.4999993993e-1f, 0xBE7FFFFCu);
SAMEBITS_FLOAT_LITERAL(kLogP8, 3.3333331174e-1f, 0x3EAAAAAAu);
SAMEBITS_FLOAT_LITERAL(kLogLn2Lo, -2.12194440e-4f, 0xB95E8083u);
SAMEBITS_FLOAT_LITERAL(kLogLn2Hi, 0.693359375f, 0x3F318000u);
inline constexpr std::uint32_t kLog1pWindowLowBits = 0xBE95F61Au;   // about -0.29289323
inline constexpr std::uint32_t kLog1pWindowHighBits = 0x3ED413CDu;  // about 0.41421357
inline constexpr float kLog1pWindowLow = std::bit_cast<float>(kLog1pWindowLowBits);
inline constexpr float kLog1pWindowHigh = std::bit_cast<float>(kLog1pWindowHighBits);

// softplus
SAMEBITS_FLOAT_LITERAL(kSoftplusThreshold, 20.0f, 0x41A00000u);

// tanhf
inline constexpr std::uint32_t kTanhSaturationBits = 0x42317218u;  // about 44.36142
inline constexpr float kTanhSaturation = std::bit_cast<float>(kTanhSaturationBits);
SAMEBITS_FLOAT_LITERAL(kTanhBranch, 0.625f, 0x3F200000u);
SAMEBITS_FLOAT_LITERAL(kTanhP0, -5.70498872745e-3f, 0xBBBAF0EAu);
SAMEBITS_FLOAT_LITERAL(kTanhP1, 2.06390887954e-2f, 0x3CA9134Eu);
SAMEBITS_FLOAT_LITERAL(kTanhP2, -5.37397155531e-2f, 0xBD5C1E2Du);
SAMEBITS_FLOAT_LITERAL(kTanhP3, 1.33314422036e-1f, 0x3E088393u);
SAMEBITS_FLOAT_LITERAL(kTanhP4, -3.33332819422e-1f, 0xBEAAAA99u);

// sinf / cosf
SAMEBITS_FLOAT_LITERAL(kFourOverPi, 1.27323954473516f, 0x3FA2F983u);
SAMEBITS_FLOAT_LITERAL(kPiOver4A, -0.78515625f, 0xBF490000u);
SAMEBITS_FLOAT_LITERAL(kPiOver4B, -2.4187564849853515625e-4f, 0xB97DA000u);
SAMEBITS_FLOAT_LITERAL(kPiOver4C, -3.77489497744594108e-8f, 0xB3222169u);
SAMEBITS_FLOAT_LITERAL(kSinP0, -1.9515295891e-4f, 0xB94CA1F9u);
SAMEBITS_FLOAT_LITERAL(kSinP1, 8.3321608736e-3f, 0x3C08839Eu);
SAMEBITS_FLOAT_LITERAL(kSinP2, -1.6666654611e-1f, 0xBE2AAAA3u);
SAMEBITS_FLOAT_LITERAL(kCosP0, 2.443315711809948e-5f, 0x37CCF5CEu);
SAMEBITS_FLOAT_LITERAL(kCosP1, -1.388731625493765e-3f, 0xBAB6061Au);
SAMEBITS_FLOAT_LITERAL(kCosP2, 4.166664568298827e-2f, 0x3D2AAAA5u);
// The octant index is computed through floorf; at and above 2^31 (far outside the |x| < 8192 domain)
// the index is taken as 0, which is what a 64-bit conversion gives for j & 7 there.
SAMEBITS_FLOAT_LITERAL(kTwoTo31, 2147483648.0f, 0x4F000000u);

// sqrtf
inline constexpr std::uint32_t kSqrtSeedMagic = 0x1FBD1DF5u;
inline constexpr std::uint32_t kSqrtScaleThresholdBits = 0x0F800000u;  // 2^-96
inline constexpr std::uint32_t kSqrtScaleUpBits = 0x5F800000u;         // 2^64
inline constexpr std::uint32_t kSqrtScaleDownBits = 0x2F800000u;       // 2^-32

// exact small constants
SAMEBITS_FLOAT_LITERAL(kHalf, 0.5f, 0x3F000000u);
SAMEBITS_FLOAT_LITERAL(kMinusHalf, -0.5f, 0xBF000000u);
SAMEBITS_FLOAT_LITERAL(kOne, 1.0f, 0x3F800000u);
SAMEBITS_FLOAT_LITERAL(kTwo, 2.0f, 0x40000000u);
inline constexpr std::uint32_t kQuietNaNBits = 0x7FC00000u;
inline constexpr std::uint32_t kPlusInfBits = 0x7F800000u;
inline constexpr std::uint32_t kMinusInfBits = 0xFF800000u;

}  // namespace lit

// Each function follows its docs/numerics.md §2.x step list literally (step order, FMA versus plain
// product versus plain add, every flush). They are deliberately out of line: they are compiled once,
// in a baseline translation unit, so any translation unit (AVX2 / AVX-512 ones included) may call
// them without risking an ISA-specific copy being merged into baseline code. Arrays should use the
// dispatched SIMD twins in numerics/vector_math.hpp instead.

float expf(float x) noexcept;                       // 2.1; never returns a subnormal
float logf(float x) noexcept;                       // 2.2
float log1pf(float x) noexcept;                     // 2.3
float softplus(float x) noexcept;                   // 2.4
float sigmoid(float x) noexcept;                    // 2.5
float silu(float x) noexcept;                       // 2.5; one division, not x * sigmoid(x)
float sqrtf(float x) noexcept;                      // 2.6; correctly rounded (see sqrtf_reference)
float rsqrtf(float x) noexcept;                     // 2.6
float tanhf(float x) noexcept;                      // 2.7
float sinf(float x) noexcept;                       // 2.8; domain |x| < 8192
float cosf(float x) noexcept;                       // 2.8; domain |x| < 8192
float powf(float x, float p) noexcept;              // 2.9
float fmax(float a, float b) noexcept;              // 2.10; a total-order maximum, any fold shape
float clamp(float x, float lo, float hi) noexcept;  // 2.11

// The literal Newton algorithm of 2.6 (seed, three Newton steps, +-1 / +-2 ulp polish). sqrtf returns
// the same bits through the hardware square root after the special cases; the exhaustive test
// test_sqrt_exhaustive proves that over all 2^32 inputs.
float sqrtf_reference(float x) noexcept;

namespace detail {
// log_core(t, e) of 2.2, shared by logf and log1pf's small-argument window; exposed for tests.
float log_core(float t, std::int32_t e) noexcept;
// floorf for every float (exact, keeps the sign of zero), without libm.
float floor(float x) noexcept;
}  // namespace detail

}  // namespace samebits::primitives
