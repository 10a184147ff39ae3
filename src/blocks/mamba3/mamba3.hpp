// Mamba-3 SISO block (blocks.md 3): profile constants, the nine weights, the carried state and the block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "numerics/gemm.hpp"

namespace samebits::blocks {

namespace mamba3 {
inline constexpr std::int64_t kChunk = 64;       // Q: part of the arithmetic, never a tuning knob
inline constexpr std::int64_t kStateDim = 128;   // N: q/k width per head
inline constexpr std::int64_t kHeadDim = 64;     // P: v width per head
inline constexpr std::int64_t kAngles = 32;      // R: rotated interleaved pairs (rope fraction 0.5)
inline constexpr std::int64_t kDModelStep = 32;  // d_model must be a multiple of this (H = 2 dm / 64)
}  // namespace mamba3

// Sizes and in_proj column offsets for one d_model (a positive multiple of 32).
struct Mamba3Dims {
  std::int64_t d_model = 0;
  std::int64_t d_inner = 0;    // 2 d_model
  std::int64_t heads = 0;      // d_inner / 64
  std::int64_t d_in_proj = 0;  // 2 di + 256 + 3 H + 32

  static Mamba3Dims of(std::int64_t d_model);
  std::int64_t col_z() const { return 0; }
  std::int64_t col_x() const { return d_inner; }
  std::int64_t col_b() const { return 2 * d_inner; }
  std::int64_t col_c() const { return 2 * d_inner + mamba3::kStateDim; }
  std::int64_t col_dt() const { return 2 * d_inner + 2 * mamba3::kStateDim; }
  std::int64_t col_a() const { return col_dt() + heads; }
  std::int64_t col_trap() const { return col_dt() + 2 * heads; }
  std::int64_t col_angle() const { return col_dt() + 3 * heads; }
};

// One named weight: the upstream parameter name and its exact shape.
struct Mamba3TensorSpec {
  const char* name;
  std::vector<std::int64_t> shape;
  std::int64_t elements() const;
};

// The nine tensors in upstream order (blocks.md 3.1) for these dims: the one table every check reads.
std::vector<Mamba3TensorSpec> mamba3_tensors(const Mamba3Dims& dims);
inline constexpr int kMamba3TensorCount = 9;

// The nine weights, row-major, in table order (block_norm.weight, in_proj.weight, dt_bias,
// B_norm.weight, C_norm.weight, B_bias, C_bias, D, out_proj.weight).
struct Mamba3Weights {
  std::vector<float> tensors[kMamba3TensorCount];
  const std::vector<float>& block_norm() const { return tensors[0]; }
  const std::vector<float>& in_proj() const { return tensors[1]; }
  const std::vector<float>& dt_bias() const { return tensors[2]; }
  const std::vector<float>& b_norm() const { return tensors[3]; }
  const std::vector<float>& c_norm() const { return tensors[4]; }
  const std::vector<float>& b_bias() const { return tensors[5]; }
  const std::vector<float>& c_bias() const { return tensors[6]; }
  const std::vector<float>& d_skip() const { return tensors[7]; }
  const std::vector<float>& out_proj() const { return tensors[8]; }
};

// The carried state of blocks.md 3.2: ten float32 arrays in upstream layout, buffered_tokens and pending.
// It owns its memory; the arrays may be read and written from outside between calls (the Python
// binding exposes them as writable views), so nothing derived from them is trusted without a check.
class Mamba3State {
 public:
  Mamba3State() = default;
  Mamba3State(std::int64_t batch, std::int64_t heads);
  Mamba3State(Mamba3State&&) noexcept = default;
  Mamba3State& operator=(Mamba3State&&) noexcept = default;
  Mamba3State clone() const;

  std::int64_t batch() const { return batch_; }
  std::int64_t heads() const { return heads_; }

  // Piece shapes, in the native argument order (theta, h, buffer_qrot, buffer_krot, buffer_v,
  // buffer_dt, buffer_sig, buffer_adt, pending_k, pending_v).
  static constexpr int kPieceCount = 10;
  static const char* piece_name(int piece);
  std::vector<std::int64_t> piece_shape(int piece) const { return piece_shape_for(piece, batch_, heads_); }
  static std::vector<std::int64_t> piece_shape_for(int piece, std::int64_t batch, std::int64_t heads);
  enum Piece : int { kTheta, kH, kQrot, kKrot, kV, kDt, kSig, kAdt, kPendingK, kPendingV };
  // Every mutable accessor hands memory to an outside writer: it marks the state exposed (see trusted()).
  float* piece(int piece);
  const float* piece(int piece) const;
  std::int64_t piece_elements(int piece) const;

