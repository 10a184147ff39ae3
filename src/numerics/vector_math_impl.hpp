// SIMD twins of the exact primitives, shared by vector_math_avx2.cpp and vector_math_avx512.cpp.
//
// Include it only from those translation units, INSIDE a TU-unique (anonymous) namespace, after
// <immintrin.h>, <cstddef>, <cstdint>, <initializer_list>, numerics/primitives.hpp and
// numerics/vector_math.hpp, and after defining `struct Isa` (float vector V, int32 vector I, lane mask M,
// kLanes, and the operations used below). Every function computes every branch of its scalar step list on all
// lanes and then picks each lane's branch with selects applied from the lowest to the highest priority, so a
// lane's result is exactly the scalar primitive's: same operations, same order, one rounding each (real FMA
// instructions), the same special-case results. Lanes that end up discarded may compute garbage
// (NaN, out-of-range conversions); SIMD integer conversions and shifts are defined for every input.

using V = Isa::V;
using I = Isa::I;
using M = Isa::M;
namespace lit = samebits::primitives::lit;

inline V splat(float value) { return Isa::set1(value); }
inline V splat_bits(std::uint32_t pattern) {
  return Isa::cast_f(Isa::set1i(static_cast<std::int32_t>(pattern)));
}
inline I int_splat(std::int32_t value) { return Isa::set1i(value); }

inline V abs_of(V x) { return Isa::cast_f(Isa::and_i(Isa::cast_i(x), int_splat(0x7FFFFFFF))); }
inline I sign_bits(V x) {
  return Isa::and_i(Isa::cast_i(x), int_splat(static_cast<std::int32_t>(0x80000000u)));
}
inline V negate(V x) { return Isa::cast_f(Isa::xor_i(Isa::cast_i(x), sign_bits(splat(-0.0f)))); }
// |magnitude| carrying the sign bit of sign_source.
inline V with_sign_of(V magnitude, V sign_source) {
  return Isa::cast_f(Isa::or_i(Isa::cast_i(abs_of(magnitude)), sign_bits(sign_source)));
}
inline M is_nan(V x) { return Isa::unord(x, x); }
inline M is_not_finite(V x) { return Isa::not_lt(abs_of(x), splat_bits(lit::kPlusInfBits)); }

// F: |x| < FLT_MIN (the zeros and the subnormals) keeps only the sign; NaN compares false.
inline V flush(V x) {
  return Isa::select(Isa::lt(abs_of(x), splat(lit::kFltMin)), x, Isa::cast_f(sign_bits(x)));
}

// F where a pass flushes, nothing where the MXCSR flags vouch that no flush could act
// (mxcsr_flags::run_exact, docs/numerics.md §6a): the one switch the two passes of a chain kernel differ by.
template <bool kFlush>
inline V flush_if(V x) {
  if constexpr (kFlush) return Isa::flush(x);
  return x;
}

// DIV(a, b) = F(F(a) / F(b)).
inline V div_flushed(V a, V b) { return flush(Isa::div(flush(a), flush(b))); }

// A polynomial in t by Horner's rule, as the step lists write it: p = c0, then p = FMA(p, t, c) for each
// later coefficient in the order given (one rounding per step, the scalar twin's order).
inline V horner_lanes(V t, std::initializer_list<float> coefficients) {
  const float* c = coefficients.begin();
  V p = splat(*c);
  for (++c; c != coefficients.end(); ++c) p = Isa::fma(p, t, splat(*c));
  return p;
}

// 2.1
inline V exp_lanes(V x) {
  const V t = Isa::fma(x, splat(lit::kLog2e), splat(lit::kHalf));
  const V z = Isa::floor(t);
  const I k = Isa::cvtt_i(z);
  V r = Isa::fma(z, splat(lit::kExpLn2Hi), x);
  r = Isa::fma(z, splat(lit::kExpLn2Lo), r);
  const V q = horner_lanes(r, {lit::kExpP0, lit::kExpP1, lit::kExpP2, lit::kExpP3, lit::kExpP4, lit::kExpP5});
  const V r2 = Isa::mul(r, r);
  V y = Isa::fma(q, r2, r);
  y = Isa::add(y, splat(1.0f));
  const I k1 = Isa::srai<1>(k);
  const I k2 = Isa::sub_i(k, k1);
  y = Isa::mul(y, Isa::cast_f(Isa::slli<23>(Isa::add_i(k1, int_splat(127)))));
  y = Isa::mul(y, Isa::cast_f(Isa::slli<23>(Isa::add_i(k2, int_splat(127)))));
  V result = Isa::select(Isa::lt(y, splat(lit::kFltMin)), y, splat(0.0f));
  result = Isa::select(Isa::lt(x, splat(lit::kExpUnderflowBound)), result, splat(0.0f));
  result = Isa::select(Isa::gt(x, splat(lit::kExpOverflowBound)), result, splat_bits(lit::kPlusInfBits));
  return Isa::select(is_nan(x), result, x);
}

