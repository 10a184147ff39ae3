// Mamba1Block (docs/blocks.md §1): dims, the weights table, construction (weights checked and packed once)
// and the refusals every call runs first. The forward paths are in forward.cpp and reference.cpp.
#include "blocks/mamba1/mamba1.hpp"

#include <samebits/errors.hpp>
#include <utility>

#include "blocks/common/block_support.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"

namespace samebits::blocks {

using fp::F;

std::array<TensorSpec, kMamba1TensorCount> mamba1_tensors(const Mamba1Dims& d) {
  const std::int64_t dm = d.d_model, di = d.d_inner, r = d.dt_rank;
  return {{{"norm.weight", {dm}, {}},
           {"in_proj.weight", {2 * di, dm}, {}},
           {"conv1d.weight", {di, 1, Mamba1Dims::kConv}, {di, Mamba1Dims::kConv}},
           {"conv1d.bias", {di}, {}},
           {"x_proj.weight", {d.x_proj_rows(), di}, {}},
           {"dt_proj.weight", {di, r}, {}},
           {"dt_proj.bias", {di}, {}},
           {"A_log", {di, Mamba1Dims::kState}, {}},
           {"D", {di}, {}},
           {"out_proj.weight", {dm, di}, {}}}};
}
namespace {
Mamba1Dims dims_of(const Mamba1Weights& w) {
  return Mamba1Dims::for_d_model(static_cast<std::int64_t>(w[kM1NormWeight].size()));
}
}  // namespace

Mamba1Block::Mamba1Block(Mamba1Weights weights)
    : dims_(dims_of(weights)),
      weights_(std::move(weights)),
      conv_(weights_[kM1ConvWeight].data(), weights_[kM1ConvBias].data(), dims_.d_inner) {
  non_finite_weight_ = check_weight_table(weights_, mamba1_tensors(dims_), "Mamba1Block");
  A_.resize(weights_[kM1ALog].size());
  for (std::size_t i = 0; i < A_.size(); ++i) A_[i] = -F(primitives::expf(F(weights_[kM1ALog][i])));
  const std::int64_t dm = dims_.d_model, di = dims_.d_inner;
  in_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1InProj].data(), 2 * di, dm, Placement::kWeightPool);
  x_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1XProj].data(), dims_.x_proj_rows(), di,
                                             Placement::kWeightPool);
  dt_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1DtProjWeight].data(), di, dims_.dt_rank,
                                              Placement::kWeightPool);
  out_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1OutProj].data(), dm, di, Placement::kWeightPool);
}

void Mamba1Block::refuse_non_finite_inputs(const float* x, std::int64_t count, const Mamba1State& state,
                                           const std::string& entry) const {
  refuse_non_finite_rows(x, count, entry);
  refuse_non_finite_state(state, entry);
}

void Mamba1Block::refuse_non_finite_rows(const float* x, std::int64_t count, const std::string& entry) const {
  refuse_if_non_finite(x, count, entry, "x");
  refuse_non_finite_weight(non_finite_weight_, weights_, mamba1_tensors(dims_), entry);
}

void Mamba1Block::refuse_non_finite_state(const Mamba1State& state, const std::string& entry) const {
  refuse_if_any_non_finite(
      {{state.conv_window(), state.conv_window_size(), "conv_window"}, {state.h(), state.h_size(), "h"}},
      entry);
}

}  // namespace samebits::blocks
