// Mamba-3 SISO (blocks.md 3): the profile constants, the dims, and the state carried between calls (3.2).
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_buffer.hpp"

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

}  // namespace samebits::blocks