// log_core(t, e) of 2.2 with ef = (float) e already converted.
inline V log_core_lanes(V t, V ef) {
  const V z = Isa::mul(t, t);
  const V p = horner_lanes(t, {lit::kLogP0, lit::kLogP1, lit::kLogP2, lit::kLogP3, lit::kLogP4, lit::kLogP5,
                               lit::kLogP6, lit::kLogP7, lit::kLogP8});
  const V tz = Isa::mul(t, z);
  V y = Isa::mul(tz, p);
  y = Isa::fma(ef, splat(lit::kLogLn2Lo), y);
  y = Isa::fma(splat(lit::kMinusHalf), z, y);
  V r = Isa::add(t, y);
  return Isa::fma(ef, splat(lit::kLogLn2Hi), r);
}

// 2.2
inline V log_lanes(V x) {
  const I u = Isa::cast_i(x);
  I e = Isa::sub_i(Isa::and_i(Isa::srli<23>(u), int_splat(0xFF)), int_splat(126));
  V m = Isa::cast_f(Isa::or_i(Isa::and_i(u, int_splat(0x7FFFFF)), int_splat(0x3F000000)));
  const M low_mantissa = Isa::lt(m, splat(lit::kSqrtHalf));
  e = Isa::selecti(low_mantissa, e, Isa::sub_i(e, int_splat(1)));
  m = Isa::select(low_mantissa, m, Isa::add(m, m));
  const V t = Isa::sub(m, splat(1.0f));
  V result = log_core_lanes(t, Isa::cvt_f(e));
  result = Isa::select(Isa::eq(x, splat_bits(lit::kPlusInfBits)), result, x);
  result = Isa::select(Isa::lt(x, splat(0.0f)), result, splat_bits(lit::kQuietNaNBits));
  result = Isa::select(Isa::lt(abs_of(x), splat(lit::kFltMin)), result, splat_bits(lit::kMinusInfBits));
  return Isa::select(is_nan(x), result, x);
}

// 2.3
inline V log1p_lanes(V x_in) {
  const V x = flush(x_in);
  const M in_window =
      Isa::mask_and(Isa::ge(x, splat(lit::kLog1pWindowLow)), Isa::le(x, splat(lit::kLog1pWindowHigh)));
  V result = Isa::select(in_window, log_lanes(Isa::add(x, splat(1.0f))), log_core_lanes(x, splat(0.0f)));
  result = Isa::select(Isa::eq(x, splat(-1.0f)), result, splat_bits(lit::kMinusInfBits));
  result = Isa::select(Isa::lt(x, splat(-1.0f)), result, splat_bits(lit::kQuietNaNBits));
  result = Isa::select(Isa::eq(x, splat_bits(lit::kPlusInfBits)), result, x);
  result = Isa::select(Isa::eq(x, splat(0.0f)), result, x);
  return Isa::select(is_nan(x), result, x);
}

// 2.4
inline V softplus_lanes(V x) {
  return Isa::select(Isa::le(x, splat(lit::kSoftplusThreshold)), x, log1p_lanes(exp_lanes(x)));
}

// 2.5
inline V sigmoid_lanes(V x) {
  const V d = Isa::add(exp_lanes(negate(x)), splat(1.0f));
  return Isa::select(is_nan(x), div_flushed(splat(1.0f), d), x);
}

inline V silu_lanes(V x) {
  const V d = Isa::add(exp_lanes(negate(x)), splat(1.0f));
  return Isa::select(is_nan(x), div_flushed(x, d), x);
}

// 2.6: after the special cases the hardware IEEE square root equals the literal Newton algorithm
// (Open point 7.3; test_sqrt_exhaustive checks every input on every target).
inline V sqrt_lanes(V x) {
  V result = Isa::sqrt(x);
  result = Isa::select(Isa::lt(x, splat(0.0f)), result, splat_bits(lit::kQuietNaNBits));
  result = Isa::select(Isa::lt(abs_of(x), splat(lit::kFltMin)), result, splat(0.0f));
  return Isa::select(is_nan(x), result, x);
}

inline V rsqrt_lanes(V x_in) {
  const V x = flush(x_in);
  const V s = sqrt_lanes(x);
  V result = div_flushed(splat(1.0f), s);
  result = Isa::select(Isa::eq(s, splat_bits(lit::kPlusInfBits)), result, splat(0.0f));
  result = Isa::select(Isa::eq(s, splat(0.0f)), result, splat_bits(lit::kPlusInfBits));
  result = Isa::select(Isa::lt(x, splat(0.0f)), result, splat_bits(lit::kQuietNaNBits));
  return Isa::select(is_nan(x), result, x);
}

