// Mamba-2's shape (dims) and the state it carries between calls (docs/blocks.md §2.2): the arrays with the
// open chunk, the rows derived from it, and the trust a call may place in them.
#pragma once

#include <cstdint>
#include <memory>
#include <samebits/pin.hpp>
#include <utility>
#include <vector>

#include "core/aligned_buffer.hpp"

namespace samebits::blocks {

struct Mamba2Dims {
  static constexpr std::int64_t kState = 128;   // N
  static constexpr std::int64_t kHeadDim = 64;  // P
  static constexpr std::int64_t kChunk = 256;   // Q, part of the arithmetic
  static constexpr std::int64_t kConv = 4;
  std::int64_t d_model = 0;
  std::int64_t d_inner = 0;                             // 2 * d_model
  std::int64_t nheads = 0;                              // d_inner / 64
  std::int64_t conv_dim = 0;                            // d_inner + 256: x | B | C
  std::int64_t d_in_proj = 0;                           // 2 * d_inner + 256 + nheads: z | xBC | dt_raw
  static Mamba2Dims for_d_model(std::int64_t d_model);  // d_model must be a multiple of 32
};

class Mamba2Report;

// Rows derived from the open chunk's raw dt, kept between calls so a step extends them instead of
// recomputing them (not part of the public state layout). Valid only for the block `owner` and while the
// state's buffered raw dt rows equal `dtraw`; otherwise rebuilt from the buffer.
struct Mamba2OpenChunkRows {
  std::uint64_t owner = 0;      // block id; 0 = empty
  std::int64_t rows = 0;        // buffered rows covered
  std::vector<float> dtraw;     // [B][256][H] copy of the raw dt rows the rest derives from
  std::vector<float> dt;        // [B][H][256]  F(dt) of each row
  std::vector<float> dA;        // [B][H][256]  F(MUL(F(dt), F(A)))
  std::vector<float> dacs;      // [B][H][256]  running cumulative dA
  std::vector<float> frontier;  // [B][H][256]  acc_j of every segment-sum column j < rows - 1
  // Copies laid out for a decode row's reads, kept while kept_generation is the state's generation and
  // the state is trusted (nobody outside the engine can have written h or the buffer since the fast path
  // last kept them together):
  // [B][H][128][64] each head's h transposed, so the row's C h^T cells read rows, not columns;
  // Mamba2StateData::open_xd, each head's discretized rows (kept beside this struct: a copy of the state
  // copies only their first `rows` rows).
  std::vector<float> h_t;
  std::uint64_t kept_generation = kNoGeneration;
  static constexpr std::uint64_t kNoGeneration = ~std::uint64_t{0};
};

// What the per-sequence state holds (docs/blocks.md §2.2); shared with a pending report so the report can be
// evaluated later from the state the call left.
struct Mamba2StateData {
  std::int64_t batch = 0;
  Mamba2Dims dims;
  AlignedBuffer<float> conv_window;   // [B, CD, 4]
  AlignedBuffer<float> h;             // [B, H, 64, 128]
  AlignedBuffer<float> buffer_xbc;    // [B, 256, CD]
  AlignedBuffer<float> buffer_dtraw;  // [B, 256, H]
  std::int64_t buffered_tokens = 0;
  std::uint64_t generation = 0;  // bumped by every block call that updates the state
  Mamba2OpenChunkRows open;
  // [B][H][256][64] each head's discretized rows Xd = F(MUL(F(x), dt)) of the open chunk, so a decode
  // row's Ydiag cells stream one head's rows instead of picking 64 floats out of every buffered row. Kept
  // with open.h_t (Mamba2OpenChunkRows); they also need open.owner's dt, so they are rebuilt with the
  // derived rows. Only each head's first open.rows rows hold anything: a call writes every later row
  // before it reads it.
  AlignedBuffer<float> open_xd;
  std::weak_ptr<Mamba2Report> pending_report;
  bool trusted = true;    // see Mamba2State::trusted
  std::int64_t pins = 0;  // writable views alive (Mamba2State::Pin)
};

class Mamba2State {
 public:
  Mamba2State(std::int64_t batch, const Mamba2Dims& dims);
  Mamba2State clone() const;

