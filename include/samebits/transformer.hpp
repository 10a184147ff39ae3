// TransformerBlockInference (docs/api.md §3): the forward-only Llama block with upstream's validation
// wording, and TransformerState, its KV cache: stateless / carried / ragged forward, step, and the scalar
// twin of each for cross-checks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <samebits/pin.hpp>
#include <samebits/tensor.hpp>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

namespace blocks {
class TransformerBlock;  // the engine block (opaque here)
}
class KvCacheState;  // what a TransformerState holds (opaque here)
struct ApiAccess;    // the engine's way in (src/api/api_access.hpp)

// The decode state (docs/blocks.md §4.2): k_cache / v_cache of batch * n_kv * capacity * head_dim floats
// (capacity = window if window > 0 else max_tokens), seen from outside in the packed layout: full causal,
// the first batch * n_kv * cached_tokens * head_dim floats are the [B, KV, S, HD] cache and the rest is
// capacity; a window keeps a ring of W slots per (batch row, kv head), slot = position mod W. Internally
// the engine may keep an unpinned owned cache in a faster layout; every view below is the packed one.
class TransformerState {
 public:
  // Zeros for batch_size sequences (refused, as a ValueError, past the allocation bound).
  TransformerState(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                   std::int64_t max_tokens, std::int64_t window);
  // A state over caller buffers of cache_floats() floats each, read and written in place: the caller keeps
  // them alive and may write them between calls (so every call checks them).
  static TransformerState borrowing(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                                    std::int64_t max_tokens, std::int64_t window, float* k_cache,
                                    float* v_cache, std::int64_t cached_tokens);
  TransformerState(TransformerState&&) noexcept;
  TransformerState& operator=(TransformerState&&) noexcept;
  ~TransformerState();
  // An independent owned state with the same contents; continuing it gives the bits the original would.
  TransformerState clone() const;

  std::int64_t batch_size() const;
  std::int64_t n_kv_heads() const;
  std::int64_t head_dim() const;
  std::int64_t max_tokens() const;
  std::int64_t window() const;
  // window if window > 0, else max_tokens; cache_floats() = batch * n_kv * capacity * head_dim.
  std::int64_t capacity() const;
  std::int64_t cache_floats() const;
  // Absolute positions consumed. Setting it is an edit: the next call checks the cache.
  std::int64_t cached_tokens() const;
  void set_cached_tokens(std::int64_t value);
  // Positions held: cached_tokens, or for a window the min(cached_tokens, window) most recent.
  std::int64_t held_tokens() const;

  // Read-only copies in the packed layout: the whole buffers, and the used region as
  // [batch, n_kv, held, head_dim] (a window's positions oldest first).
  std::vector<float> k_cache_copy() const;
  std::vector<float> v_cache_copy() const;
  std::vector<float> keys() const;
  std::vector<float> values() const;

  // A writable view of one whole buffer in the packed layout. While any pin is alive the state stays
  // packed and every call checks it; what was written through a pin is checked by the next call after.
  using Pin = BufferPin;
  Pin pin_k_cache();
  Pin pin_v_cache();

  // Diagnostics (tests): the engine's private layout is in use, a pin is alive, the next call may skip its
  // non-finite scan.
  bool spread() const;
  bool pinned() const;
  bool trusted() const;

 private:
  friend struct ApiAccess;
  explicit TransformerState(std::unique_ptr<KvCacheState> impl);
  std::unique_ptr<KvCacheState> impl_;
};

// The block's shape (docs/blocks.md §4.1) and its options (docs/models.md §2), with upstream's names;
// floats already rounded to float32.
struct TransformerOptions {
  std::int64_t n_heads = 0;
  std::optional<std::int64_t> n_kv_heads;  // default n_heads
  std::optional<std::int64_t> head_dim;    // default d_model / n_heads
  std::int64_t window = 0;                 // 0 = full causal
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
  using NamedWeights = NamedTensors;

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
  // One token for each of N independent sequences (docs/api.md §18): x (N, d_model) or (N, 1, d_model), row i
  // continuing states[i] (one row each, at its own position, no state listed twice) -> (N, 1, d_model), row
  // i bit for bit step(row i, *states[i]); the projections run over all rows at once. Every state is checked
  // (step's refusals) before any cache moves.
  std::vector<float> step_many(const TensorView& x, const std::vector<TransformerState*>& states) const;
  // Ragged (docs/blocks.md §6): padding inputs replaced by +0.0, the stateless forward, padding outputs +0.0.
  std::vector<float> forward_ragged(const TensorView& x, const std::vector<std::int64_t>& lengths) const;

  // The scalar twin of each forward (same refusals, same bits).
  std::vector<float> forward_reference(const TensorView& x) const;
  std::vector<float> forward_reference(const TensorView& x, TransformerState& state, bool step) const;

  // Always NotImplementedError: inference is forward only.
  [[noreturn]] void backward() const;

  // The x-shape refusals of forward / step: returns (B, L); step admits (B, d_model).
  std::array<std::int64_t, 2> check_tokens(const std::vector<std::int64_t>& shape, bool step) const;
  // Batch and window agreement between a call and a state.
  void check_state(std::int64_t batch, std::int64_t state_batch, std::int64_t state_window, bool step) const;

  std::int64_t d_model() const;
  std::int64_t n_heads() const;
  std::int64_t n_kv_heads() const;
  std::int64_t head_dim() const;
  std::int64_t intermediate() const;
  std::int64_t window() const;
  // The nine weights' names and shapes in upstream order, and a copy of one, bit for bit.
  std::vector<TensorInfo> weight_table() const;
  std::vector<float> weight(std::size_t index) const;
  const std::string& weight_format() const { return weight_format_; }

 private:
  friend struct ApiAccess;
  // Around a block the engine built itself (a GGUF model's packed layers).
  TransformerBlockInference(std::shared_ptr<const blocks::TransformerBlock> block, std::string weight_format)
      : block_(std::move(block)), weight_format_(std::move(weight_format)) {}
  std::vector<float> run(const TensorView& x, TransformerState& state, bool step, bool reference) const;

  std::shared_ptr<const blocks::TransformerBlock> block_;
  std::string weight_format_;
};

}  // namespace samebits
