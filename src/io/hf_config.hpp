// Hugging Face config.json files and the plan a CausalLM is built from (docs/models.md §15, §16): the
// families, their field checks in upstream's order and wording, samebits' reading of each field (or
// upstream's loader quirks when asked), and the tensor mapping of every layer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <samebits/json.hpp>
#include <string>
#include <vector>

namespace samebits::io {

// Which loader's reading of a config: the checkpoint as its config defines it, or upstream's quirks
// (docs/models.md §15.3).
enum class HFLoader { Samebits, Mojolearn };
// "samebits" or "mojolearn"; anything else is a ValueError naming the value.
HFLoader hf_loader_from_name(const std::string& name);

enum class HFKind { Transformer, Mamba1, Mamba2 };

// One block tensor: the block's key, the checkpoint name it comes from and, for phi3's fused tensors, the
// row range [row_begin, row_end) it takes (row_end == 0: the whole tensor).
struct HFTensorRef {
  std::string key;
  std::string name;
  std::int64_t row_begin = 0;
  std::int64_t row_end = 0;
  bool sliced() const { return row_end > 0; }
};

// A transformer layer's options, as the block takes them (docs/models.md §2); doubles as written.
struct HFBlockOptions {
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t window = 0;
  double rope_theta = 10000.0;
  std::string rope_scaling;  // "", "linear" or "llama3"
  double rope_factor = 1.0;
  double rope_low_freq_factor = 0.0;
  double rope_high_freq_factor = 0.0;
  std::int64_t rope_original_max_position_embeddings = 0;
  std::int64_t rope_dim = 0;  // 0: head_dim
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;
  double norm_eps = 1e-6;  // the blocks' norms (and qk_norm)
};

struct HFPlan {
  std::string model_type;
  std::string family;  // the family model_type belongs to (smollm -> llama)
  HFKind kind = HFKind::Transformer;
  HFLoader loader = HFLoader::Samebits;
  std::int64_t n_layers = 0;
  std::int64_t d_model = 0;
  std::int64_t vocab_size = 0;
  bool tie_embeddings = false;
  double norm_eps = 1e-5;                               // the final norm
  std::optional<std::int64_t> max_position_embeddings;  // none for the Mamba families
  // transformer
  std::int64_t intermediate = 0;
  HFBlockOptions block;  // every layer's options but the window
  // Windows (0 = full causal): layer i's is layer_type_windows[i] when the config lists layer_types, else
  // `window` from layer `window_from` on (window_of()); kept compact, as a config's layer count is untrusted.
  std::int64_t window = 0;
  std::int64_t window_from = 0;
  std::vector<std::int64_t> layer_type_windows;
  // mamba2
  double dt_lo = 0.0;
  double dt_hi = 0.0;

  std::string embed_name;
  std::string norm_name;
  std::string head_name;  // empty when tied

  std::int64_t window_of(std::int64_t layer) const;
  // The block tensors of layer i, in the block's key order.
  std::vector<HFTensorRef> layer_weights(std::int64_t i) const;
  // How many distinct checkpoint names the plan reads, and whether it reads `name` (without listing every
  // layer's names: the count of layers is the config's).
  std::int64_t planned_count() const;
  bool is_planned(const std::string& name) const;
  // The first `limit` names the plan reads (embedding, each layer's, final norm, head; first use kept) for
  // which `absent` holds, walking layers only while they are needed.
  template <typename Pred>
  std::vector<std::string> first_planned(std::size_t limit, Pred absent) const {
    std::vector<std::string> out;
    auto take = [&](const std::string& name) {
      if (out.size() < limit && absent(name) && std::find(out.begin(), out.end(), name) == out.end())
        out.push_back(name);
    };
    take(embed_name);
    for (std::int64_t i = 0; i < n_layers && out.size() < limit; ++i)
      for (const HFTensorRef& ref : layer_weights(i)) take(ref.name);
    take(norm_name);
    if (!head_name.empty()) take(head_name);
    return out;
  }
};

// config.json of a checkpoint directory (or the file itself), parsed in the Python dialect: a missing
// file is a FileNotFoundError, bad JSON a ValueError "samebits.models.HFConfig: P is not JSON: ...".
json::Value read_hf_config(const std::string& path);
// The plan of a parsed config: the family checks in order, each refusal "samebits.models: model_type
// 'x': field=value is not honored: why" (docs/models.md §15). `path` names the config in messages.
HFPlan plan_for(const json::Value& config, const std::string& path, HFLoader loader);

// Python's repr() of a JSON value (refusal messages).
std::string python_repr(const json::Value& value);

}  // namespace samebits::io
