// AVX-512 kernels of the SSD decode pieces (16 output cells per vector).
#include "numerics/ssd.hpp"

#if defined(__x86_64__) || defined(__i386__)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/primitives.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::ssd::detail {
namespace {

// The order matters: Isa, then the primitives over it, then these kernels.
// clang-format off
#include "numerics/isa_avx512.hpp"
#include "numerics/vector_math_impl.hpp"
// clang-format on

// rows[r] lane c  <->  rows[c] lane r (16 x 16), for the NT single-row cells.
inline void transpose_lanes(__m512* r) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Each 128-bit lane k of u[4 * i + c] holds column 4k + c of rows 4i .. 4i + 3.
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[c + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[c + 12] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

#include "numerics/ssd_impl.hpp"  // after transpose_lanes, which it uses

}  // namespace

const SsdKernels* ssd_kernels_avx512() { return &kSsdKernels; }

}  // namespace samebits::ssd::detail

#endif
