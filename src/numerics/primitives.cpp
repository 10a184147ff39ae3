// The scalar primitives of docs/numerics.md §2, written out step by step (baseline ISA, no libm).
#include "numerics/primitives.hpp"

#include <cstdint>

#include "numerics/fp.hpp"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define SAMEBITS_PRIM_HAVE_SSE_SQRT 1
#endif

namespace samebits::primitives {

using fp::bits;
using fp::DIV;
using fp::F;
using fp::FMA;
using fp::from_bits;
using fp::MUL;
using namespace lit;

namespace {

inline float quiet_nan() noexcept { return from_bits(kQuietNaNBits); }
inline float plus_inf() noexcept { return from_bits(kPlusInfBits); }
inline float minus_inf() noexcept { return from_bits(kMinusInfBits); }
inline float abs_of(float x) noexcept { return from_bits(bits(x) & fp::kAbsMask); }
inline float with_sign_of(float magnitude, float sign_source) noexcept {
  return from_bits((bits(magnitude) & fp::kAbsMask) | (bits(sign_source) & fp::kSignMask));
}

// trig_core of 2.8 with xa >= 0 and sign = +1 or -1.
float trig_core(float xa, float sign, bool is_cos) noexcept {
  // Step 1: j = (int) floorf(xa * 4/pi), yj = (float) j. yj is kept as the floor itself: for every
  // floor below 2^31 the conversion is exact, so (float) j equals it; at and above 2^31 (only far
  // outside the domain) j is taken as 0, i.e. even with j & 7 == 0, as an exact 64-bit conversion
  // would give, and yj stays the floor. The SIMD twins compute exactly this.
  const float fj = detail::floor(xa * kFourOverPi);
  std::int32_t j = fj < kTwoTo31 ? static_cast<std::int32_t>(fj) : 0;
  float yj = fj;
  // Step 2.
  if ((j & 1) != 0) {
    j = j + 1;
    yj = yj + 1.0f;
  }
  j = j & 7;
  // Step 3: three-part Cody-Waite reduction.
  float x = FMA(yj, kPiOver4A, xa);
  x = FMA(yj, kPiOver4B, x);
  x = FMA(yj, kPiOver4C, x);
  // Step 4.
  if (j > 3) {
    j = j - 4;
    sign = -sign;
  }
  if (is_cos && j > 1) sign = -sign;
  // Step 5.
  const float z = x * x;
  // Step 6.
  bool use_sin_poly = (j == 1 || j == 2);
  if (!is_cos) use_sin_poly = !use_sin_poly;
  float y;
  if (use_sin_poly) {
    float p = kSinP0;
    p = FMA(p, z, kSinP1);
    p = FMA(p, z, kSinP2);
    y = FMA(x * z, p, x);
  } else {
    float p = kCosP0;
    p = FMA(p, z, kCosP1);
    p = FMA(p, z, kCosP2);
    y = FMA(z * z, p, FMA(kMinusHalf, z, kOne));
  }
  // Step 7: a multiplication by +-1 (not a bit flip: the SIMD twins multiply too).
  return sign * y;
}

}  // namespace

namespace detail {

float floor(float x) noexcept {
  // |x| >= 2^23 is already an integer (or inf / NaN): unchanged, as floorf returns it.
  if (!(abs_of(x) < 8388608.0f)) return x;
  float truncated = static_cast<float>(static_cast<std::int32_t>(x));  // exact below 2^23
  if (truncated > x) truncated = truncated - 1.0f;
  // floorf keeps the sign of a zero: floorf(-0.0) = -0.0 (inputs in (-1, 0) give -1, not zero).
  if (truncated == 0.0f) return from_bits(bits(x) & fp::kSignMask);
  return truncated;
}

float log_core(float t, std::int32_t e) noexcept {
  const float z = t * t;  // step 1
  float p = kLogP0;       // step 2
  p = FMA(p, t, kLogP1);
  p = FMA(p, t, kLogP2);
  p = FMA(p, t, kLogP3);
  p = FMA(p, t, kLogP4);
  p = FMA(p, t, kLogP5);
  p = FMA(p, t, kLogP6);
  p = FMA(p, t, kLogP7);
  p = FMA(p, t, kLogP8);
  const float tz = t * z;  // step 3: (t*z)*p, two plain products
  float y = tz * p;
  const float ef = static_cast<float>(e);  // step 4 (exact, |e| <= 150)
  y = FMA(ef, kLogLn2Lo, y);               // step 5
  y = FMA(kMinusHalf, z, y);
  float r = t + y;  // step 6
  r = FMA(ef, kLogLn2Hi, r);
  return r;
}

}  // namespace detail

float expf(float x) noexcept {
  if (fp::is_nan(x)) return x;                   // step 1
  if (x > kExpOverflowBound) return plus_inf();  // step 2
  if (x < kExpUnderflowBound) return 0.0f;
  const float t = FMA(x, kLog2e, kHalf);  // step 3
  const float z = detail::floor(t);
  const std::int32_t k = static_cast<std::int32_t>(z);
  float r = FMA(z, kExpLn2Hi, x);  // step 4
  r = FMA(z, kExpLn2Lo, r);
  float q = kExpP0;  // step 5
  q = FMA(q, r, kExpP1);
  q = FMA(q, r, kExpP2);
  q = FMA(q, r, kExpP3);
  q = FMA(q, r, kExpP4);
  q = FMA(q, r, kExpP5);
  const float r2 = r * r;  // step 6
  float y = FMA(q, r2, r);
  y = y + 1.0f;
  const std::int32_t k1 = k >> 1;  // step 7 (arithmetic shift; k is in [-126, 128] here)
  const std::int32_t k2 = k - k1;
  y = y * from_bits(static_cast<std::uint32_t>(k1 + 127) << 23);
  y = MUL(y, from_bits(static_cast<std::uint32_t>(k2 + 127) << 23));
  if (y < kFltMin) return 0.0f;  // step 8
  return y;
}

float logf(float x) noexcept {
  if (fp::is_nan(x)) return x;        // step 1
  if (abs_of(x) < kFltMin) x = 0.0f;  // step 2
  if (x == 0.0f) return minus_inf();  // step 3
  if (x < 0.0f) return quiet_nan();
  if (x == plus_inf()) return x;
  const std::uint32_t u = bits(x);  // step 4
  std::int32_t e = static_cast<std::int32_t>((u >> 23) & 0xFFu) - 126;
  float m = from_bits((u & 0x7FFFFFu) | 0x3F000000u);
  if (m < kSqrtHalf) {  // step 5
    e = e - 1;
    m = m + m;
  }
  const float t = m - 1.0f;  // step 6
  return detail::log_core(t, e);
}

float log1pf(float x) noexcept {
  x = F(x);                     // step 1
  if (fp::is_nan(x)) return x;  // step 2
  if (x == 0.0f) return x;      // keeps the sign of zero
  if (x == plus_inf()) return x;
  if (x < -1.0f) return quiet_nan();  // step 3
  if (x == -1.0f) return minus_inf();
  if (kLog1pWindowLow <= x && x <= kLog1pWindowHigh) return detail::log_core(x, 0);  // step 4
  return logf(x + 1.0f);
}

float softplus(float x) noexcept {
  if (x <= kSoftplusThreshold) return log1pf(expf(x));
  return x;  // also NaN, unchanged
}

float sigmoid(float x) noexcept {
  if (fp::is_nan(x)) return x;
  const float d = expf(-x) + 1.0f;
  return DIV(1.0f, d);
}

float silu(float x) noexcept {
  if (fp::is_nan(x)) return x;
  const float d = expf(-x) + 1.0f;
  return DIV(x, d);
}

float sqrtf_reference(float x) noexcept {
  // Step 1: special cases.
  if (fp::is_nan(x)) return x;
  if (abs_of(x) < kFltMin) return 0.0f;  // +-0 and subnormals of either sign give +0.0
  if (x < 0.0f) return quiet_nan();
  if (x == plus_inf()) return x;
  // Step 2: scale tiny inputs up by 2^64 (exact).
  bool scaled = false;
  if (x < from_bits(kSqrtScaleThresholdBits)) {
    x = x * from_bits(kSqrtScaleUpBits);
    scaled = true;
  }
  // Step 3: seed.
  float y = from_bits((bits(x) >> 1) + kSqrtSeedMagic);
  // Step 4: three Newton steps; the division and the add are plain, the halving is MUL.
  y = MUL(kHalf, y + x / y);
  y = MUL(kHalf, y + x / y);
  y = MUL(kHalf, y + x / y);
  // Step 5: polish over y-1ulp, y+1ulp, y-2ulp, y+2ulp in that order, strict improvement, running
  // minimum (Open point 7.3: keeping rb at y's residual gives the same bits).
  const std::uint32_t yb = bits(y);
  float best = y;
  float best_residual = abs_of(FMA(-y, y, x));
  const std::uint32_t candidates[4] = {yb - 1u, yb + 1u, yb - 2u, yb + 2u};
  for (std::uint32_t cb : candidates) {
    const float c = from_bits(cb);
    const float residual = abs_of(FMA(-c, c, x));
    if (residual < best_residual) {
      best = c;
      best_residual = residual;
    }
  }
  // Step 6: undo the scaling (exact: 2^-32).
  if (scaled) best = best * from_bits(kSqrtScaleDownBits);
  return best;
}

float sqrtf(float x) noexcept {
  if (fp::is_nan(x)) return x;
  if (abs_of(x) < kFltMin) return 0.0f;
  if (x < 0.0f) return quiet_nan();
#if defined(SAMEBITS_PRIM_HAVE_SSE_SQRT)
  // After the special cases the literal algorithm returns the correctly rounded square root
  // (Open point 7.3; proven over all 2^32 inputs by test_sqrt_exhaustive), which is what the IEEE
  // sqrtss instruction computes. The intrinsic is the bare instruction: no libm, no errno path.
  return _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x)));
