// RMSNorm (docs/numerics.md §4) and the embedding gather (docs/numerics.md §5): scalar twins and fast paths.
#pragma once

#include <cstdint>

namespace samebits::rmsnorm {

// y[r, :] = RMSNorm(x[r, :]) * w for rows r < rows, each row of width d >= 1:
// serial flushed sum of squares, mean = F(DIV(acc, d)), rstd = F(rsqrtf(F(mean + eps))),
// y_j = F(MUL(F(w_j), F(MUL(F(x_j), rstd)))). y may alias x.
void rmsnorm_reference(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d,
                       float eps);
// The same bits: rows of SIMD lanes run their serial chains side by side; rows split over threads.
void rmsnorm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d, float eps);
// rmsnorm on the calling thread only (for callers that already split their work over threads).
void rmsnorm_serial(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d, float eps);

// out[t, :] = F(table[ids[t], :]) for t < count; every id must already be in [0, vocab).
void embedding_reference(const float* table, std::int64_t d, const std::int32_t* ids, std::int64_t count,
                         float* out);
void embedding(const float* table, std::int64_t d, const std::int32_t* ids, std::int64_t count, float* out);

namespace detail {
// Per-target kernels: a block of `lanes` rows (stride d) side by side, and single rows.
using RmsnormBlock = void (*)(const float* x, const float* w, float* y, std::int64_t d, float eps);
using RmsnormRows = void (*)(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d,
                             float eps);
struct RmsnormKernels {
  int lanes;
  RmsnormBlock block;  // exactly `lanes` rows
  RmsnormRows rows;    // any number of rows, one at a time
};
RmsnormKernels rmsnorm_avx2();
RmsnormKernels rmsnorm_avx512();
// The scalar per-row steps, shared by the twin and the kernels' row tails.
float rmsnorm_rstd(float sum_of_squares, std::int64_t d, float eps);
}  // namespace detail

}  // namespace samebits::rmsnorm
