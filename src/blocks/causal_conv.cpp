// Causal conv + SiLU: the literal twin and the channel-vector fast path over the sscan kernels.
#include "blocks/causal_conv.hpp"

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

void update_conv_window(const float* pre, std::int64_t pre_stride, std::int64_t batch, std::int64_t length,
                        std::int64_t channels, float* window) {
  constexpr std::int64_t kTaps = CausalConv::kTaps;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t c = 0; c < channels; ++c) {
      float* win = window + (b * channels + c) * kTaps;
      // Ascending j reads old entries at j + length > j, which are not yet overwritten.
      for (std::int64_t j = 0; j < kTaps; ++j) {
        const std::int64_t pos = length - kTaps + j;
        win[j] = pos >= 0 ? pre[(b * length + pos) * pre_stride + c] : win[kTaps + pos];
      }
    }
  }
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
        out[(b * length + li) * channels_ + c] = F(prim::silu(acc));
      }
    }
  }
  update_conv_window(pre, pre_stride, batch, length, channels_, window);
}

void CausalConv::run(const float* pre, std::int64_t pre_stride, std::int64_t batch, std::int64_t length,
                     float* window, float* out) const {
  constexpr std::int64_t kHeadRows = kTaps - 1;
  // The window's three newest entries, tap-major per batch row, are the rows before position 0.
  std::vector<float> heads(static_cast<std::size_t>(batch * kHeadRows * channels_));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t c = 0; c < channels_; ++c)
      for (std::int64_t r = 0; r < kHeadRows; ++r)
        heads[(b * kHeadRows + r) * channels_ + c] = window[(b * channels_ + c) * kTaps + 1 + r];

  constexpr std::int64_t kChannelBlock = 256;
  const std::int64_t blocks_per_row = (channels_ + kChannelBlock - 1) / kChannelBlock;
  const std::int64_t grain =
      std::max<std::int64_t>(1, 16384 / (kChannelBlock * std::max<std::int64_t>(1, length)));
  parallel_for(
      batch * blocks_per_row,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t task = begin; task < end; ++task) {
          const std::int64_t b = task / blocks_per_row;
          const std::int64_t c0 = (task % blocks_per_row) * kChannelBlock;
          const std::int64_t c1 = std::min(channels_, c0 + kChannelBlock);
          const sscan::Conv4Args args{heads.data() + b * kHeadRows * channels_,
                                      pre + b * length * pre_stride,
                                      pre_stride,
                                      weight_t_.data(),
                                      bias_.data(),
                                      out + b * length * channels_,
                                      channels_,
                                      length,
                                      channels_};
          sscan::conv4_silu(args, c0, c1);
        }
      },
      grain);
  update_conv_window(pre, pre_stride, batch, length, channels_, window);
}

}  // namespace samebits::blocks
