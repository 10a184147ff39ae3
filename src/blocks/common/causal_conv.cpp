// Causal conv + SiLU: the literal twin and the channel-vector fast path over the sscan kernels.
#include "blocks/common/causal_conv.hpp"

#include <algorithm>

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/selective_scan.hpp"

namespace samebits::blocks {

using fp::F;
using fp::FMA;

CausalConv::CausalConv(const float* weight, const float* bias, std::int64_t channels)
    : channels_(channels),
      weight_(weight, weight + channels * kTaps),
      bias_(bias, bias + channels),
      weight_t_(static_cast<std::size_t>(channels * kTaps)) {
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t k = 0; k < kTaps; ++k) weight_t_[k * channels + c] = weight_[c * kTaps + k];
}

namespace {

// update_conv_window for batch row b and channels [c0, c1) only.
void update_window_channels(const float* pre, std::int64_t pre_stride, std::int64_t b, std::int64_t length,
                            std::int64_t channels, std::int64_t c0, std::int64_t c1, float* window) {
  constexpr std::int64_t kTaps = CausalConv::kTaps;
  for (std::int64_t c = c0; c < c1; ++c) {
    float* win = window + (b * channels + c) * kTaps;
    // Ascending j reads old entries at j + length > j, which are not yet overwritten.
    for (std::int64_t j = 0; j < kTaps; ++j) {
      const std::int64_t pos = length - kTaps + j;
      win[j] = pos >= 0 ? pre[(b * length + pos) * pre_stride + c] : win[kTaps + pos];
    }
  }
}

}  // namespace

void update_conv_window(const float* pre, std::int64_t pre_stride, std::int64_t batch, std::int64_t length,
                        std::int64_t channels, float* window) {
  for (std::int64_t b = 0; b < batch; ++b)
    update_window_channels(pre, pre_stride, b, length, channels, 0, channels, window);
}

void CausalConv::run_reference(const float* pre, std::int64_t pre_stride, std::int64_t batch,
                               std::int64_t length, float* window, float* out) const {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t c = 0; c < channels_; ++c) {
      const float* win = window + (b * channels_ + c) * kTaps;
      for (std::int64_t li = 0; li < length; ++li) {
        float acc = F(bias_[c]);
        for (std::int64_t k = 0; k < kTaps; ++k) {
          const std::int64_t pos = li - (kTaps - 1) + k;
          const float v = pos >= 0 ? pre[(b * length + pos) * pre_stride + c] : win[kTaps + pos];
          acc = F(FMA(F(weight_[c * kTaps + k]), F(v), acc));
        }
        out[(b * length + li) * channels_ + c] = F(primitives::silu(acc));
      }
    }
  }
  update_conv_window(pre, pre_stride, batch, length, channels_, window);
}

void CausalConv::run(const float* pre, std::int64_t pre_stride, std::int64_t batch, std::int64_t length,
                     float* window, float* out) const {
  constexpr std::int64_t kHeadRows = kTaps - 1;
  // Each task takes one batch row's block of channels through all of it: it copies the window's three
  // newest entries of its channels, tap-major, as the rows before position 0, runs the conv, then moves
  // its channels' window on. Channels are independent, so no task reads a cell another one writes.
  std::vector<float> heads(static_cast<std::size_t>(batch * kHeadRows * channels_));  // [B][3][channels]
  constexpr std::int64_t kChannelBlock = 128;
  const std::int64_t blocks_per_row = (channels_ + kChannelBlock - 1) / kChannelBlock;
  // A decode step's blocks are small: a few per task still split a step over two threads.
  const std::int64_t grain =
      std::max<std::int64_t>(1, 512 / (kChannelBlock * std::max<std::int64_t>(1, length)));
  parallel_for(
      batch * blocks_per_row,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t task = begin; task < end; ++task) {
          const std::int64_t b = task / blocks_per_row;
          const std::int64_t c0 = (task % blocks_per_row) * kChannelBlock;
          const std::int64_t c1 = std::min(channels_, c0 + kChannelBlock);
          float* head = heads.data() + b * kHeadRows * channels_;
          for (std::int64_t c = c0; c < c1; ++c) {
            const float* win = window + (b * channels_ + c) * kTaps;
            for (std::int64_t r = 0; r < kHeadRows; ++r) head[r * channels_ + c] = win[1 + r];
          }
          const selective_scan::Conv4Args args{
              head,         pre + b * length * pre_stride, pre_stride, weight_t_.data(),
              bias_.data(), out + b * length * channels_,  channels_,  length,
              channels_};
          selective_scan::conv4_silu(args, c0, c1);
          update_window_channels(pre, pre_stride, b, length, channels_, c0, c1, window);
        }
      },
      grain);
}

}  // namespace samebits::blocks
