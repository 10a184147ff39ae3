// Dispatch of the transpose to the active SIMD target, and its literal twin.
#include "numerics/transpose.hpp"

#include "numerics/simd_target.hpp"

namespace samebits::transpose {

void transpose_reference(const float* in, std::int64_t rows, std::int64_t cols, float* out) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

void transpose(const float* in, std::int64_t rows, std::int64_t cols, float* out) {
  detail::TransposeFn kernel = nullptr;
#if defined(SAMEBITS_HAVE_SIMD)
  switch (simd::active_target()) {
    case simd::Target::Avx512:
      kernel = detail::transpose_avx512();
      break;
    case simd::Target::Avx2:
      kernel = detail::transpose_avx2();
      break;
    default:
      break;
  }
#endif
  std::int64_t rows_done = 0, cols_done = 0;
  if (kernel != nullptr) kernel(in, rows, cols, out, rows_done, cols_done);
  // The strips the blocks left: rows past rows_done (every column), then columns past cols_done.
  for (std::int64_t r = rows_done; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  for (std::int64_t r = 0; r < rows_done; ++r)
    for (std::int64_t c = cols_done; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

}  // namespace samebits::transpose
