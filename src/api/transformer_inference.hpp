// TransformerBlockInference (docs/api.md §3): the forward-only Llama block with upstream validation wording,
// its KV-cache state, stateless / carried / ragged forward, step, and the scalar twin for cross-checks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/samebits.hpp"
#include "api/transformer_state.hpp"
#include "blocks/transformer/transformer.hpp"

namespace samebits {

struct TransformerOptions {
  std::int64_t n_heads = 0;
  std::optional<std::int64_t> n_kv_heads;  // default n_heads
  std::optional<std::int64_t> head_dim;    // default d_model / n_heads
  std::int64_t window = 0;                 // 0 = full causal
  // The block options of docs/models.md §2 (upstream's names; floats already rounded to float32).
  float rope_theta = 10000.0f;
  std::string rope_scaling = "";                             // "" (none), "linear" or "llama3"
  std::optional<float> rope_factor = std::nullopt;           // rope_scaling's factor (required by both kinds)
  std::optional<float> rope_low_freq_factor = std::nullopt;  // llama3 only, required there
  std::optional<float> rope_high_freq_factor = std::nullopt;  // llama3 only, required there
  std::optional<std::int64_t> rope_original_max_position_embeddings = std::nullopt;  // llama3 only, required
  std::optional<std::int64_t> rope_dim = std::nullopt;  // default head_dim; even, in (0, head_dim]
  std::int64_t max_positions = 8192;
  bool qkv_bias = false;
  bool o_bias = false;
  std::string norm = "rmsnorm";  // "rmsnorm", "layernorm" or "rmsnorm_offset"
  float norm_eps = 1e-6f;
  bool norm_bias = false;      // layernorm only
  std::string mlp = "swiglu";  // "swiglu", "gelu", "gelu_tanh", "geglu" or "geglu_tanh"
  bool mlp_bias = false;
  bool qk_norm = false;
  std::optional<float> attn_softcap = std::nullopt;  // finite > 0 when given
};

class TransformerBlockInference {
 public:
  using NamedWeights = std::vector<std::pair<std::string, TensorView>>;

  // The nine weights by upstream name (any order). Values are copied. Refusals (ValueError) in upstream
  // order: key set, window, input_layernorm.weight rank, n_heads, d_model == n_heads * head_dim,
  // n_kv_heads, gate_proj.weight, every other shape, then the native ones (n_heads % n_kv_heads, odd
  // head_dim, non-finite weights).
  TransformerBlockInference(const NamedWeights& weights, const TransformerOptions& options,
                            std::string weight_format = "float32");

  // "weight dict mismatch; missing [...]; unknown [...]" for a key set other than the nine names.
  static void check_weight_names(const std::vector<std::string>& names);
  // With options (docs/models.md §2): their value refusals, then each optional tensor present against its
  // option or missing, a gate on an ungated MLP, then the exact key set those options call for.
  static void check_weight_names(const std::vector<std::string>& names, const TransformerOptions& options);
  static const std::vector<std::string>& weight_names();

  // Zero state for batch_size sequences of up to max_tokens positions (both >= 1).
  TransformerState allocate_state(std::int64_t batch_size, std::int64_t max_tokens) const;

  // x (B, L, d_model) -> y (B, L, d_model). Stateless: a fresh cache of capacity L, discarded.
  std::vector<float> forward(const TensorView& x) const;
  // Carried: reads and updates `state` (the same function; step is this at L = 1).
  std::vector<float> forward(const TensorView& x, TransformerState& state) const;
  // One token per row: x (B, 1, d_model) or (B, d_model); the output has x's rank.
  std::vector<float> step(const TensorView& x, TransformerState& state) const;
  // Ragged (docs/blocks.md §6): padding inputs replaced by +0.0, the stateless forward, padding outputs +0.0.
  std::vector<float> forward_ragged(const TensorView& x, const std::vector<std::int64_t>& lengths) const;

  // The scalar twin of each forward (same refusals, same bits).
  std::vector<float> forward_reference(const TensorView& x) const;
  std::vector<float> forward_reference(const TensorView& x, TransformerState& state, bool step) const;

  [[noreturn]] void backward() const;

  // The x-shape refusals of forward / step: returns (B, L); step admits (B, d_model).
  std::array<std::int64_t, 2> check_tokens(const std::vector<std::int64_t>& shape, bool step) const;
  // Batch and window agreement between a call and a state.
  void check_state(std::int64_t batch, std::int64_t state_batch, std::int64_t state_window, bool step) const;

  const blocks::TransformerDims& dims() const { return block_->dims(); }
  // A fresh copy of every weight, bit for bit (the block keeps its projections only as packed panels).
  blocks::TransformerWeights weights() const { return block_->weights(); }
  std::vector<float> weight(std::size_t index) const { return block_->weight(index); }
  const std::string& weight_format() const { return weight_format_; }
  std::shared_ptr<const blocks::TransformerBlock> block() const { return block_; }

 private:
  std::vector<float> run(const TensorView& x, TransformerState& state, bool step, bool reference) const;

  std::shared_ptr<const blocks::TransformerBlock> block_;
  std::string weight_format_;
};

}  // namespace samebits