  float* theta() { return exposed(theta_); }
  float* h() { return exposed(h_); }
  float* buffer_qrot() { return exposed(buffer_qrot_); }
  float* buffer_krot() { return exposed(buffer_krot_); }
  float* buffer_v() { return exposed(buffer_v_); }
  float* buffer_dt() { return exposed(buffer_dt_); }
  float* buffer_sig() { return exposed(buffer_sig_); }
  float* buffer_adt() { return exposed(buffer_adt_); }
  float* pending_k() { return exposed(pending_k_); }
  float* pending_v() { return exposed(pending_v_); }
  const float* theta() const { return theta_.data(); }
  const float* h() const { return h_.data(); }
  const float* buffer_qrot() const { return buffer_qrot_.data(); }
  const float* buffer_krot() const { return buffer_krot_.data(); }
  const float* buffer_v() const { return buffer_v_.data(); }
  const float* buffer_dt() const { return buffer_dt_.data(); }
  const float* buffer_sig() const { return buffer_sig_.data(); }
  const float* buffer_adt() const { return buffer_adt_.data(); }
  const float* pending_k() const { return pending_k_.data(); }
  const float* pending_v() const { return pending_v_.data(); }

  // Valid rows of the open-chunk buffer: 0 before the first token, in [1, 64] after any call. Settable
  // to anything; a call refuses a value outside [0, 64] before touching the state.
  std::int64_t buffered_tokens = 0;
  // True marks theta / h / pending_k / pending_v as an upstream Input_States continuation; the next
  // call consumes it.
  bool pending = false;

  // Copies the four pieces' bits (sizes B*H*32, B*H*64*128, B*H*128, B*H*64) and sets pending. Whether
  // the state is fresh is judged by the next call, as upstream does.
  void set_input_states(const float* theta, const float* h, const float* k, const float* v);

  // The decode cache: what the open chunk already computed, per (batch row, head). Derived only from
  // buffer_adt's first `rows` rows, whose bits it keeps to prove itself still current.
  struct OpenChunkCache {
    bool valid = false;
    std::int64_t rows = 0;
    AlignedBuffer<float> adt;     // [B, H, 64] the buffer_adt bits the cache was built from
    AlignedBuffer<float> dacs;    // [B, H, 64] running sums of adt (blocks.md 3.3 step 12)
    AlignedBuffer<float> colacc;  // [B, H, 64] Lseg column sums at row rows-1 (step 13), j < rows-1
  };
  OpenChunkCache& open_chunk_cache() { return cache_; }

  // Whether every piece is known finite without a scan, so that a call may skip its non-finite scan of
  // the state (blocks.md 3.3 step 1 then has nothing to find). It holds after the engine's own calls,
  // which check every value they write, while no outside writer can reach the memory: a mutable accessor
  // above (how callers, tests and the Python views write pieces) or set_input_states ends it, and the
  // state stays exposed until forget_handouts() declares every pointer handed out gone (the Python
  // binding says so when no view of the state is alive). A fresh state (all zeros) is trusted.
  bool trusted() const { return trusted_ && !exposed_; }
  void forget_handouts() { exposed_ = false; }

  // Engine access (the block's own calls and their undo): no exposure; whoever writes through it untrusts
  // the state first and trusts it again only after checking what it wrote.
  float* engine_piece(int piece) { return buffer_of(piece)->data(); }
  // h transposed per (batch row, head), [B, H, 128, 64], for the state read-out of decode rows (one
  // contiguous row per state index). Current only as the engine last left it: a mutable accessor or
  // set_input_states drops it, and the engine relies on it only for a state trusted at the start of a call.
  float* engine_h_transposed();
  void transpose_h();  // writes the copy from h
  bool h_transposed_current() const { return h_t_current_; }
  void set_h_transposed_current(bool current) { h_t_current_ = current; }
  // buffer_krot transposed per (batch row, head), [B, H, 128, 64]: the open chunk's rotated keys as
  // columns, so that a decode row's scores load a vector of keys per state index. Current, under the same
  // rule as h's copy, for the first krot_transposed_rows() slots (buffered_tokens is settable, so a call
  // relies on it only when its buffered rows lie inside them).
  float* engine_krot_transposed();
  // Copies buffer slots [first, end) into it; the slots before `first` must be current already.
  void mirror_krot(std::int64_t first_slot, std::int64_t end_slot);
  std::int64_t krot_transposed_rows() const { return krot_t_rows_; }
  bool krot_transposed_current() const { return krot_t_current_; }
  void set_krot_transposed_current(bool current) { krot_t_current_ = current; }
  // Drops both copies (an outside writer, Input_States, a call that was undone).
  void drop_derived_copies() {
    h_t_current_ = false;
    krot_t_current_ = false;
  }
  void untrust() { trusted_ = false; }
  // After an engine call whose writes were (or were not) all finite. A state exposed during the call stays
  // untrusted: a view still alive may write it before it is forgotten.
  void trust_after_call(bool writes_finite) { trusted_ = writes_finite && !exposed_; }
  // What a call of `length` new tokens writes, from the state as it is before that call (blocks.md 3.3
  // step 18): theta; h when the call seals a chunk or consumes Input_States; pending_k / pending_v
  // (zeroed) when it consumes them; and per batch row the last working chunk's rows from
  // max(chunk start, buffered_tokens) in the six buffers.
  struct Span {
    float* at;
    std::int64_t count;
  };
  std::vector<Span> spans_written_by(std::int64_t length);

