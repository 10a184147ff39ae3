// Mamba3Reports: what a Mamba-3 call reports besides y (docs/blocks.md §3.2); a plain struct that the
// engine's block writes and the public class hands out unchanged.
#pragma once

#include <vector>

namespace samebits {

// Upstream's h_last_, k_last_, v_last_ and theta_last_, row-major.
struct Mamba3Reports {
  std::vector<float> h_last;      // [B, H, 64, 128] h after the final working chunk
  std::vector<float> k_last;      // [B, H, 128] rotated, pre-scale k of the last working row
  std::vector<float> v_last;      // [B, H, 64] raw v of the last working row
  std::vector<float> theta_last;  // [B, H, 32] the angles after the last token
};

}  // namespace samebits
