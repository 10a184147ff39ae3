// TransformerOptions -> blocks::BlockOptions with upstream's refusal wording (docs/models.md §2).
#include "api/transformer_options.hpp"

#include <algorithm>
#include <charconv>
#include <samebits/errors.hpp>

#include "numerics/fp.hpp"

namespace samebits::transformer_options {

namespace {

// A float as Python prints the float32's value ("0.0", "1e-05", "inf").
std::string float_repr(float value) {
  if (fp::is_nan(value)) return "nan";
  if (fp::is_inf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, static_cast<double>(value));
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

bool positive_finite(float value) { return fp::is_finite(value) && value > 0.0f; }

blocks::NormKind norm_kind(const std::string& norm, const std::string& what) {
  if (norm == "rmsnorm") return blocks::NormKind::kRmsnorm;
  if (norm == "layernorm") return blocks::NormKind::kLayernorm;
  if (norm == "rmsnorm_offset") return blocks::NormKind::kRmsnormOffset;
  throw_value_error(what + ": norm='" + norm +
                    "' is not supported; one of ['layernorm', 'rmsnorm', 'rmsnorm_offset']");
}

blocks::MlpKind mlp_kind(const std::string& mlp, const std::string& what) {
  if (mlp == "swiglu") return blocks::MlpKind::kSwiglu;
  if (mlp == "gelu") return blocks::MlpKind::kGelu;
  if (mlp == "gelu_tanh") return blocks::MlpKind::kGeluTanh;
  if (mlp == "geglu") return blocks::MlpKind::kGeglu;
  if (mlp == "geglu_tanh") return blocks::MlpKind::kGegluTanh;
  throw_value_error(what + ": mlp='" + mlp +
                    "' is not supported; one of ['geglu', 'geglu_tanh', 'gelu', 'gelu_tanh', 'swiglu']");
}

}  // namespace

blocks::BlockOptions block_options(const TransformerOptions& options, const std::string& what) {
  blocks::BlockOptions out;
  auto positive = [&](const std::string& name, float value) {
    if (!positive_finite(value))
      throw_value_error(what + ": " + name + " must be a finite positive float, got " + float_repr(value));
    return value;
  };
  out.rope_theta = positive("rope_theta", options.rope_theta);
  const std::string& kind = options.rope_scaling;
  if (!kind.empty()) {
    if (kind != "linear" && kind != "llama3")
      throw_value_error(what + ": rope_scaling type '" + kind +
                        "' is not supported; 'linear' and 'llama3' are (dynamic, yarn and longrope carry an "
                        "attention_factor this profile does not spell)");
    if (!options.rope_factor) throw_value_error(what + ": rope_scaling '" + kind + "' needs 'factor'");
    out.rope_scaling.factor = positive("rope_scaling factor", *options.rope_factor);
    out.rope_scaling.kind = rope::Scaling::kLinear;
    if (kind == "llama3") {
      if (!options.rope_low_freq_factor)
        throw_value_error(what + ": rope_scaling 'llama3' needs 'low_freq_factor'");
      if (!options.rope_high_freq_factor)
        throw_value_error(what + ": rope_scaling 'llama3' needs 'high_freq_factor'");
      if (!options.rope_original_max_position_embeddings)
        throw_value_error(what + ": rope_scaling 'llama3' needs 'original_max_position_embeddings'");
      const float low = positive("rope_scaling low_freq_factor", *options.rope_low_freq_factor);
      const float high = positive("rope_scaling high_freq_factor", *options.rope_high_freq_factor);
      if (!(high > low))
        throw_value_error(what + ": rope_scaling 'llama3' needs high_freq_factor > low_freq_factor, got " +
                          float_repr(high) + " <= " + float_repr(low));
      const std::int64_t original = *options.rope_original_max_position_embeddings;
      if (original <= 0)
        throw_value_error(what +
                          ": rope_scaling 'llama3' original_max_position_embeddings must be positive, got " +
                          std::to_string(original));
      out.rope_scaling.kind = rope::Scaling::kLlama3;
      out.rope_scaling.low_freq_factor = low;
      out.rope_scaling.high_freq_factor = high;
      out.rope_scaling.original = original;
    }
  } else if (options.rope_factor || options.rope_low_freq_factor || options.rope_high_freq_factor ||
             options.rope_original_max_position_embeddings) {
    throw_value_error(what +
                      ": rope scaling fields are given but rope_scaling names no type ('linear' or "
                      "'llama3')");
  }
  if (options.max_positions < 1)
    throw_value_error(what + ": max_positions must be positive, got " +
                      std::to_string(options.max_positions));
  out.max_positions = options.max_positions;
  out.norm = norm_kind(options.norm, what);
  out.norm_eps = positive("norm_eps", options.norm_eps);
  if (options.norm_bias && out.norm != blocks::NormKind::kLayernorm)
    throw_value_error(what + ": norm_bias=True needs norm='layernorm', got norm='" + options.norm +
                      "' (an RMSNorm carries no bias)");
  out.norm_bias = options.norm_bias;
  out.mlp = mlp_kind(options.mlp, what);
  if (options.qk_norm && out.norm == blocks::NormKind::kLayernorm)
    throw_value_error(what +
                      ": qk_norm=True with norm='layernorm' is not supported (no reference family "
                      "normalizes q and k with LayerNorm; use norm='rmsnorm' or 'rmsnorm_offset')");
  out.qk_norm = options.qk_norm;
  if (options.attn_softcap) out.attn_softcap = positive("attn_softcap", *options.attn_softcap);
  out.qkv_bias = options.qkv_bias;
  out.o_bias = options.o_bias;
  out.mlp_bias = options.mlp_bias;
  return out;
}

std::int64_t check_rope_dim(const TransformerOptions& options, std::int64_t head_dim,
                            const std::string& what) {
  if (!options.rope_dim) return 0;
  const std::int64_t rd = *options.rope_dim;
  if (rd <= 0 || rd > head_dim || rd % 2 != 0)
    throw_value_error(what + ": rope_dim must be an even integer in (0, head_dim=" +
                      std::to_string(head_dim) + "], got " + std::to_string(rd));
  return rd == head_dim ? 0 : rd;
}

void check_optional_names(const std::vector<std::string>& names, const blocks::BlockOptions& options,
                          const std::string& mlp_name, const std::string& what) {
  auto has = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const blocks::OptionalTensor& t : blocks::optional_tensors(options, 1, 1, 1, 1, 1)) {
    if (has(t.name) && !t.on)
      throw_value_error(
          what + ": " + t.name +
          " is present in the weight dict but its option is off (pass the option that carries it, "
          "or drop the tensor; a silently ignored tensor is a wrong model that looks right)");
    if (!has(t.name) && t.on)
      throw_value_error(what + ": " + t.name +
                        " is required by the options passed and is missing from the weight dict");
  }
  if (!options.gated() && has("gate_proj.weight"))
    throw_value_error(what + ": gate_proj.weight is present but mlp='" + mlp_name +
                      "' is ungated (down_proj(act(up_proj(x)))); drop it or pick a gated form");
}

std::vector<std::string> expected_names(const std::vector<std::string>& base,
                                        const blocks::BlockOptions& options) {
  std::vector<std::string> out;
  for (const std::string& name : base)
    if (options.gated() || name != "gate_proj.weight") out.push_back(name);
  for (const blocks::OptionalTensor& t : blocks::optional_tensors(options, 1, 1, 1, 1, 1))
    if (t.on) out.push_back(t.name);
  return out;
}

}  // namespace samebits::transformer_options
