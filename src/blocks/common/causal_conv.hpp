// The depthwise 4-tap causal conv + SiLU with its carried window, shared by Mamba-1 and Mamba-2
// (docs/blocks.md §1.3 step 5 and §2.3 step 4).
#pragma once

#include <cstdint>
#include <vector>

namespace samebits::blocks {

class CausalConv {
 public:
  static constexpr std::int64_t kTaps = 4;

  // weight [channels][4] (the (C, 1, 4) and (C, 4) spellings have the same bytes), bias [channels].
  CausalConv(const float* weight, const float* bias, std::int64_t channels);

  // batch rows of `length` tokens. The conv input of token t = b * length + li, channel c, is
  // pre[t * pre_stride + c]; window [batch][channels][4] holds the 4 raw inputs before the call
  // (oldest first) and is replaced by the last 4 raw inputs after it. out[t * channels + c] =
  // F(silu(acc)) with acc the bias-seeded FMA chain over taps 0..3.
  void run(const float* pre, std::int64_t pre_stride, std::int64_t batch, std::int64_t length, float* window,
           float* out) const;
  // The twin: docs/blocks.md's loop, one cell at a time.
  void run_reference(const float* pre, std::int64_t pre_stride, std::int64_t batch, std::int64_t length,
                     float* window, float* out) const;

  std::int64_t channels() const { return channels_; }

 private:
  std::int64_t channels_;
  std::vector<float> weight_;    // [channels][4] as given
  std::vector<float> bias_;      // as given
  std::vector<float> weight_t_;  // [4][channels], tap-major for the channel-vector kernels
};

// The window after a call: the raw inputs at positions length-4 .. length-1 of each batch row, taking
// positions before the call from the old window. In place, oldest first.
void update_conv_window(const float* pre, std::int64_t pre_stride, std::int64_t batch, std::int64_t length,
                        std::int64_t channels, float* window);

}  // namespace samebits::blocks