  std::int64_t batch() const { return data_->batch; }
  const Mamba2Dims& dims() const { return data_->dims; }
  // Read-only views of the four arrays.
  const float* conv_window() const { return data_->conv_window.data(); }
  const float* h() const { return data_->h.data(); }
  const float* buffer_xbc() const { return data_->buffer_xbc.data(); }
  const float* buffer_dtraw() const { return data_->buffer_dtraw.data(); }

  // A writable view of one array. While any pin is alive every call scans the state; what was written
  // through a pin is scanned by the next call after the last one is gone (then the state may be trusted).
  enum Piece : int { kConvWindow, kH, kBufferXbc, kBufferDtraw };
  using Pin = BufferPin;
  Pin pin(Piece piece);

  // Whether every array is known finite without a scan, so that a call may skip its non-finite scan of
  // the state (docs/blocks.md §2.3 step 1 then has nothing to find): after the engine's own calls, which
  // check what they write, while no pin is alive and nothing was written through one since a call checked the
  // state. A fresh state (all zeros) is trusted.
  bool trusted() const { return data_->trusted && data_->pins == 0; }
  bool pinned() const { return data_->pins > 0; }
  struct Span {
    const float* at;
    std::int64_t count;
  };
  std::int64_t buffered_tokens() const { return data_->buffered_tokens; }
  // Any value is stored; a block call refuses one outside [0, 256).
  void set_buffered_tokens(std::int64_t value) { data_->buffered_tokens = value; }

  std::int64_t conv_window_size() const { return batch() * dims().conv_dim * Mamba2Dims::kConv; }
  std::int64_t h_size() const { return batch() * dims().nheads * Mamba2Dims::kHeadDim * Mamba2Dims::kState; }
  std::int64_t buffer_xbc_size() const { return batch() * Mamba2Dims::kChunk * dims().conv_dim; }
  std::int64_t buffer_dtraw_size() const { return batch() * Mamba2Dims::kChunk * dims().nheads; }

  // Evaluates a pending report of the last call on this state now (before the state changes: the next
  // block call, or a caller about to edit the arrays through writable views). A report the caller
  // declares `superseded` (it will drop it unread) is left unevaluated.
  void settle_pending_report(const Mamba2Report* superseded = nullptr);

  // The engine's access (the block's calls and tests that check them): the arrays and their bookkeeping
  // without a pin, and what a call writes.
  class EngineAccess {
   public:
    explicit EngineAccess(const Mamba2State& state) : s_(state) {}
    Mamba2StateData& data() const { return *s_.data_; }
    const std::shared_ptr<Mamba2StateData>& shared() const { return s_.data_; }
    // What a call of `length` new tokens writes, judged before it: the conv window; the open chunk's new
    // rows [q0, q0 + length) of buffer_xbc and buffer_dtraw; and when the call completes a chunk, h and
    // both buffers whole.
    std::vector<Span> spans_written_by(std::int64_t length) const { return s_.spans_written_by(length); }
    // The trust (blocks/common/trust_scope.hpp drives it): untrusted while a call writes; after the call,
    // trusted iff its writes were finite and no pin is alive (a view still alive may write the state).
    void untrust() const { s_.data_->trusted = false; }
    void trust_after_call(bool writes_finite) const {
      s_.data_->trusted = writes_finite && s_.data_->pins == 0;
    }

   private:
    const Mamba2State& s_;
  };

 private:
  std::vector<Span> spans_written_by(std::int64_t length) const;
  explicit Mamba2State(std::shared_ptr<Mamba2StateData> data) : data_(std::move(data)) {}
  std::shared_ptr<Mamba2StateData> data_;
};

}  // namespace samebits::blocks