// 2.7
inline V tanh_lanes(V x) {
  const V xx = flush(x);
  const V a = abs_of(xx);
  // Step 3 (a >= 0.625): z = 1 - DIV(2, expf(a + a) + 1) is positive, so giving it xx's sign is -z
  // for negative xx.
  const V q = div_flushed(splat(lit::kTwo), Isa::add(exp_lanes(Isa::add(a, a)), splat(1.0f)));
  const V from_exp = with_sign_of(Isa::sub(splat(1.0f), q), xx);
  // Step 4 (a < 0.625).
  const V s = Isa::mul(a, a);
  const V p = horner_lanes(s, {lit::kTanhP0, lit::kTanhP1, lit::kTanhP2, lit::kTanhP3, lit::kTanhP4});
  const V from_poly = Isa::fma(Isa::mul(p, s), xx, xx);
  V result = Isa::select(Isa::ge(a, splat(lit::kTanhBranch)), from_poly, from_exp);
  result = Isa::select(Isa::gt(a, splat(lit::kTanhSaturation)), result, with_sign_of(splat(1.0f), xx));
  result = Isa::select(Isa::eq(xx, splat(0.0f)), result, xx);
  return Isa::select(is_nan(xx), result, xx);
}

// trig_core of 2.8 (xa >= 0, sign = +-1). The octant index: cvtt gives 0x80000000 for a floor at or
// above 2^31, which is even with j & 7 == 0, exactly the scalar rule (j = 0 there); yj is the floor.
template <bool IsCos>
V trig_core_lanes(V xa, V sign) {
  const V fj = Isa::floor(Isa::mul(xa, splat(lit::kFourOverPi)));
  I j = Isa::cvtt_i(fj);
  V yj = fj;
  const M odd = Isa::ieq(Isa::and_i(j, int_splat(1)), int_splat(1));
  j = Isa::selecti(odd, j, Isa::add_i(j, int_splat(1)));
  yj = Isa::select(odd, yj, Isa::add(yj, splat(1.0f)));
  j = Isa::and_i(j, int_splat(7));
  V x = Isa::fma(yj, splat(lit::kPiOver4A), xa);
  x = Isa::fma(yj, splat(lit::kPiOver4B), x);
  x = Isa::fma(yj, splat(lit::kPiOver4C), x);
  const M upper_half = Isa::igt(j, int_splat(3));
  j = Isa::selecti(upper_half, j, Isa::sub_i(j, int_splat(4)));
  sign = Isa::select(upper_half, sign, negate(sign));
  if constexpr (IsCos) sign = Isa::select(Isa::igt(j, int_splat(1)), sign, negate(sign));
  const V z = Isa::mul(x, x);
  const V ps = horner_lanes(z, {lit::kSinP0, lit::kSinP1, lit::kSinP2});
  const V from_sin_poly = Isa::fma(Isa::mul(x, z), ps, x);
  const V pc = horner_lanes(z, {lit::kCosP0, lit::kCosP1, lit::kCosP2});
  const V from_cos_poly = Isa::fma(Isa::mul(z, z), pc, Isa::fma(splat(lit::kMinusHalf), z, splat(1.0f)));
  const M j_is_1_or_2 = Isa::mask_or(Isa::ieq(j, int_splat(1)), Isa::ieq(j, int_splat(2)));
  const V y = IsCos ? Isa::select(j_is_1_or_2, from_cos_poly, from_sin_poly)
                    : Isa::select(j_is_1_or_2, from_sin_poly, from_cos_poly);
  return Isa::mul(sign, y);
}

inline V sin_lanes(V x_in) {
  const V x = flush(x_in);
  const V sign =
      Isa::cast_f(Isa::or_i(Isa::cast_i(splat(1.0f)), sign_bits(x)));  // -1 when x's sign bit is set
  const V result = trig_core_lanes<false>(abs_of(x), sign);
  return Isa::select(is_not_finite(x_in), result, splat_bits(lit::kQuietNaNBits));
}

inline V cos_lanes(V x) {
  const V result = trig_core_lanes<true>(abs_of(x), splat(1.0f));
  return Isa::select(is_not_finite(x), result, splat_bits(lit::kQuietNaNBits));
}

// Full vectors straight from the arrays; a short tail goes through a zero-padded stack block, so
// every element takes the same vector code. y == x is fine: each block is loaded before it is stored.
template <V (*Lanes)(V)>
void array_kernel(const float* x, float* y, std::size_t n) {
  constexpr std::size_t kLanes = Isa::kLanes;
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Isa::store(y + i, Lanes(Isa::load(x + i)));
  if (i < n) {
    float block[kLanes] = {};
    for (std::size_t l = 0; l < n - i; ++l) block[l] = x[i + l];
    Isa::store(block, Lanes(Isa::load(block)));
    for (std::size_t l = 0; l < n - i; ++l) y[i + l] = block[l];
  }
}

const samebits::vector_math::detail::ArrayKernels kIsaKernels{
    &array_kernel<exp_lanes>,      &array_kernel<log_lanes>,     &array_kernel<log1p_lanes>,
    &array_kernel<softplus_lanes>, &array_kernel<sigmoid_lanes>, &array_kernel<silu_lanes>,
    &array_kernel<tanh_lanes>,     &array_kernel<sqrt_lanes>,    &array_kernel<rsqrt_lanes>,
    &array_kernel<sin_lanes>,      &array_kernel<cos_lanes>,     &array_kernel<flush>,
};
