// BlockOptions: the default record, the native refusals and the optional tensor table (docs/models.md §1,
// §2).
#include "blocks/transformer/options.hpp"

#include <bit>
#include <cmath>
#include <samebits/errors.hpp>
#include <sstream>

#include "numerics/fp.hpp"

namespace samebits::blocks {

namespace {

std::string float_text(float value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

bool positive_finite(float value) { return fp::is_finite(value) && value > 0.0f; }

}  // namespace

bool BlockOptions::extended() const {
  const BlockOptions d;
  auto same = [](float a, float b) {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
  };
  return !same(rope_theta, d.rope_theta) || rope_scaling.kind != d.rope_scaling.kind ||
         !same(rope_scaling.factor, d.rope_scaling.factor) ||
         !same(rope_scaling.low_freq_factor, d.rope_scaling.low_freq_factor) ||
         !same(rope_scaling.high_freq_factor, d.rope_scaling.high_freq_factor) ||
         rope_scaling.original != d.rope_scaling.original || rope_dim != d.rope_dim ||
         max_positions != d.max_positions || qkv_bias || o_bias || norm != d.norm ||
         !same(norm_eps, d.norm_eps) || norm_bias || mlp != d.mlp || mlp_bias || qk_norm ||
         !same(attn_softcap, d.attn_softcap);
}

void BlockOptions::validate(std::int64_t head_dim, const std::string& what) const {
  const std::string prefix = what + ": transformer options: ";
  auto refuse = [&](const std::string& text) { throw_value_error(prefix + text); };
  const int scaling = static_cast<int>(rope_scaling.kind);
  if (scaling < 0 || scaling > 2)
    refuse("rope_scaling type " + std::to_string(scaling) + " is not supported (0 none, 1 linear, 2 llama3)");
  if (!positive_finite(rope_theta))
    refuse("rope_theta must be a finite positive float, got " + float_text(rope_theta));
  for (float value : {rope_scaling.factor, rope_scaling.low_freq_factor, rope_scaling.high_freq_factor})
    if (!positive_finite(value))
      refuse("rope_scaling factor must be a finite positive float, got " + float_text(value));
  if (rope_scaling.kind == rope::Scaling::kLlama3) {
    if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor))
      refuse("rope_scaling 'llama3' needs high_freq_factor > low_freq_factor, got " +
             float_text(rope_scaling.high_freq_factor) + " <= " + float_text(rope_scaling.low_freq_factor));
    if (rope_scaling.original < 1)
      refuse("rope_scaling 'llama3' original_max_position_embeddings must be positive, got " +
             std::to_string(rope_scaling.original));
  }
  if (rope_dim < 0 || rope_dim > head_dim)
    refuse("rope_dim " + std::to_string(rope_dim) +
           " must be 0 (= head_dim) or in (0, head_dim=" + std::to_string(head_dim) + "]");
  if (rope_dim % 2 != 0) refuse("rope_dim " + std::to_string(rope_dim) + " must be even (RoPE pairs halves)");
  if (max_positions < 1) refuse("max_positions must be positive, got " + std::to_string(max_positions));
  const int norm_kind = static_cast<int>(norm);
  if (norm_kind < 0 || norm_kind > 2)
    refuse("norm kind " + std::to_string(norm_kind) +
           " is not supported (0 rmsnorm, 1 layernorm, 2 rmsnorm_offset)");
  if (!positive_finite(norm_eps))
    refuse("norm_eps must be a finite positive float, got " + float_text(norm_eps));
  if (norm_bias && norm != NormKind::kLayernorm)
    refuse("an RMSNorm carries no bias (norm_bias needs layernorm)");
  const int mlp_kind = static_cast<int>(mlp);
  if (mlp_kind < 0 || mlp_kind > 4)
    refuse("mlp kind " + std::to_string(mlp_kind) +
           " is not supported (0 swiglu, 1 gelu, 2 gelu_tanh, 3 geglu, 4 geglu_tanh)");
  if (qk_norm && norm == NormKind::kLayernorm)
    refuse("qk_norm with norm layernorm is not supported (q and k are normalized with an RMS form)");
  if (attn_softcap != 0.0f && !positive_finite(attn_softcap))
    refuse("attn_softcap must be None or a finite positive float, got " + float_text(attn_softcap));
}

const std::vector<std::string>& optional_tensor_names() {
  static const std::vector<std::string> names{
      "q_proj.bias",   "k_proj.bias",          "v_proj.bias",
      "o_proj.bias",   "input_layernorm.bias", "post_attention_layernorm.bias",
      "up_proj.bias",  "down_proj.bias",       "gate_proj.bias",
      "q_norm.weight", "k_norm.weight"};
  return names;
}

std::vector<OptionalTensor> optional_tensors(const BlockOptions& o, std::int64_t d_model,
                                             std::int64_t q_width, std::int64_t kv_width,
                                             std::int64_t intermediate, std::int64_t head_dim) {
  const bool gate_bias = o.mlp_bias && o.gated();
  const std::vector<std::pair<bool, std::int64_t>> table{
      {o.qkv_bias, q_width},     {o.qkv_bias, kv_width}, {o.qkv_bias, kv_width},     {o.o_bias, d_model},
      {o.norm_bias, d_model},    {o.norm_bias, d_model}, {o.mlp_bias, intermediate}, {o.mlp_bias, d_model},
      {gate_bias, intermediate}, {o.qk_norm, head_dim},  {o.qk_norm, head_dim}};
  std::vector<OptionalTensor> out;
  for (std::size_t i = 0; i < table.size(); ++i)
    out.push_back({optional_tensor_names()[i].c_str(), table[i].first, table[i].first ? table[i].second : 0});
  return out;
}

}  // namespace samebits::blocks
