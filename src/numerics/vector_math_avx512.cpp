// AVX-512 twins of the exact primitives: 16 lanes, mask registers for the branches.
#include "numerics/vector_math.hpp"

#if defined(__x86_64__) || defined(__i386__)

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as "maybe
// uninitialized" (a false positive: those lanes are fully overwritten).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/primitives.hpp"

namespace samebits::vmath::detail {
namespace {

struct Isa {
  using V = __m512;
  using I = __m512i;
  using M = __mmask16;
  static constexpr int kLanes = 16;

  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static I set1i(std::int32_t x) { return _mm512_set1_epi32(x); }

  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V floor(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }

  // Ordered quiet compares behave like the scalar C++ operators (false with a NaN operand).
  static M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M le(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
  static M gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static M ge(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static M eq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M unord(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
  static M not_lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ); }
  static M mask_and(M a, M b) { return _kand_mask16(a, b); }
  static M mask_or(M a, M b) { return _kor_mask16(a, b); }

  // select(m, if_false, if_true)
  static V select(M m, V if_false, V if_true) { return _mm512_mask_blend_ps(m, if_false, if_true); }
  static I selecti(M m, I if_false, I if_true) { return _mm512_mask_blend_epi32(m, if_false, if_true); }

  static I cast_i(V a) { return _mm512_castps_si512(a); }
  static V cast_f(I a) { return _mm512_castsi512_ps(a); }
  static I and_i(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_i(I a, I b) { return _mm512_or_si512(a, b); }
  static I xor_i(I a, I b) { return _mm512_xor_si512(a, b); }
  static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int N>
  static I srai(I a) {
    return _mm512_srai_epi32(a, N);
  }
  template <int N>
  static I srli(I a) {
    return _mm512_srli_epi32(a, N);
  }
  template <int N>
  static I slli(I a) {
    return _mm512_slli_epi32(a, N);
  }
  static M ieq(I a, I b) { return _mm512_cmpeq_epi32_mask(a, b); }
  static M igt(I a, I b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static V cvt_f(I a) { return _mm512_cvtepi32_ps(a); }
  static I cvtt_i(V a) { return _mm512_cvttps_epi32(a); }  // 0x80000000 when out of range
};

#include "numerics/vector_math_impl.hpp"

}  // namespace

const ArrayKernels& avx512_kernels() { return kIsaKernels; }

}  // namespace samebits::vmath::detail

#endif