 private:
  AlignedBuffer<float>* buffer_of(int piece);
  float* exposed(AlignedBuffer<float>& buffer) {
    exposed_ = true;
    trusted_ = false;  // what is written through it before forget_handouts() is scanned by the next call
    drop_derived_copies();
    return buffer.data();
  }

  std::int64_t batch_ = 0;
  std::int64_t heads_ = 0;
  AlignedBuffer<float> theta_, h_, buffer_qrot_, buffer_krot_, buffer_v_, buffer_dt_, buffer_sig_,
      buffer_adt_, pending_k_, pending_v_;
  OpenChunkCache cache_;
  bool trusted_ = true;
  bool exposed_ = false;
  AlignedBuffer<float> h_t_;  // see engine_h_transposed
  bool h_t_current_ = false;
  AlignedBuffer<float> krot_t_;  // see engine_krot_transposed
  bool krot_t_current_ = false;
  std::int64_t krot_t_rows_ = 0;
};

// The reports of blocks.md 3.2, written after a call when asked for.
struct Mamba3Reports {
  std::vector<float> h_last;      // [B, H, 64, 128] h after the final working chunk
  std::vector<float> k_last;      // [B, H, 128] rotated, pre-scale k of the last working row
  std::vector<float> v_last;      // [B, H, 64] raw v of the last working row
  std::vector<float> theta_last;  // [B, H, 32] the angles after the last token
};

// The block: immutable weights (projections packed once, their raw buffers released) and one forward
// for every call shape.
class Mamba3Block {
 public:
  // Sizes must match mamba3_tensors(Mamba3Dims::of(d_model)) with d_model = block_norm.weight's size;
  // a mismatch is a ValueError naming the tensor. Non-finite weights are accepted here and refused by
  // every call, as upstream's native layer does.
  explicit Mamba3Block(Mamba3Weights weights);

  const Mamba3Dims& dims() const { return dims_; }
  // Every weight as given, bit for bit; in_proj and out_proj are rebuilt from their packed panels (the
  // only copy the block keeps), so this is a fresh copy per call.
  Mamba3Weights weights() const;
  std::vector<float> weight(int index) const;
  // The seven small tensors as held; in_proj() and out_proj() are empty here (they live in the panels).
  const Mamba3Weights& held_weights() const { return weights_; }
  Mamba3State allocate_state(std::int64_t batch) const { return Mamba3State(batch, dims_.heads); }

  // y[B, L, d_model] for x[B, L, d_model], continuing `state` in place (a fresh state is the stateless
  // forward; L = 1 is a decode step). Refusals (ValueError) come before any arithmetic: the state's
  // batch/heads, buffered_tokens outside [0, 64], B or L < 1, Input_States on a mid-sequence state,
  // then non-finite x, weights and state, named with `entry`. `reports` (optional) receives the four
  // reports. Fast path: SIMD kernels, threads, and a decode step whose cost is flat in the position.
  void forward(const float* x, std::int64_t B, std::int64_t L, Mamba3State& state, float* y,
               Mamba3Reports* reports = nullptr, const char* entry = "mamba3_forward") const {
    forward(x, B, L, state, y, reports, entry, false);
  }
  // `state_checked`: the caller already ran refuse(nullptr, B, L, state, entry) for this call (a Samba
  // stack checks every layer before any layer moves), so the O(state) finiteness scan is not repeated.
  void forward(const float* x, std::int64_t B, std::int64_t L, Mamba3State& state, float* y,
               Mamba3Reports* reports, const char* entry, bool state_checked) const;
  // The four reports of the call that left `state` as it is: they are a pure function of the post-call state
  // (the sealed h, the buffered rows of the last working chunk, theta), so they can be taken right after a
  // call or later, as long as the state has not changed in between. forward(..., reports) calls this.
  Mamba3Reports reports_of(const Mamba3State& state) const;
  // The scalar twin: blocks.md 3.3 literally (the whole working sequence, every chunk, gemm_reference,
  // scalar primitives), single-threaded. Same refusals, same bits.
  void forward_reference(const float* x, std::int64_t B, std::int64_t L, Mamba3State& state, float* y,
                         Mamba3Reports* reports = nullptr, const char* entry = "mamba3_forward") const {
    forward_reference(x, B, L, state, y, reports, entry, false);
  }
  void forward_reference(const float* x, std::int64_t B, std::int64_t L, Mamba3State& state, float* y,
                         Mamba3Reports* reports, const char* entry, bool state_checked) const;

  // Every refusal of a call, in order, without touching the state (see forward); x null skips the x
  // scan, scan_state false skips the scan of the state's pieces.
  void refuse(const float* x, std::int64_t B, std::int64_t L, const Mamba3State& state, const char* entry,
              bool scan_state = true) const;

 private:
  Mamba3Dims dims_;
  Mamba3Weights weights_;
  std::string weight_refusal_;  // "NaN in <name> at flat index <i> REFUSED" for a non-finite weight, or empty
  gemm::PackedRhs packed_in_proj_;
  gemm::PackedRhs packed_out_proj_;
};

}  // namespace samebits::blocks
