// Mamba-3 array kernels for AVX2 + FMA (8 lanes).
#include "numerics/mamba3_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"

namespace samebits::mamba3_kernels::detail {
namespace {

#include "numerics/isa_avx2.hpp"

// In-place 8x8 transpose: afterwards r[j] lane l holds what r[l] lane j held.
inline void transpose_lanes(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  // u[4k + j], 128-bit lane L: column 4L + j of rows 4k..4k+3.
  for (int k = 0; k < 2; ++k) {
    const __m256d t0 = _mm256_castps_pd(t[4 * k]), t1 = _mm256_castps_pd(t[4 * k + 1]);
    const __m256d t2 = _mm256_castps_pd(t[4 * k + 2]), t3 = _mm256_castps_pd(t[4 * k + 3]);
    u[4 * k] = _mm256_castpd_ps(_mm256_unpacklo_pd(t0, t2));
    u[4 * k + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(t0, t2));
    u[4 * k + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(t1, t3));
    u[4 * k + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(t1, t3));
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

#include "numerics/mamba3_kernels_impl.hpp"

}  // namespace

const Kernels& avx2_kernels() { return kIsaKernels; }

}  // namespace samebits::mamba3_kernels::detail

#endif
