// RMSNorm row-block kernel for AVX-512 (16 rows at a time).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::norm::detail {
namespace {

struct Isa {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec broadcast(float v) { return _mm512_set1_ps(v); }
  static Vec loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, Vec v) { _mm512_store_ps(p, v); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static __m512i row_offsets(std::int64_t d) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(static_cast<int>(d)));
  }
  static Vec gather(const float* base, __m512i offsets) { return _mm512_i32gather_ps(offsets, base, 4); }
  static Vec flush(Vec x) {
    const __mmask16 denormal = _mm512_fpclass_ps_mask(x, 0x20);
    return _mm512_mask_and_ps(x, denormal, x, _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u))));
  }
};

#include "numerics/rmsnorm_impl.hpp"

}  // namespace

RmsnormKernels rmsnorm_avx512() { return {Isa::kLanes, &rmsnorm_block}; }

}  // namespace samebits::norm::detail
