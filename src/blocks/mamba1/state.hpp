// Mamba-1's shape (dims) and the state it carries between calls (docs/blocks.md §1.2).
#pragma once

#include <cstdint>
#include <samebits/pin.hpp>

#include "core/aligned_buffer.hpp"

namespace samebits::blocks {

struct Mamba1Dims {
  static constexpr std::int64_t kState = 16;
  static constexpr std::int64_t kConv = 4;
  std::int64_t d_model = 0;
  std::int64_t d_inner = 0;  // 2 * d_model
  std::int64_t dt_rank = 0;  // ceil(d_model / 16) (docs/blocks.md §9.1)
  std::int64_t x_proj_rows() const { return dt_rank + 2 * kState; }
  static Mamba1Dims for_d_model(std::int64_t d_model);
};

// The per-sequence state (docs/blocks.md §1.2): conv_window [B, d_inner, 4] and h [B, d_inner, 16], zero at
// start.
class Mamba1State {
 public:
  Mamba1State(std::int64_t batch, std::int64_t d_inner);
  Mamba1State clone() const;

  std::int64_t batch() const { return batch_; }
  std::int64_t d_inner() const { return d_inner_; }
  float* conv_window() { return conv_window_.data(); }
  const float* conv_window() const { return conv_window_.data(); }
  float* h() { return h_.data(); }
  const float* h() const { return h_.data(); }
  std::int64_t conv_window_size() const { return batch_ * d_inner_ * Mamba1Dims::kConv; }
  std::int64_t h_size() const { return batch_ * d_inner_ * Mamba1Dims::kState; }

  // Writable views for callers outside the engine. Mamba-1 keeps nothing derived from the arrays, so every
  // call reads them as they are; the count only tells whether a view is alive.
  using Pin = BufferPin;
  Pin pin_conv_window() { return Pin(pins_, conv_window_.data(), conv_window_size()); }
  Pin pin_h() { return Pin(pins_, h_.data(), h_size()); }
  bool pinned() const { return pins_ > 0; }

 private:
  Mamba1State() = default;
  std::int64_t batch_ = 0;
  std::int64_t d_inner_ = 0;
  AlignedBuffer<float> conv_window_;
  AlignedBuffer<float> h_;
  std::int64_t pins_ = 0;
};

}  // namespace samebits::blocks
