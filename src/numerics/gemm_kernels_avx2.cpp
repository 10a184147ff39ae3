// GEMM leaf kernels for AVX2 + FMA: 8 lanes, tiles of 3 rows x 32 columns (12 accumulators).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"

namespace samebits::gemm::detail {
namespace {

struct Isa {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec broadcast(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_load_ps(p); }
  static void store(float* p, Vec v) { _mm256_store_ps(p, v); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  // F: |x| < FLT_MIN keeps only the sign bit (zeros are unchanged by that, NaN compares false).
  static Vec flush(Vec x) {
    const Vec sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
    const Vec tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000)),
                                   _CMP_LT_OQ);
    return _mm256_blendv_ps(x, _mm256_and_ps(x, sign), tiny);
  }
};

#include "numerics/gemm_kernel_impl.hpp"

}  // namespace

const KernelSet& avx2_kernels() {
  static const KernelSet set = [] {
    KernelSet s{};
    s.tile_rows = 3;
    fill_kernels<3>(s);
    fill_skinny_kernels<1, 2>(s);  // 1 row x 64 columns: 8 accumulators
    return s;
  }();
  return set;
}

}  // namespace samebits::gemm::detail