#else
  return sqrtf_reference(x);
#endif
}

float rsqrtf(float x) noexcept {
  x = F(x);
  if (fp::is_nan(x)) return x;
  if (x < 0.0f) return quiet_nan();
  const float s = sqrtf(x);
  if (s == 0.0f) return plus_inf();
  if (s == plus_inf()) return 0.0f;
  return DIV(1.0f, s);
}

float tanhf(float x) noexcept {
  const float xx = F(x);  // step 1
  if (fp::is_nan(xx)) return xx;
  if (xx == 0.0f) return xx;
  const float a = abs_of(xx);  // step 2
  if (a > kTanhSaturation) return with_sign_of(1.0f, xx);
  if (a >= kTanhBranch) {  // step 3
    const float q = DIV(kTwo, expf(a + a) + 1.0f);
    const float z = 1.0f - q;
    return with_sign_of(z, xx);  // z > 0 here, so this is -z for negative xx
  }
  const float s = a * a;  // step 4
  float p = kTanhP0;
  p = FMA(p, s, kTanhP1);
  p = FMA(p, s, kTanhP2);
  p = FMA(p, s, kTanhP3);
  p = FMA(p, s, kTanhP4);
  return FMA(p * s, xx, xx);
}

float sinf(float x) noexcept {
  if (!fp::is_finite(x)) return quiet_nan();
  x = F(x);
  const float sign = (bits(x) & fp::kSignMask) ? -1.0f : 1.0f;
  return trig_core(abs_of(x), sign, false);
}

float cosf(float x) noexcept {
  if (!fp::is_finite(x)) return quiet_nan();
  return trig_core(abs_of(x), 1.0f, true);  // no input flush
}

float powf(float x, float p) noexcept {
  if (p == 0.0f) return 1.0f;  // checked first: powf(NaN, 0) = 1
  if (fp::is_nan(x) || fp::is_nan(p)) return quiet_nan();
  if (x < 0.0f) return quiet_nan();
  if (x == 0.0f) return p > 0.0f ? 0.0f : plus_inf();
  return expf(p * logf(x));
}

float fmax(float a, float b) noexcept {
  if (fp::is_nan(a) || fp::is_nan(b)) return quiet_nan();
  a = F(a);
  b = F(b);
  return fp::key(b) > fp::key(a) ? b : a;
}

float clamp(float x, float lo, float hi) noexcept {
  if (fp::is_nan(x) || fp::is_nan(lo) || fp::is_nan(hi)) return quiet_nan();
  x = F(x);
  lo = F(lo);
  hi = F(hi);
  float v = x;
  if (fp::key(lo) > fp::key(v)) v = lo;
  if (fp::key(hi) < fp::key(v)) v = hi;
  return v;
}

}  // namespace samebits::primitives
