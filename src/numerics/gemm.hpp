// GEMM profile mojolearn.identical.gemm.fp32.v1 (docs/numerics.md §3): leaf-128 serial FMA chains and a
// balanced pairwise fold. gemm_reference is the literal scalar twin; gemm / gemm_packed are the fast
// paths (SIMD across output columns, register tiles, threads over output tiles) with the same bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "numerics/gemm_kernels.hpp"

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

// The fp16 bits of `value` when it is exactly an fp16 value (either zero), nothing otherwise.
std::optional<std::uint16_t> exact_half(float value);

// Rows of one GGUF tensor for PackedRhs::from_ggml: `rows` rows of k elements of ggml type `type`, stored
// back to back at `bytes` as in the file. Output row r takes stored row row_order[r] (all rows in order
// when empty): llama's permuted Q/K rows can be put back in their original order while packing.
struct GgmlPart {
  std::string name;  // for messages
  std::uint32_t type = 0;
  const unsigned char* bytes = nullptr;
  std::int64_t rows = 0;
  std::vector<std::int64_t> row_order;
};

// The right operand B_eff[k, n] prepared for the fast kernels: flushed by F once, cut into panels of
// kPanelWidth columns, each panel stored p-major ([k][32]) with zero columns past n. The few values F
// changed (subnormals) are remembered beside the panels, so the operand it was packed from can be
// copied back out bit for bit: the panels can be the only copy of a weight matrix.
// The panels hold each value in one of the PanelStorage forms and the kernels widen it to its float32 in
// registers (docs/numerics.md §3.6): a model weight (Placement::kWeightPool) is kept in the narrowest form
// that reproduces every one of its values exactly (per-row int8 codes, bfloat16, or float32), and a GGUF
// tensor keeps its own codes and scales (from_ggml). Only bytes change, never a bit of a result.
class PackedRhs {
 public:
  PackedRhs() = default;
  // W stored [n, k] (NT orientation: weights of a linear layer). A model's weights go to the weight
  // pool (Placement::kWeightPool) and are stored in their narrowest exact form; operands packed for one
  // call stay on the heap as float32.
  static PackedRhs from_transposed(const float* W, std::int64_t n, std::int64_t k,
                                   Placement placement = Placement::kHeap);
  // The same in a chosen storage: F32 always; BF16 when every value is a bfloat16; Codes8 when each row
  // is int8 codes times one scale (samebits' lowbit int8). Nothing when the values do not allow it.
  static std::optional<PackedRhs> from_transposed_as(const float* W, std::int64_t n, std::int64_t k,
                                                     PanelStorage storage, Placement placement);
  // A GGUF tensor of ggml type `type` (docs/gguf.md §5), n rows of k elements stored back to back in
  // `bytes` as in the file, kept in its own codes and scales: the GEMM reads the values the scalar twin
  // ggml_dequantize_twin gives, bit for bit. Throws a value error naming `name` for a type it cannot keep
  // packed, a k that is not whole blocks, or a non-finite scale.
  static PackedRhs from_ggml(const std::string& name, std::uint32_t type, const unsigned char* bytes,
                             std::int64_t n, std::int64_t k, Placement placement = Placement::kWeightPool);
  // Several tensors stacked as rows of one operand (q, k and v; gate and up), in order. Parts of one
  // quantized layout keep it; parts of different types share int8 codes with offsets in 16-row blocks.
  static PackedRhs from_ggml(const std::vector<GgmlPart>& parts, std::int64_t k,
                             Placement placement = Placement::kWeightPool);
  // B stored [k, n] (NN and TN orientations).
  static PackedRhs from_row_major(const float* B, std::int64_t k, std::int64_t n,
                                  Placement placement = Placement::kHeap);
  PackedRhs clone() const;  // in the same placement

  std::int64_t n() const { return n_; }
  std::int64_t k() const { return k_; }
  PanelStorage storage() const { return storage_; }
  std::int64_t panel_count() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }
  // Panel `index` as stored, panel_bytes() apart; block formats cut the depth into block_depth() rows.
  const unsigned char* panel(std::int64_t index) const { return data_.data() + index * panel_bytes_; }
  std::int64_t panel_bytes() const { return panel_bytes_; }
  std::int64_t block_depth() const { return block_depth_; }
  // Block formats: the blocks' scales and offsets are fp16 (every one is an fp16 value, as in GGUF's
  // Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0), so the panels hold as many bytes per weight as the file.
  bool half_headers() const { return half_headers_; }
  // B_eff[p, j] as the kernels see it (widened, already flushed).
  float at(std::int64_t p, std::int64_t j) const;

  // The exact operand it was packed from (every bit, subnormals included), in the [n, k] layout of
  // from_transposed: rows [first, first + count) of W into W_out (count * k floats).
  void unpack_transposed(std::int64_t first, std::int64_t count, float* W_out) const;
  std::vector<float> unpack_transposed() const;
  // The same in the [k, n] layout of from_row_major (k * n floats).
  void unpack_row_major(float* B_out) const;
  // Rows ids[t] of the [n, k] operand as the panels hold them, flushed (F of each value), into
  // out[t * k ...]: a tied embedding gathered from the packed head (threads over t).
  void gather_rows_flushed(const std::int32_t* ids, std::int64_t count, float* out) const;
  // Bytes held (panels and remembered subnormals): what the packed copy costs, and what a GEMM reads.
  std::size_t bytes() const;

 private:
  // n x k of zero panels in `storage` (block formats: blocks of block_depth rows) in `placement`.
  PackedRhs(std::int64_t n, std::int64_t k, PanelStorage storage, std::int64_t block_depth,
            Placement placement, bool half_headers = false);
  // Bytes of one block's header: per-column scales (and offsets), float32 or fp16.
  std::int64_t header_bytes() const;
  // Entry `index` of a block header (scales first, then offsets) as float32.
  float header_value(const unsigned char* head, std::int64_t index) const;
  void remember_flushed(std::int64_t p, std::int64_t j, float original);
  void restore_flushed(std::int64_t first, std::int64_t count, float* W_out) const;
  // The bytes of block `block` of panel `panel` (block formats): scales, offsets, then the codes.
  unsigned char* block_at(std::int64_t panel, std::int64_t block);
  const unsigned char* block_at(std::int64_t panel, std::int64_t block) const;
  // Column j's codes for depths p .. p + count - 1, all in one block (a loader's run under one scale), and
  // its scale and offset for depth p (block formats).
  void set_code_run(std::int64_t p, std::int64_t j, const std::int32_t* codes, std::int64_t count);
  void set_scale(std::int64_t p, std::int64_t j, float scale, float offset);
  // Rows [first, first + count) of B_eff (W layout) as the panels hold them, before the subnormals return.
  void widen_rows(std::int64_t first, std::int64_t count, float* W_out) const;
  // Block formats: row j of B_eff (W layout, k floats) into row, block by block.
  void widen_block_rows(std::int64_t j, float* row) const;

  std::int64_t n_ = 0;
  std::int64_t k_ = 0;
  PanelStorage storage_ = PanelStorage::F32;
  std::int64_t block_depth_ = 0;
  bool half_headers_ = false;
  std::int64_t panel_bytes_ = 0;
  AlignedBuffer<unsigned char> data_;
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
