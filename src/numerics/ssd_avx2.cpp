// AVX2 kernels of the SSD decode pieces (8 output cells per vector).
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
#include "numerics/isa_avx2.hpp"
#include "numerics/vector_math_impl.hpp"
// clang-format on

// rows[r] lane c  <->  rows[c] lane r (8 x 8), for the NT single-row cells.
inline void transpose_lanes(__m256* r) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

#include "numerics/ssd_impl.hpp"  // after transpose_lanes, which it uses

}  // namespace

const SsdKernels* ssd_kernels_avx2() { return &kSsdKernels; }

}  // namespace samebits::ssd::detail

#endif
