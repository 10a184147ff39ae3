// GEMM leaf kernels for AVX-512: 16 lanes, tiles of 8 rows x 32 columns (16 accumulators).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"

namespace samebits::gemm::detail {
namespace {

struct Isa {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec broadcast(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float* p) { return _mm512_load_ps(p); }
  static void store(float* p, Vec v) { _mm512_store_ps(p, v); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  // F: lanes classified as denormal keep only their sign bit.
  static Vec flush(Vec x) {
    const __mmask16 denormal = _mm512_fpclass_ps_mask(x, 0x20);
    return _mm512_mask_and_ps(x, denormal, x, _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u))));
  }
};

#include "numerics/gemm_kernel_impl.hpp"

}  // namespace

const KernelSet& avx512_kernels() {
  static const KernelSet set = [] {
    KernelSet s{};
    s.tile_rows = 8;
    fill_kernels<8>(s);
    fill_skinny_kernels<2, 4>(s);  // 1-2 rows x 128 columns: 8-16 accumulators
    return s;
  }();
  return set;
}

}  // namespace samebits::gemm::detail
