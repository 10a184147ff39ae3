// Mamba-3 array kernels for AVX-512 (16 lanes).
#include "numerics/mamba3_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)

// GCC 12 reports its own _mm512_undefined_* placeholders inside the gather intrinsics as "maybe
// uninitialized" (a false positive: those lanes are fully overwritten).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"

namespace samebits::mamba3_kernels::detail {
namespace {

#include "numerics/isa_avx512.hpp"

// In-place 16x16 transpose: afterwards r[j] lane l holds what r[l] lane j held.
inline void transpose_lanes(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  // u[4k + j], 128-bit lane L: column 4L + j of rows 4k..4k+3.
  for (int k = 0; k < 4; ++k) {
    const __m512d t0 = _mm512_castps_pd(t[4 * k]), t1 = _mm512_castps_pd(t[4 * k + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * k + 2]), t3 = _mm512_castps_pd(t[4 * k + 3]);
    u[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 x0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88),
                 y0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 x1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(x0, x1, 0x88);
    r[4 + j] = _mm512_shuffle_f32x4(y0, y1, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(x0, x1, 0xDD);
    r[12 + j] = _mm512_shuffle_f32x4(y0, y1, 0xDD);
  }
}

#include "numerics/mamba3_kernels_impl.hpp"

}  // namespace

const Kernels& avx512_kernels() { return kIsaKernels; }

}  // namespace samebits::mamba3_kernels::detail

#endif
