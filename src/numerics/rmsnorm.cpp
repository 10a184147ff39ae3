// RMSNorm and embedding: the scalar twins, and drivers that dispatch row blocks to SIMD kernels.
#include "numerics/rmsnorm.hpp"

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::rmsnorm {

using fp::DIV;
using fp::F;
using fp::FMA;
using fp::MUL;

namespace detail {
float rmsnorm_rstd(float sum_of_squares, std::int64_t d, float eps) {
  const float mean = F(DIV(sum_of_squares, static_cast<float>(d)));
  return F(primitives::rsqrtf(F(mean + eps)));
}
}  // namespace detail

namespace {

void rmsnorm_rows_scalar(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d,
                         float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float acc = 0.0f;
    for (std::int64_t j = 0; j < d; ++j) {
      const float xj = F(xr[j]);
      acc = F(FMA(xj, xj, acc));
    }
    const float rstd = detail::rmsnorm_rstd(acc, d, eps);
    float* yr = y + r * d;
    for (std::int64_t j = 0; j < d; ++j) yr[j] = F(MUL(F(w[j]), F(MUL(F(xr[j]), rstd))));
  }
}

}  // namespace

void rmsnorm_reference(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d,
                       float eps) {
  rmsnorm_rows_scalar(x, w, y, rows, d, eps);
}

namespace {

// Row blocks [begin, end) of `lanes` rows each.
void rmsnorm_blocks(const detail::RmsnormKernels& kernels, std::int64_t lanes, std::int64_t begin,
                    std::int64_t end, const float* x, const float* w, float* y, std::int64_t rows,
                    std::int64_t d, float eps) {
  for (std::int64_t b = begin; b < end; ++b) {
    const std::int64_t row0 = b * lanes;
    const std::int64_t count = rows - row0 < lanes ? rows - row0 : lanes;
    // Lane offsets are int32 (row * d), so very wide rows take the scalar path.
    if (kernels.block && count == lanes && d <= (std::int64_t{1} << 26))
      kernels.block(x + row0 * d, w, y + row0 * d, d, eps);
    else if (kernels.rows)
      kernels.rows(x + row0 * d, w, y + row0 * d, count, d, eps);
    else
      rmsnorm_rows_scalar(x + row0 * d, w, y + row0 * d, count, d, eps);
  }
}

}  // namespace

void rmsnorm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d, float eps) {
  const detail::RmsnormKernels kernels = simd::kernels().rmsnorm;
  const std::int64_t lanes = kernels.block ? kernels.lanes : 1;
  const std::int64_t blocks = (rows + lanes - 1) / lanes;
  parallel_for(blocks, [&](std::int64_t begin, std::int64_t end) {
    rmsnorm_blocks(kernels, lanes, begin, end, x, w, y, rows, d, eps);
  });
}

void rmsnorm_serial(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d, float eps) {
  const detail::RmsnormKernels kernels = simd::kernels().rmsnorm;
  const std::int64_t lanes = kernels.block ? kernels.lanes : 1;
  rmsnorm_blocks(kernels, lanes, 0, (rows + lanes - 1) / lanes, x, w, y, rows, d, eps);
}

void embedding_reference(const float* table, std::int64_t d, const std::int32_t* ids, std::int64_t count,
                         float* out) {
  for (std::int64_t t = 0; t < count; ++t) {
    const float* row = table + static_cast<std::int64_t>(ids[t]) * d;
    for (std::int64_t j = 0; j < d; ++j) out[t * d + j] = F(row[j]);
  }
}

void embedding(const float* table, std::int64_t d, const std::int32_t* ids, std::int64_t count, float* out) {
  parallel_for(
      count,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t)
          vector_math::flush(table + static_cast<std::int64_t>(ids[t]) * d, out + t * d,
                             static_cast<std::size_t>(d));
      },
      16);
}

}  // namespace samebits::rmsnorm
