// Mamba-3 SISO (docs/blocks.md §3): the profile constants, the dims, and the state carried between calls
// (3.2).
#pragma once

#include <cstdint>
#include <samebits/pin.hpp>
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

// The carried state of docs/blocks.md §3.2: ten float32 arrays in upstream layout, buffered_tokens and
// pending. It owns its memory; the arrays may be read (read-only pointers) and written through pins between
// calls (the Python binding exposes them as writable views), so nothing derived from them is trusted without
// a check. The engine's bookkeeping (raw pieces, derived copies, trust, undo spans) is reached only through
// Mamba3State::EngineAccess.
class Mamba3State {
 public:
  Mamba3State() = default;
  Mamba3State(std::int64_t batch, std::int64_t heads);
  Mamba3State(Mamba3State&&) noexcept = default;
  Mamba3State& operator=(Mamba3State&&) noexcept = default;
  // An independent state with the same bits (and trust, unless pinned).
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
  std::int64_t piece_elements(int piece) const;
  // Read-only views of the pieces.
  const float* piece(int piece) const;
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

  // A writable view of one piece. While any pin is alive every call scans the state; what was written
  // through a pin is scanned by the next call after the last one is gone (then the state may be trusted).
  using Pin = BufferPin;
  Pin pin(int piece);

  // Valid rows of the open-chunk buffer: 0 before the first token, in [1, 64] after any call. Settable
  // to anything; a call refuses a value outside [0, 64] before touching the state.
  std::int64_t buffered_tokens = 0;
  // True marks theta / h / pending_k / pending_v as an upstream Input_States continuation; the next
  // call consumes it.
  bool pending = false;

  // Copies the four pieces' bits (sizes B*H*32, B*H*64*128, B*H*128, B*H*64) and sets pending. Whether
  // the state is fresh is judged by the next call, as upstream does.
  void set_input_states(const float* theta, const float* h, const float* k, const float* v);

  // Diagnostics: whether every piece is known finite without a scan, so that a call may skip its
  // non-finite scan of the state (docs/blocks.md §3.3 step 1 then has nothing to find). It holds after the
  // engine's own calls, which check every value they write, while no pin is alive and nothing was written
  // through one since; a fresh state (all zeros) is trusted. And whether a pin is alive.
  bool trusted() const { return trusted_ && pins_ == 0; }
  bool pinned() const { return pins_ > 0; }

  // The decode cache: what the open chunk already computed, per (batch row, head). Derived only from
  // buffer_adt's first `rows` rows, whose bits it keeps to prove itself still current.
  struct OpenChunkCache {
    bool valid = false;
    std::int64_t rows = 0;
    AlignedBuffer<float> adt;     // [B, H, 64] the buffer_adt bits the cache was built from
    AlignedBuffer<float> dacs;    // [B, H, 64] running sums of adt (docs/blocks.md §3.3 step 12)
    AlignedBuffer<float> colacc;  // [B, H, 64] Lseg column sums at row rows-1 (step 13), j < rows-1
  };
  struct Span {
    float* at;
    std::int64_t count;
  };

  // The engine's access (the block's calls, the twin, a Samba stack's undo, and tests that check the
  // bookkeeping): pieces without a pin, the derived copies and the trust.
  class EngineAccess {
   public:
    explicit EngineAccess(Mamba3State& state) : s_(state) {}
    float* piece(int piece) { return s_.buffer_of(piece)->data(); }
    OpenChunkCache& open_chunk_cache() { return s_.cache_; }
    // h transposed per (batch row, head), [B, H, 128, 64], for the state read-out of decode rows (one
    // contiguous row per state index). Current only as the engine last left it: a pin or
    // set_input_states drops it, and the engine relies on it only for a state trusted at the start of a
    // call.
    float* h_transposed() { return s_.engine_h_transposed(); }
    void transpose_h() { s_.transpose_h(); }  // writes the copy from h
    bool h_transposed_current() const { return s_.h_t_current_; }
    void set_h_transposed_current(bool current) { s_.h_t_current_ = current; }
    // buffer_krot transposed per (batch row, head), [B, H, 128, 64]: the open chunk's rotated keys as
    // columns, so that a decode row's scores load a vector of keys per state index. Current, under the
    // same rule as h's copy, for the first krot_transposed_rows() slots (buffered_tokens is settable, so
    // a call relies on it only when its buffered rows lie inside them).
    float* krot_transposed() { return s_.engine_krot_transposed(); }
    // Copies buffer slots [first, end) into it; the slots before `first` must be current already.
    void mirror_krot(std::int64_t first_slot, std::int64_t end_slot) { s_.mirror_krot(first_slot, end_slot); }
    std::int64_t krot_transposed_rows() const { return s_.krot_t_rows_; }
    bool krot_transposed_current() const { return s_.krot_t_current_; }
    void set_krot_transposed_current(bool current) { s_.krot_t_current_ = current; }
    // Drops both copies (an outside writer, Input_States, a call that was undone).
    void drop_derived_copies() { s_.drop_derived_copies(); }
    void untrust() { s_.trusted_ = false; }
    // After an engine call whose writes were (or were not) all finite. A state pinned during the call
    // stays untrusted: a view still alive may write it.
    void trust_after_call(bool writes_finite) { s_.trusted_ = writes_finite && s_.pins_ == 0; }
    // What a call of `length` new tokens writes, from the state as it is before that call
    // (docs/blocks.md §3.3 step 18): theta; h when the call seals a chunk or consumes Input_States; pending_k
    // / pending_v (zeroed) when it consumes them; and per batch row the last working chunk's rows from
    // max(chunk start, buffered_tokens) in the six buffers.
    std::vector<Span> spans_written_by(std::int64_t length) { return s_.spans_written_by(length); }

   private:
    Mamba3State& s_;
  };

 private:
  AlignedBuffer<float>* buffer_of(int piece);
  float* engine_h_transposed();
  void transpose_h();
  float* engine_krot_transposed();
  void mirror_krot(std::int64_t first_slot, std::int64_t end_slot);
  std::vector<Span> spans_written_by(std::int64_t length);
  void drop_derived_copies() {
    h_t_current_ = false;
    krot_t_current_ = false;
  }

  std::int64_t batch_ = 0;
  std::int64_t heads_ = 0;
  AlignedBuffer<float> theta_, h_, buffer_qrot_, buffer_krot_, buffer_v_, buffer_dt_, buffer_sig_,
      buffer_adt_, pending_k_, pending_v_;
  OpenChunkCache cache_;
  bool trusted_ = true;
  std::int64_t pins_ = 0;
  AlignedBuffer<float> h_t_;  // see EngineAccess::h_transposed
  bool h_t_current_ = false;
  AlignedBuffer<float> krot_t_;  // see EngineAccess::krot_transposed
  bool krot_t_current_ = false;
  std::int64_t krot_t_rows_ = 0;
};

}  // namespace samebits::blocks
