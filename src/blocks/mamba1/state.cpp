// Mamba-1 dims and Mamba1State (docs/blocks.md §1.2): the conv window and the scan state, zero at start.
#include "blocks/mamba1/state.hpp"

#include "core/state_size.hpp"

namespace samebits::blocks {

Mamba1Dims Mamba1Dims::for_d_model(std::int64_t d_model) {
  Mamba1Dims dims;
  dims.d_model = d_model;
  dims.d_inner = 2 * d_model;
  dims.dt_rank = (d_model + 15) / 16;
  return dims;
}

Mamba1State::Mamba1State(std::int64_t batch, std::int64_t d_inner) : batch_(batch), d_inner_(d_inner) {
  allocate_state_buffers("Mamba1State", {batch, d_inner, Mamba1Dims::kConv + Mamba1Dims::kState}, [&] {
    conv_window_.assign_zero(static_cast<std::size_t>(conv_window_size()));
    h_.assign_zero(static_cast<std::size_t>(h_size()));
  });
}

Mamba1State Mamba1State::clone() const {
  Mamba1State copy;
  copy.batch_ = batch_;
  copy.d_inner_ = d_inner_;
  copy.conv_window_ = conv_window_.clone();
  copy.h_ = h_.clone();
  return copy;
}

}  // namespace samebits::blocks
