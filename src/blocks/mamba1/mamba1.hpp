// Mamba1Block, profile mojolearn.identical.mamba1.fp32.v1 (docs/blocks.md §1): weights table and the
// one forward function (stateless prefill, carried prefill and decode step are all this function).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "blocks/common/causal_conv.hpp"
#include "blocks/common/tensor_spec.hpp"
#include "blocks/mamba1/state.hpp"
#include "numerics/gemm.hpp"

namespace samebits::blocks {

// The RMSNorm eps of the block norm (Appendix A).
inline constexpr float kMamba1NormEps = 1e-5f;
static_assert(std::bit_cast<std::uint32_t>(kMamba1NormEps) == 0x3727C5ACu,
              "Mamba RMSNorm eps differs from Appendix A");

// The ten weights in upstream's _W_NAMES order; conv1d.weight may also come as [d_inner, 4] (alt_shape).
inline constexpr std::size_t kMamba1TensorCount = 10;
enum Mamba1Tensor : std::size_t {
  kM1NormWeight,
  kM1InProj,
  kM1ConvWeight,
  kM1ConvBias,
  kM1XProj,
  kM1DtProjWeight,
  kM1DtProjBias,
  kM1ALog,
  kM1D,
  kM1OutProj,
};
std::array<TensorSpec, kMamba1TensorCount> mamba1_tensors(const Mamba1Dims& dims);

// Values in table order, each row-major with the table's element count.
using Mamba1Weights = std::array<std::vector<float>, kMamba1TensorCount>;

// Immutable block: weights copied (shapes already validated), GEMM weights packed once.
class Mamba1Block {
 public:
  explicit Mamba1Block(Mamba1Weights weights);

  // x [batch, length, d_model] -> y [batch, length, d_model]; the state is read and updated in place.
  // `entry` names the call in refusals ("mamba1_forward: NaN in x at flat index 3 REFUSED").
  // Non-finite x, weights or state are refused before any arithmetic. The state's batch and width
  // must already match.
  void forward(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state, float* y,
               const std::string& entry) const;
  // One decode token for each of `count` independent sequences (docs/api.md §18): row i of x[count, d_model]
  // continues *states[i] (one row each; distinct states), row i's bits those of forward(x + i * d_model, 1,
  // 1, *states[i], ...), every GEMM over all rows at once. Every row is refused before any state moves
  // (`states_checked`: the caller already ran refuse_non_finite_state on each, so only x is checked here).
  void step_many(const float* x, std::int64_t count, Mamba1State* const* states, float* y,
                 const std::string& entry, bool states_checked = false) const;
  // The scalar twin: docs/blocks.md §1.3 literally (gemm_reference, primitives::, one cell at a time).
  void forward_reference(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state,
                         float* y, const std::string& entry) const;

  const Mamba1Dims& dims() const { return dims_; }
  const Mamba1Weights& weights() const { return weights_; }

  // A call's state refusal alone (non-finite conv_window or h), for a caller that checks every state of a
  // stack before any layer runs; step_many with `states_checked` then refuses only its rows.
  void refuse_non_finite_state(const Mamba1State& state, const std::string& entry) const;

 private:
  // x's rows and the weights, then the state: a call's refusals in order.
  void refuse_non_finite_inputs(const float* x, std::int64_t count, const Mamba1State& state,
                                const std::string& entry) const;
  void refuse_non_finite_rows(const float* x, std::int64_t count, const std::string& entry) const;
  // forward after its refusals.
  void run(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state, float* y) const;

  Mamba1Dims dims_;
  Mamba1Weights weights_;
  std::optional<std::size_t> non_finite_weight_;  // first weight (table order) holding NaN/inf
  std::vector<float> A_;                          // -F(expf(F(A_log))), [d_inner][16]
  CausalConv conv_;
  gemm::PackedRhs in_proj_;
  gemm::PackedRhs x_proj_;
  gemm::PackedRhs dt_proj_;
  gemm::PackedRhs out_proj_;
};

}  // namespace samebits::blocks
