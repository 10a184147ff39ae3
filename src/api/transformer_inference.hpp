// TransformerBlockInference (api.md 3): the forward-only Llama block with upstream validation wording,
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
#include "blocks/transformer.hpp"
#include "core/aligned_buffer.hpp"

namespace samebits {

// The decode state (blocks.md 4.2): flat k_cache / v_cache of batch * n_kv * capacity * head_dim floats
// (capacity = window if window > 0 else max_tokens), zeros at allocation, owned here, updated in place.
class TransformerState {
 public:
  TransformerState(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                   std::int64_t max_tokens, std::int64_t window);
  TransformerState clone() const;

  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t n_kv_heads() const { return n_kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t window() const { return window_; }
  std::int64_t capacity() const { return window_ > 0 ? window_ : max_tokens_; }
  std::int64_t cached_tokens() const { return cached_tokens_; }
  void set_cached_tokens(std::int64_t value) { cached_tokens_ = value; }
  std::int64_t cache_floats() const { return batch_size_ * n_kv_heads_ * capacity() * head_dim_; }
  float* k_cache() { return k_.data(); }
  float* v_cache() { return v_.data(); }
  const float* k_cache() const { return k_.data(); }
  const float* v_cache() const { return v_.data(); }
  // The used region as [batch, n_kv, held, head_dim], held = cached_tokens (window: the min(S, W) most
  // recent positions, ascending).
  std::vector<float> keys() const;
  std::vector<float> values() const;
  std::int64_t held_tokens() const;

 private:
  std::vector<float> used_region(const float* buffer) const;

  std::int64_t batch_size_, n_kv_heads_, head_dim_, max_tokens_, window_;
  std::int64_t cached_tokens_ = 0;
  AlignedBuffer<float> k_, v_;
};

// A state held in caller buffers (what the Python binding passes): the scalars plus the two buffers, each
// of the state's float count.
struct TransformerStateView {
  float* k_cache = nullptr;
  float* v_cache = nullptr;
  std::int64_t batch_size = 0;
  std::int64_t max_tokens = 0;
  std::int64_t window = 0;
  std::int64_t cached_tokens = 0;
};

struct TransformerOptions {
  std::int64_t n_heads = 0;
  std::optional<std::int64_t> n_kv_heads;  // default n_heads
  std::optional<std::int64_t> head_dim;    // default d_model / n_heads
  std::int64_t window = 0;                 // 0 = full causal
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
  static const std::vector<std::string>& weight_names();

  // Zero state for batch_size sequences of up to max_tokens positions (both >= 1).
  TransformerState allocate_state(std::int64_t batch_size, std::int64_t max_tokens) const;

  // x (B, L, d_model) -> y (B, L, d_model). Stateless: a fresh cache of capacity L, discarded.
  std::vector<float> forward(const TensorView& x) const;
  // Carried: reads and updates `state` (the same function; step is this at L = 1).
  std::vector<float> forward(const TensorView& x, TransformerState& state) const;
  std::vector<float> forward(const TensorView& x, TransformerStateView& state) const;
  // One token per row: x (B, 1, d_model) or (B, d_model); the output has x's rank.
  std::vector<float> step(const TensorView& x, TransformerState& state) const;
  std::vector<float> step(const TensorView& x, TransformerStateView& state) const;
  // Ragged (blocks.md 6): padding inputs replaced by +0.0, the stateless forward, padding outputs +0.0.
  std::vector<float> forward_ragged(const TensorView& x, const std::vector<std::int64_t>& lengths) const;

  // The scalar twin of each forward (same refusals, same bits).
  std::vector<float> forward_reference(const TensorView& x) const;
  std::vector<float> forward_reference(const TensorView& x, TransformerStateView& state, bool step) const;

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
  std::vector<float> run(const TensorView& x, TransformerStateView& state, bool step, bool reference) const;

  std::shared_ptr<const blocks::TransformerBlock> block_;
  std::string weight_format_;
};

}  // namespace samebits
