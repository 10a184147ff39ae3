// Dispatch of the transpose to the active SIMD target, and its literal twin.
#include "numerics/transpose.hpp"

#include "numerics/simd_kernels.hpp"

namespace samebits::transpose {

namespace {

// out[c][r] = in[r][c] for r in [r0, r1), c in [c0, c1) of a rows x cols matrix.
void transpose_cells(const float* in, std::int64_t rows, std::int64_t cols, std::int64_t r0, std::int64_t r1,
                     std::int64_t c0, std::int64_t c1, float* out) {
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * cols + c];
}

}  // namespace

void transpose_reference(const float* in, std::int64_t rows, std::int64_t cols, float* out) {
  transpose_cells(in, rows, cols, 0, rows, 0, cols, out);
}

void transpose(const float* in, std::int64_t rows, std::int64_t cols, float* out) {
  const detail::TransposeFn kernel = simd::kernels().transpose;
  std::int64_t rows_done = 0, cols_done = 0;
  if (kernel != nullptr) kernel(in, rows, cols, out, rows_done, cols_done);
  // The strips the blocks left: rows past rows_done (every column), then columns past cols_done.
  transpose_cells(in, rows, cols, rows_done, rows, 0, cols, out);
  transpose_cells(in, rows, cols, 0, rows_done, cols_done, cols, out);
}

}  // namespace samebits::transpose
