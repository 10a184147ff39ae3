// GEMM profile mojolearn.identical.gemm.fp32.v1 (docs/numerics.md §3): leaf-128 serial FMA chains and a
// balanced pairwise fold. gemm_reference is the literal scalar twin; gemm / gemm_packed are the fast
// paths (SIMD across output columns, register tiles, threads over output tiles) with the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_buffer.hpp"

namespace samebits::gemm {

enum class Orientation {
  NT,  // C[m,n] = A[m,k] * B[n,k]^T   (every nn.Linear: y = x W^T, W stored [out, in])
  NN,  // C[m,n] = A[m,k] * B[k,n]
  TN,  // C[m,n] = A[k,m]^T * B[k,n]
};

// True in a test-only build whose fast kernels walk each leaf backwards (SAMEBITS_SABOTAGE_REVERSED_LEAF):
// its bitwise suite must fail, and the Python package refuses to load it unless explicitly allowed.
bool sabotage_build();

// Leaf length L(k) of docs/numerics.md §3.2 (0 when k <= 0).
std::int64_t leaf_length(std::int64_t k);

// Folds partials[0..count) in place with the balanced adjacent-pair tree of docs/numerics.md §3.3 and
// returns F(root). count >= 1.
float fold_partials(float* partials, std::int64_t count);

// The scalar twin: follows docs/numerics.md §3 literally, one cell at a time, single-threaded.
void gemm_reference(Orientation orientation, const float* A, const float* B, float* C, std::int64_t m,
                    std::int64_t n, std::int64_t k);

// Columns per packed panel; the fast kernels of every target tile by this width.
inline constexpr std::int64_t kPanelWidth = 32;

// The right operand B_eff[k, n] prepared for the fast kernels: flushed by F once, cut into panels of
// kPanelWidth columns, each panel stored p-major ([k][32]) with zero columns past n. The few values F
// changed (subnormals) are remembered beside the panels, so the operand it was packed from can be
// copied back out bit for bit: the panels can be the only copy of a weight matrix.
class PackedRhs {
 public:
  PackedRhs() = default;
  // W stored [n, k] (NT orientation: weights of a linear layer). A model's weights go to the weight
  // pool (Placement::kWeightPool); operands packed for one call stay on the heap.
  static PackedRhs from_transposed(const float* W, std::int64_t n, std::int64_t k,
                                   Placement placement = Placement::kHeap);
  // B stored [k, n] (NN and TN orientations).
  static PackedRhs from_row_major(const float* B, std::int64_t k, std::int64_t n,
                                  Placement placement = Placement::kHeap);
  PackedRhs clone() const;  // in the same placement

  std::int64_t n() const { return n_; }
  std::int64_t k() const { return k_; }
  std::int64_t panel_count() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }
  const float* panel(std::int64_t index) const { return data_.data() + index * k_ * kPanelWidth; }
  // B_eff[p, j] as packed (already flushed).
  float at(std::int64_t p, std::int64_t j) const {
    return data_[(j / kPanelWidth) * k_ * kPanelWidth + p * kPanelWidth + j % kPanelWidth];
  }

  // The exact operand it was packed from (every bit, subnormals included), in the [n, k] layout of
  // from_transposed: rows [first, first + count) of W into W_out (count * k floats).
  void unpack_transposed(std::int64_t first, std::int64_t count, float* W_out) const;
  std::vector<float> unpack_transposed() const;
  // The same in the [k, n] layout of from_row_major (k * n floats).
  void unpack_row_major(float* B_out) const;
  // Rows ids[t] of the [n, k] operand as the panels hold them, flushed (F of each value), into
  // out[t * k ...]: a tied embedding gathered from the packed head (threads over t).
  void gather_rows_flushed(const std::int32_t* ids, std::int64_t count, float* out) const;
  // Bytes held (panels and remembered subnormals): what the packed copy costs.
  std::size_t bytes() const;

 private:
  // n x k of zero panels in `placement`.
  PackedRhs(std::int64_t n, std::int64_t k, Placement placement);
  void remember_flushed(std::int64_t p, std::int64_t j, float original);
  void restore_flushed(std::int64_t first, std::int64_t count, float* W_out) const;

  std::int64_t n_ = 0;
  std::int64_t k_ = 0;
  AlignedBuffer<float> data_;
  // One word per value F changed, sorted: (j * k + p) << 23 | the 23 mantissa bits (the sign survives
  // in the packed zero). Empty for weights without subnormals.
  std::vector<std::uint64_t> flushed_;
};

// Strided left operand: A_eff[i, p] = data[i * row_stride + p * depth_stride].
struct LhsView {
  const float* data;
  std::int64_t row_stride;
  std::int64_t depth_stride;
};

// C[m, rhs.n()] (row-major, leading dimension rhs.n()) = A_eff * B_eff, bitwise equal to the twin.
// Dispatches on simd::active_target() and splits output tiles over the thread pool.
void gemm_packed(LhsView A, std::int64_t m, const PackedRhs& rhs, float* C);

// The columns of panels [first_panel, first_panel + panel_count) of C only, on the calling thread: for a
// parallel task that owns those columns (C keeps leading dimension rhs.n()). The same bits as gemm_packed.
void gemm_packed_panels(LhsView A, std::int64_t m, const PackedRhs& rhs, std::int64_t first_panel,
                        std::int64_t panel_count, float* C);

// Convenience fast path on unpacked operands (packs B per call).
void gemm(Orientation orientation, const float* A, const float* B, float* C, std::int64_t m, std::int64_t n,
          std::int64_t k);

}  // namespace samebits::gemm
