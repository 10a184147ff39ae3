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
#include "blocks/transformer/transformer.hpp"
#include "core/aligned_buffer.hpp"

namespace samebits {

// A state held in caller buffers (what the Python binding passes): the scalars, the two buffers (each of
// the state's float count) and the engine's bookkeeping, which the owner keeps between calls.
struct TransformerStateView {
  float* k_cache = nullptr;
  float* v_cache = nullptr;
  std::int64_t batch_size = 0;
  std::int64_t max_tokens = 0;
  std::int64_t window = 0;
  std::int64_t cached_tokens = 0;
  bool spread = false;           // the buffers are in the spread layout (blocks::KvCache::spread)
  float* k_tiles = nullptr;      // spread only, optional: the key tiles (blocks::KvCache::k_tiles)
  bool trusted = false;          // in: the owner vouches the contents finite; out: whether it still may
  bool private_buffers = false;  // nobody outside the engine can read or write the buffers now
};

// The decode state (blocks.md 4.2): flat k_cache / v_cache of batch * n_kv * capacity * head_dim floats
// (capacity = window if window > 0 else max_tokens), zeros at allocation, owned here, updated in place.
//
// While nobody holds its buffers, a full-causal state that only the engine has written since it was last
// checked is kept in the engine's spread layout (blocks::KvCache::spread), where a decode step appends
// its row without moving the cache, and it skips the O(cache) non-finite scan. Every accessor that hands
// out a buffer first puts the packed layout back (zeros in the capacity it used) and marks the state
// exposed, and the mutable ones end the trust, until forget_handouts() declares every pointer gone.
class TransformerState {
 public:
  TransformerState(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                   std::int64_t max_tokens, std::int64_t window);
  // An independent state with the same contents, layout and trust; nothing of it is handed out.
  TransformerState clone() const;

  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t n_kv_heads() const { return n_kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t window() const { return window_; }
  std::int64_t capacity() const { return window_ > 0 ? window_ : max_tokens_; }
  std::int64_t cached_tokens() const { return cached_tokens_; }
  // Packs the cache first and ends the trust (the buffers are read at the new count).
  void set_cached_tokens(std::int64_t value);
  std::int64_t cache_floats() const { return batch_size_ * n_kv_heads_ * capacity() * head_dim_; }
  // The buffers in the packed layout of blocks.md 4.2; the state is exposed (and untrusted) from now on.
  float* k_cache();
  float* v_cache();
  // Copies of the whole buffers as k_cache() / v_cache() would show them, handing nothing out.
  std::vector<float> k_cache_copy() const { return packed_copy(k_); }
  std::vector<float> v_cache_copy() const { return packed_copy(v_); }
  // The used region as [batch, n_kv, held, head_dim], held = cached_tokens (window: the min(S, W) most
  // recent positions, ascending): copies, whatever the layout.
  std::vector<float> keys() const;
  std::vector<float> values() const;
  std::int64_t held_tokens() const;

  // Every pointer handed out is gone: the engine may spread and trust the state again.
  void forget_handouts() { exposed_ = false; }
  bool exposed() const { return exposed_; }
  bool trusted() const { return trusted_ && !exposed_; }
  bool spread() const { return spread_; }

  // For the engine. engine_view: the buffers and bookkeeping for one call, after moving the cache to the
  // layout that call uses (spread when private and trusted; packed for the scalar twin). engine_commit:
  // the outcome of a call that returned (cached_tokens and trust).
  TransformerStateView engine_view(bool reference);
  void engine_commit(const TransformerStateView& view);

 private:
  std::vector<float> used_region(const float* buffer) const;
  void pack();  // spread -> packed (no-op when packed)
  std::vector<float> packed_copy(const AlignedBuffer<float>& buffer) const;
  blocks::KvCache cache_view();
  blocks::TransformerDims cache_dims() const;

  std::int64_t batch_size_, n_kv_heads_, head_dim_, max_tokens_, window_;
  std::int64_t cached_tokens_ = 0;
  AlignedBuffer<float> k_, v_;
  // While spread: the key tiles, kept equal to the spread keys by every engine call (a decode row's
  // scores read them without transposing). Allocated on first spread; empty if the system refused.
  AlignedBuffer<float> k_tiles_;
  bool spread_ = false;
  bool trusted_ = false;
  bool exposed_ = false;
};

// The cache one call runs on, from an owner's view: spread as the view says; trusted only when the
// owner vouches for the contents and nobody else holds the buffers (full causal).
blocks::KvCache engine_cache(const TransformerStateView& view, std::int64_t batch);
// After a call on `cache` (made by engine_cache from `view`, cached_tokens pos0 before) returned: the new
// cached_tokens and the trust the owner may keep (private buffers, full causal, not the scalar twin, and
// every row the call appended finite).
void finish_engine_call(TransformerStateView& view, const blocks::KvCache& cache,
                        const blocks::TransformerDims& dims, std::int64_t pos0, bool reference);

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
