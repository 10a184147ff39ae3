// Mamba2Block (docs/blocks.md §2): the weights table, construction (weights checked and packed once) and the
// refusals every call runs first. The forward paths are in forward.cpp and reference.cpp.
#include "blocks/mamba2/mamba2.hpp"

#include <atomic>
#include <samebits/errors.hpp>
#include <utility>

#include "blocks/common/block_support.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"

namespace samebits::blocks {

using fp::F;

namespace {

constexpr std::int64_t Q = Mamba2Dims::kChunk;

std::atomic<std::uint64_t> g_next_block_id{1};

}  // namespace

std::array<TensorSpec, kMamba2TensorCount> mamba2_tensors(const Mamba2Dims& d) {
  const std::int64_t dm = d.d_model, di = d.d_inner, H = d.nheads, cd = d.conv_dim;
  return {{{"block_norm.weight", {dm}, {}},
           {"in_proj.weight", {d.d_in_proj, dm}, {}},
           {"conv1d.weight", {cd, 1, Mamba2Dims::kConv}, {cd, Mamba2Dims::kConv}},
           {"conv1d.bias", {cd}, {}},
           {"dt_bias", {H}, {}},
           {"A_log", {H}, {}},
           {"D", {H}, {}},
           {"norm.weight", {di}, {}},
           {"out_proj.weight", {dm, di}, {}}}};
}

// ------------------------------------------------------------------------------------ the block

namespace {
Mamba2Dims dims_of(const Mamba2Weights& w) {
  return Mamba2Dims::for_d_model(static_cast<std::int64_t>(w[kM2BlockNorm].size()));
}
}  // namespace

Mamba2Block::Mamba2Block(Mamba2Weights weights, float dt_lo, float dt_hi)
    : dims_(dims_of(weights)),
      weights_(std::move(weights)),
      dt_lo_(dt_lo),
      dt_hi_(dt_hi),
      id_(g_next_block_id.fetch_add(1)),
      conv_(weights_[kM2ConvWeight].data(), weights_[kM2ConvBias].data(), dims_.conv_dim) {
  if (dims_.d_model % 32 != 0 || dims_.d_model < 32)
    throw_value_error("Mamba2Block: d_model must be a multiple of 32");
  non_finite_weight_ = check_weight_table(weights_, mamba2_tensors(dims_), "Mamba2Block");
  A_.resize(static_cast<std::size_t>(dims_.nheads));
  for (std::int64_t h = 0; h < dims_.nheads; ++h) A_[h] = -F(primitives::expf(F(weights_[kM2ALog][h])));
  in_proj_ = gemm::PackedRhs::from_transposed(weights_[kM2InProj].data(), dims_.d_in_proj, dims_.d_model,
                                              Placement::kWeightPool);
  out_proj_ = gemm::PackedRhs::from_transposed(weights_[kM2OutProj].data(), dims_.d_model, dims_.d_inner,
                                               Placement::kWeightPool);
}

void Mamba2Block::refuse_inputs(const float* x, std::int64_t count, const Mamba2State& state,
                                const std::string& entry) const {
  refuse_buffered_tokens(state, entry);
  refuse_rows(x, count, entry);
  refuse_state_arrays(state, entry);
}

void Mamba2Block::refuse_state(const Mamba2State& state, const std::string& entry) const {
  refuse_buffered_tokens(state, entry);
  refuse_state_arrays(state, entry);
}

void Mamba2Block::refuse_buffered_tokens(const Mamba2State& state, const std::string& entry) const {
  const std::int64_t q0 = state.buffered_tokens();
  if (q0 < 0 || q0 >= Q)
    throw_value_error(entry + ": buf_len must be in [0, 256) (the rows of the open chunk), got " +
                      std::to_string(q0));
}

void Mamba2Block::refuse_rows(const float* x, std::int64_t count, const std::string& entry) const {
  refuse_if_non_finite(x, count, entry, "x");
  refuse_non_finite_weight(non_finite_weight_, weights_, mamba2_tensors(dims_), entry);
}

void Mamba2Block::refuse_state_arrays(const Mamba2State& state, const std::string& entry) const {
  if (state.trusted()) return;  // a trusted state has nothing for the scan to find
  refuse_if_any_non_finite({{state.conv_window(), state.conv_window_size(), "conv_window"},
                            {state.h(), state.h_size(), "h"},
                            {state.buffer_xbc(), state.buffer_xbc_size(), "buffer_xbc"},
                            {state.buffer_dtraw(), state.buffer_dtraw_size(), "buffer_dtraw"}},
                           entry);
}

}  // namespace samebits::blocks
