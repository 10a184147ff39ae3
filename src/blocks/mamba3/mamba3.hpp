// Mamba-3 SISO block (docs/blocks.md §3): the nine weights, the reports and the block (the profile constants,
// dims and the carried state are in state.hpp).
#pragma once

#include <cstdint>
#include <samebits/mamba3_reports.hpp>
#include <string>
#include <vector>

#include "blocks/common/tensor_spec.hpp"
#include "blocks/mamba3/state.hpp"
#include "numerics/gemm.hpp"

namespace samebits::blocks {

// The nine tensors in upstream order (docs/blocks.md §3.1) for a d_model: the one table every check reads,
// and the one the Samba registry composes (in its wider integer, hence the template).
template <typename Dim>
std::vector<BasicTensorSpec<Dim>> mamba3_tensor_table(Dim d_model) {
  const Dim di = 2 * d_model, H = di / mamba3::kHeadDim, N = mamba3::kStateDim;
  const Dim d_in_proj = 2 * di + 2 * N + 3 * H + mamba3::kAngles;
  return {{"block_norm.weight", {d_model}},
          {"in_proj.weight", {d_in_proj, d_model}},
          {"dt_bias", {H}},
          {"B_norm.weight", {N}},
          {"C_norm.weight", {N}},
          {"B_bias", {H, N}},
          {"C_bias", {H, N}},
          {"D", {H}},
          {"out_proj.weight", {d_model, di}}};
}
inline std::vector<TensorSpec> mamba3_tensors(const Mamba3Dims& dims) {
  return mamba3_tensor_table<std::int64_t>(dims.d_model);
}
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

// The reports of docs/blocks.md §3.2 (samebits::Mamba3Reports), written after a call when asked for.
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
  // One decode token for each of `count` independent sequences (docs/api.md §18): row i of x[count, d_model]
  // continues *states[i] (one row each, any buffered_tokens; distinct states). The norm and both
  // projections run over all rows at once (the weights are read once), the scan stages per state; row i's
  // bits are those of forward(x + i * d_model, 1, 1, *states[i], ...). Every row is refused before any
  // state moves (`states_checked` as in forward).
  void step_many(const float* x, std::int64_t count, Mamba3State* const* states, float* y, const char* entry,
                 bool states_checked = false) const;
  // The four reports of the call that left `state` as it is: they are a pure function of the post-call state
  // (the sealed h, the buffered rows of the last working chunk, theta), so they can be taken right after a
  // call or later, as long as the state has not changed in between. forward(..., reports) calls this.
  Mamba3Reports reports_of(const Mamba3State& state) const;
  // The scalar twin: docs/blocks.md §3.3 literally (the whole working sequence, every chunk, gemm_reference,
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
