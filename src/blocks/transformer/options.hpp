// The transformer block's options (docs/models.md §1, §2): the record the block runs with, its native
// refusals, and the optional tensors each option adds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numerics/rope.hpp"

namespace samebits::blocks {

enum class NormKind { kRmsnorm = 0, kLayernorm = 1, kRmsnormOffset = 2 };
enum class MlpKind { kSwiglu = 0, kGelu = 1, kGeluTanh = 2, kGeglu = 3, kGegluTanh = 4 };

// Defaults are the default block's (docs/blocks.md §4.1): every one of them reproduces today's bits.
struct BlockOptions {
  float rope_theta = 10000.0f;  // 0x461C4000
  rope::ScalingParams rope_scaling = {};
  std::int64_t rope_dim = 0;  // 0 = head_dim
  std::int64_t max_positions = 8192;
  bool qkv_bias = false;
  bool o_bias = false;
  NormKind norm = NormKind::kRmsnorm;
  float norm_eps = 1e-6f;  // 0x358637BD
  bool norm_bias = false;
  MlpKind mlp = MlpKind::kSwiglu;
  bool mlp_bias = false;
  bool qk_norm = false;
  float attn_softcap = 0.0f;  // 0 = none

  bool gated() const {
    return mlp == MlpKind::kSwiglu || mlp == MlpKind::kGeglu || mlp == MlpKind::kGegluTanh;
  }
  // rope_dim resolved against head_dim.
  std::int64_t rotary_dim(std::int64_t head_dim) const { return rope_dim == 0 ? head_dim : rope_dim; }
  // Whether the record differs from the default one (docs/models.md §1: an "extended" block).
  bool extended() const;
  // The native refusals (ValueError, "<what>: transformer options: ..."): a scaling kind, norm or MLP kind
  // out of range, rope_dim not 0 nor even in (0, head_dim], non-finite or non-positive floats, a bias on an
  // RMS norm, qk_norm with LayerNorm, max_positions < 1.
  void validate(std::int64_t head_dim, const std::string& what) const;
};

// The optional tensors in the order of docs/models.md §2 (upstream's address tail), with whether `options`
// turns each on and its length for the given widths (0 when off).
struct OptionalTensor {
  const char* name;
  bool on;
  std::int64_t length;
};
std::vector<OptionalTensor> optional_tensors(const BlockOptions& options, std::int64_t d_model,
                                             std::int64_t q_width, std::int64_t kv_width,
                                             std::int64_t intermediate, std::int64_t head_dim);
// Every optional tensor name, in that order.
const std::vector<std::string>& optional_tensor_names();

}  // namespace samebits::blocks
