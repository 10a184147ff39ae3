// Scalar twins of the SSD decode kernels and their dispatch to the SIMD versions.
#include "numerics/ssd.hpp"

#include <algorithm>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::ssd {

using fp::F;
using fp::FMA;
using fp::MUL;

namespace {

const detail::SsdKernels* active_kernels() { return simd::kernels().ssd; }

// One cell of the GEMM profile, with B_eff read through `at(p)`.
template <typename At>
float gemm_cell(const float* a, std::int64_t k, At at) {
  if (k <= 0) return 0.0f;
  const std::int64_t leaf = gemm::leaf_length(k);
  const std::int64_t leaves = (k + leaf - 1) / leaf;
  std::vector<float> partials(static_cast<std::size_t>(leaves));
  for (std::int64_t t = 0; t < leaves; ++t) {
    float acc = 0.0f;
    const std::int64_t end = std::min(k, (t + 1) * leaf);
    for (std::int64_t p = t * leaf; p < end; ++p) acc = F(FMA(F(a[p]), F(at(p)), acc));
    partials[t] = F(acc);
  }
  return gemm::fold_partials(partials.data(), leaves);
}

}  // namespace

void row_gemm_nt_reference(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                           float* out) {
  for (std::int64_t j = 0; j < n; ++j)
    out[j] = gemm_cell(a, k, [&](std::int64_t p) { return b[j * ldb + p]; });
}

void row_gemm_nn_reference(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                           float* out) {
  for (std::int64_t j = 0; j < n; ++j)
    out[j] = gemm_cell(a, k, [&](std::int64_t p) { return b[p * ldb + j]; });
}

void row_gemm_nt(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                 float* out) {
  std::int64_t done = 0;
  if (const detail::SsdKernels* kernels = active_kernels()) done = kernels->row_gemm_nt(a, b, ldb, n, k, out);
  if (done < n) row_gemm_nt_reference(a, b + done * ldb, ldb, n - done, k, out + done);
}

void row_gemm_nn(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                 float* out) {
  row_gemm_nn_rows(a, b, ldb, k, n, k, out);  // every row real
}

void row_gemm_nn_rows_reference(const float* a, const float* b, std::int64_t ldb, std::int64_t real,
                                std::int64_t n, std::int64_t k, float* out) {
  for (std::int64_t j = 0; j < n; ++j)
    out[j] = gemm_cell(a, k, [&](std::int64_t p) { return p < real ? b[p * ldb + j] : 0.0f; });
}

void row_gemm_nn_rows(const float* a, const float* b, std::int64_t ldb, std::int64_t real, std::int64_t n,
                      std::int64_t k, float* out) {
  std::int64_t done = 0;
  if (const detail::SsdKernels* kernels = active_kernels())
    done = kernels->row_gemm_nn_rows(a, b, ldb, real, n, k, out);
  if (done < n) row_gemm_nn_rows_reference(a, b + done, ldb, real, n - done, k, out + done);
}

namespace {
// The columns j < i - 1 of a segsum row (the part the SIMD kernels vectorize), from index `from`.
void segsum_prefix_scalar(float* frontier, std::int64_t from, std::int64_t count, float dA_i, const float* g,
                          float* mm) {
  for (std::int64_t j = from; j < count; ++j) {
    frontier[j] = F(frontier[j] + dA_i);
    mm[j] = F(MUL(F(g[j]), F(F(primitives::expf(frontier[j])))));
  }
}

// Column i - 1: a fresh running sum.
void segsum_fresh_column(float* frontier, std::int64_t i, float dA_i, const float* g, float* mm) {
  frontier[i - 1] = F(0.0f + dA_i);
  mm[i - 1] = F(MUL(F(g[i - 1]), F(F(primitives::expf(frontier[i - 1])))));
}

// The diagonal and the structural zeros.
void segsum_diagonal(std::int64_t i, const float* g, float* mm, std::int64_t width) {
  static const float diagonal =
      F(F(primitives::expf(0.0f)));  // Lseg[i][i] = expf(+0.0), one value for every row
  mm[i] = F(MUL(F(g[i]), diagonal));
  for (std::int64_t j = i + 1; j < width; ++j) mm[j] = 0.0f;
}
}  // namespace

void segsum_row_reference(float* frontier, std::int64_t i, float dA_i, const float* g, float* mm,
                          std::int64_t width) {
  segsum_prefix_scalar(frontier, 0, i - 1, dA_i, g, mm);
  if (i >= 1) segsum_fresh_column(frontier, i, dA_i, g, mm);
  segsum_diagonal(i, g, mm, width);
}

void segsum_row(float* frontier, std::int64_t i, float dA_i, const float* g, float* mm, std::int64_t width) {
  if (i >= 1) {
    // The fresh column's F(+0.0 + dA_i) is the prefix's own step on a +0.0 frontier, so it joins the
    // vectorized columns.
    frontier[i - 1] = 0.0f;
    std::int64_t done = 0;
    if (const detail::SsdKernels* kernels = active_kernels())
      done = kernels->segsum_prefix(frontier, i, dA_i, g, mm);
    segsum_prefix_scalar(frontier, done, i, dA_i, g, mm);
  }
  segsum_diagonal(i, g, mm, width);
}

void chunk_pass_reference(float scale, const float* h, const float* c, float* out, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e) out[e] = F(FMA(scale, F(h[e]), F(c[e])));
}

void chunk_pass(float scale, const float* h, const float* c, float* out, std::int64_t n) {
  std::int64_t done = 0;
  if (const detail::SsdKernels* kernels = active_kernels()) done = kernels->chunk_pass(scale, h, c, out, n);
  if (done < n) chunk_pass_reference(scale, h + done, c + done, out + done, n - done);
}

void scale_reference(const float* x, float scale, float* out, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e) out[e] = F(MUL(F(x[e]), scale));
}

void scale(const float* x, float scale, float* out, std::int64_t n) {
  std::int64_t done = 0;
  if (const detail::SsdKernels* kernels = active_kernels()) done = kernels->scale(x, scale, out, n);
  if (done < n) scale_reference(x + done, scale, out + done, n - done);
}

}  // namespace samebits::ssd
