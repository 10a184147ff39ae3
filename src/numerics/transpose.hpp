// Matrix transposes (values move, nothing is computed): the layouts the decode kernels read rows from,
// such as each head's h^T. The SIMD versions move kLanes x kLanes blocks through registers.
#pragma once

#include <cstdint>

namespace samebits::transpose {

// out[c * rows + r] = in[r * cols + c] for r < rows, c < cols (in and out do not overlap).
void transpose(const float* in, std::int64_t rows, std::int64_t cols, float* out);

// The literal loop, for tests and as the fallback without SIMD.
void transpose_reference(const float* in, std::int64_t rows, std::int64_t cols, float* out);

namespace detail {
// Transposes the whole kLanes x kLanes blocks and returns the number of leading rows and columns they
// covered (rows_done, cols_done); the caller moves the rest.
using TransposeFn = void (*)(const float* in, std::int64_t rows, std::int64_t cols, float* out,
                             std::int64_t& rows_done, std::int64_t& cols_done);
TransposeFn transpose_avx2();    // nullptr when not compiled in
TransposeFn transpose_avx512();  // nullptr when not compiled in
}  // namespace detail

}  // namespace samebits::transpose
