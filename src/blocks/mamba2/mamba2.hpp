// Mamba2Block, profile mojolearn.identical.mamba2.fp32.v1 (docs/blocks.md §2): weights table, the lazily
// evaluated h_last report, and the one forward function (prefill, carried prefill and decode step); the
// state with its open chunk is in state.hpp. The fast path keeps per-state rows derived from the open
// chunk so that a decode step costs O(chunk), not O(chunk^2), while giving exactly the bits of re-running
// the open chunk.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "blocks/common/causal_conv.hpp"
#include "blocks/common/tensor_spec.hpp"
#include "blocks/mamba2/state.hpp"
#include "numerics/gemm.hpp"

namespace samebits::blocks {

// The nine weights in upstream's _W_NAMES order; conv1d.weight may also come as [conv_dim, 4] (alt_shape).
inline constexpr std::size_t kMamba2TensorCount = 9;
enum Mamba2Tensor : std::size_t {
  kM2BlockNorm,
  kM2InProj,
  kM2ConvWeight,
  kM2ConvBias,
  kM2DtBias,
  kM2ALog,
  kM2D,
  kM2GatedNorm,
  kM2OutProj,
};
std::array<TensorSpec, kMamba2TensorCount> mamba2_tensors(const Mamba2Dims& dims);

using Mamba2Weights = std::array<std::vector<float>, kMamba2TensorCount>;

// The report of one block call: h_last [B, H, 64, 128], the state after the final (padded) chunk, which
// is not the resumption state kept in h. It is a pure function of the state the call left (boundary h
// and the open chunk's buffer), so it is evaluated on first read; the next block call on the same state
// evaluates it first if it is still pending.
class Mamba2Report {
 public:
  Mamba2Report(std::shared_ptr<Mamba2StateData> source, std::vector<float> A, std::vector<float> dt_bias,
               float dt_lo, float dt_hi);
  // Immediately available (a call whose final chunk completed, or the twin).
  explicit Mamba2Report(std::vector<float> h_last);

  const std::vector<float>& h_last();
  bool evaluated();

 private:
  void evaluate_locked();

  std::mutex mutex_;
  std::shared_ptr<Mamba2StateData> source_;
  std::uint64_t generation_ = 0;
  std::vector<float> A_;
  std::vector<float> dt_bias_;
  float dt_lo_ = 0.0f;
  float dt_hi_ = 0.0f;
  std::vector<float> h_last_;
  bool evaluated_ = false;
};

// Immutable block: weights copied (shapes already validated), GEMM weights packed once.
class Mamba2Block {
 public:
  Mamba2Block(Mamba2Weights weights, float dt_lo, float dt_hi);

  // x [batch, length, d_model] -> y; the state is read and updated in place. Returns the call's report.
  // `entry` names the call in refusals. buffered_tokens outside [0, 256) and non-finite x, weights or
  // state are refused before any arithmetic. The state's batch and widths must already match.
  // `superseded` is the caller's previous report, which it drops unread once this call succeeds: it is
  // not evaluated even if it is still pending on this state (a decode loop never pays for h_last).
  std::shared_ptr<Mamba2Report> forward(const float* x, std::int64_t batch, std::int64_t length,
                                        Mamba2State& state, float* y, const std::string& entry,
                                        const Mamba2Report* superseded = nullptr) const;
  // One decode token for each of `count` independent sequences (docs/api.md §18): row i of x[count, d_model]
  // continues *states[i] (one row each, any buffered_tokens; distinct states). The norms and both
  // projections run over all rows at once, the conv and the scan per state; row i's bits are those of
  // forward(x + i * d_model, 1, 1, *states[i], ...). Every row is refused before any state moves
  // (`states_checked`: the caller already ran refuse_state on each, so only x is checked here).
  void step_many(const float* x, std::int64_t count, Mamba2State* const* states, float* y,
                 const std::string& entry, bool states_checked = false) const;
  // The scalar twin: docs/blocks.md §2.3 literally (the open chunk re-run from the buffer, every product
  // through gemm_reference); h_last is computed eagerly into *h_last when given.
  void forward_reference(const float* x, std::int64_t batch, std::int64_t length, Mamba2State& state,
                         float* y, const std::string& entry, std::vector<float>* h_last) const;

  const Mamba2Dims& dims() const { return dims_; }
  const Mamba2Weights& weights() const { return weights_; }
  std::pair<float, float> dt_limit() const { return {dt_lo_, dt_hi_}; }

  // A call's state refusals alone (buf_len, then non-finite arrays unless trusted), for a caller that checks
  // every state of a stack before any layer runs.
  void refuse_state(const Mamba2State& state, const std::string& entry) const;

 private:
  // A call's refusals in order: buf_len, x's rows, the weights, the state's arrays.
  void refuse_inputs(const float* x, std::int64_t count, const Mamba2State& state,
                     const std::string& entry) const;
  void refuse_rows(const float* x, std::int64_t count, const std::string& entry) const;
  void refuse_buffered_tokens(const Mamba2State& state, const std::string& entry) const;
  void refuse_state_arrays(const Mamba2State& state, const std::string& entry) const;
  // A call's rows: the normed input, the in_proj product (z | xBC | dt_raw), the gated rows, out_proj's.
  struct CallRows {
    CallRows(const Mamba2Dims& dims, std::int64_t rows);
    std::vector<float> normed, proj, gated, out;
  };
  // The phases of a call, shared by forward and step_many: the norm and in_proj over every row; one
  // state's conv, SSD, gate and gated norm on its rows of `proj` (writing its rows of `gated`) with the
  // state's bookkeeping (trust, generation, report); out_proj and the residual over every row.
  void project_in(const float* x, std::int64_t rows, CallRows& call) const;
  std::shared_ptr<Mamba2Report> advance(const float* proj, std::int64_t batch, std::int64_t length,
                                        Mamba2State& state, float* gated,
                                        const Mamba2Report* superseded) const;
  void project_out(const float* x, std::int64_t rows, CallRows& call, float* y) const;
  // copies_kept: data.open.h_t and data.open_xd may be current (see Mamba2OpenChunkRows).
  void ssd_fast(Mamba2StateData& data, bool copies_kept, std::int64_t length, const float* xbc_new,
                const float* dtraw_new, std::int64_t dtraw_stride, float* y_ssd) const;

  Mamba2Dims dims_;
  Mamba2Weights weights_;
  float dt_lo_;
  float dt_hi_;
  std::uint64_t id_;
  std::optional<std::size_t> non_finite_weight_;
  std::vector<float> A_;  // -F(expf(F(A_log))), [H]
  CausalConv conv_;
  gemm::PackedRhs in_proj_;
  gemm::PackedRhs out_proj_;
};

namespace mamba2_detail {
// dt = F(clamp(F(softplus(F(F(raw) + F(bias)))), lo, hi)) (docs/blocks.md §2.3 step 5).
float dt_of(float raw, float bias, float lo, float hi);
// h_last of the final partial chunk from a state: rows [0, buffered_tokens) of the buffer after the
// boundary h (docs/blocks.md §2.3 step 7 for one chunk). With no buffered rows it is h itself.
void h_last_from_state(const Mamba2StateData& data, const float* A, const float* dt_bias, float dt_lo,
                       float dt_hi, float* h_last);
}  // namespace mamba2_detail

}  // namespace samebits::blocks
