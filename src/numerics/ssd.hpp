// Kernels of the Mamba-2 SSD chunk (docs/blocks.md §2.3 step 7) for decode-sized work: single-row GEMM cells
// that need no packing, the segment-sum row extension with its Mm row, and the fused boundary update.
// Each has a literal scalar twin; the fast versions put independent output cells in SIMD lanes and keep
// every chain (GEMM leaf, running sum) serial in its lane.
#pragma once

#include <cstdint>

namespace samebits::ssd {

// One output row of the GEMM profile (docs/numerics.md §3): out[j] = cell(a[0..k), B_eff[., j]) for j < n,
// leaf length L(k), leaves folded by the balanced tree. NT: B_eff[p][j] = b[j * ldb + p];
// NN: B_eff[p][j] = b[p * ldb + j]. Cell values equal gemm_reference's bit for bit.
void row_gemm_nt_reference(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                           float* out);
void row_gemm_nt(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                 float* out);
void row_gemm_nn_reference(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                           float* out);
void row_gemm_nn(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                 float* out);

// row_gemm_nn over the first `real` rows of B: B_eff[p][j] = b[p * ldb + j] for p < real and +0.0 for
// real <= p < k (the chunk's padding, never read). A decode step's Ydiag row reads only the open chunk's
// kept Xd rows.
void row_gemm_nn_rows_reference(const float* a, const float* b, std::int64_t ldb, std::int64_t real,
                                std::int64_t n, std::int64_t k, float* out);
void row_gemm_nn_rows(const float* a, const float* b, std::int64_t ldb, std::int64_t real, std::int64_t n,
                      std::int64_t k, float* out);

// Row i >= 1 of the segment sums and of M = G o L for one head. `frontier` holds acc_j for j < i - 1
// (each column j's running sum through row i - 1) and is extended in place to j < i:
//   acc_j = F(acc_j + dA_i) for j < i - 1;  acc_{i-1} = F(+0.0 + dA_i).
// Then mm[j] = F(MUL(F(g[j]), F(F(expf(acc_j))))) for j < i, mm[i] = F(MUL(F(g[i]), F(expf(+0.0)))),
// and mm[j] = +0.0 for i < j < width. Row 0 is i = 0: no frontier, mm[0] from the diagonal only.
void segsum_row_reference(float* frontier, std::int64_t i, float dA_i, const float* g, float* mm,
                          std::int64_t width);
void segsum_row(float* frontier, std::int64_t i, float dA_i, const float* g, float* mm, std::int64_t width);

// out[e] = F(FMA(scale, F(h[e]), F(c[e]))) for e < n (the chunk pass). out may equal h.
void chunk_pass_reference(float scale, const float* h, const float* c, float* out, std::int64_t n);
void chunk_pass(float scale, const float* h, const float* c, float* out, std::int64_t n);

// out[e] = F(MUL(F(x[e]), scale)) for e < n (the discretized Xd rows: x times a flushed dt). out may be x.
void scale_reference(const float* x, float scale, float* out, std::int64_t n);
void scale(const float* x, float scale, float* out, std::int64_t n);

namespace detail {
// Per-target kernels; each returns the first output index it did not handle (the caller finishes the
// tail with the twin). segsum_prefix steps the columns j < count (segsum_row hands it the fresh column
// too, its frontier set to +0.0).
struct SsdKernels {
  std::int64_t (*row_gemm_nt)(const float* a, const float* b, std::int64_t ldb, std::int64_t n,
                              std::int64_t k, float* out);
  std::int64_t (*row_gemm_nn_rows)(const float* a, const float* b, std::int64_t ldb, std::int64_t real,
                                   std::int64_t n, std::int64_t k, float* out);
  std::int64_t (*segsum_prefix)(float* frontier, std::int64_t count, float dA_i, const float* g, float* mm);
  std::int64_t (*chunk_pass)(float scale, const float* h, const float* c, float* out, std::int64_t n);
  std::int64_t (*scale)(const float* x, float scale, float* out, std::int64_t n);
};
const SsdKernels* ssd_kernels_avx2();
const SsdKernels* ssd_kernels_avx512();
}  // namespace detail

}  // namespace samebits::ssd
