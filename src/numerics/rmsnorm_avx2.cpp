// RMSNorm row-block kernel for AVX2 + FMA (8 rows at a time).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::norm::detail {
namespace {

struct Isa {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec broadcast(float v) { return _mm256_set1_ps(v); }
  static Vec loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, Vec v) { _mm256_store_ps(p, v); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256i row_offsets(std::int64_t d) {
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(d)));
  }
  static Vec gather(const float* base, __m256i offsets) { return _mm256_i32gather_ps(base, offsets, 4); }
  static Vec flush(Vec x) {
    const Vec sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
    const Vec tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000)),
                                   _CMP_LT_OQ);
    return _mm256_blendv_ps(x, _mm256_and_ps(x, sign), tiny);
  }
};

#include "numerics/rmsnorm_impl.hpp"

}  // namespace

RmsnormKernels rmsnorm_avx2() { return {Isa::kLanes, &rmsnorm_block}; }

}  // namespace samebits::norm::detail
