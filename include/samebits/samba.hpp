// SambaInference (docs/api.md §7): the forward-only Samba language model over token ids, its validated
// SambaConfig and its per-sequence SambaState. The model is immutable and may be shared by threads; each
// state belongs to one caller.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <samebits/json.hpp>
#include <samebits/mamba3.hpp>
#include <samebits/tensor.hpp>
#include <samebits/transformer.hpp>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

namespace models {
class SambaConfig;  // the engine's config and model (opaque here)
class SambaModel;
}  // namespace models
struct ApiAccess;

// One tensor of the Samba registry (docs/formats.md §1.6): its name, shape, and place in the flat
// float32 parameter vector.
struct SambaTensorEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t offset = 0;
  std::int64_t size = 0;
};

// The stack's shape (docs/formats.md §1), validated with upstream's sentences ("samebits.SambaConfig: …").
class SambaConfig {
 public:
  // SambaConfig.from_dict: the ten keys read by name (extras ignored), every rule of docs/formats.md §1.2.
  static SambaConfig from_json(const json::Value& dict);
  // The engine's own config (for code built with the engine's headers).
  SambaConfig(const models::SambaConfig& config);
  // to_dict(): the ten keys in upstream's order.
  json::Value to_json() const;

  std::int64_t vocab() const;
  std::int64_t d_model() const;
  const std::vector<std::string>& layers() const;
  // Absent for a Mamba-only config that did not give them; present when an attention layer exists.
  std::optional<std::int64_t> n_heads() const;
  std::optional<std::int64_t> n_kv_heads() const;
  std::optional<std::int64_t> head_dim() const;
  std::optional<std::int64_t> intermediate() const;
  bool tie_embeddings() const;
  double norm_eps() const;  // a float32 value held as a double
  // Every tensor in stack order; a config whose sizes do not fit 64-bit integers is refused.
  std::vector<SambaTensorEntry> registry() const;
  // (name, shape) of one block kind ("mamba3" or any other name, read as attention) in upstream order.
  std::vector<TensorInfo> block_shapes(const std::string& kind) const;

 private:
  friend struct ApiAccess;
  std::shared_ptr<const models::SambaConfig> impl_;
};

// One layer's state for a call: exactly one of the two is set, by the layer's kind.
struct SambaLayerRef {
  Mamba3State* mamba3 = nullptr;
  TransformerState* attention = nullptr;
};

// One zero-initialized block state per layer, in stack order (docs/formats.md §2). Copies are explicit:
// clone() forks a sequence batch at its current position.
class SambaState {
 public:
  SambaState(std::int64_t batch_size, std::int64_t max_tokens)
      : batch_size_(batch_size), max_tokens_(max_tokens) {}
  SambaState(SambaState&&) noexcept = default;
  SambaState& operator=(SambaState&&) noexcept = default;
  SambaState clone() const;

  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t layer_count() const { return static_cast<std::int64_t>(layers_.size()); }
  // Layer `layer`'s state: exactly one of the two is non-null.
  Mamba3State* mamba3(std::int64_t layer) { return layers_[static_cast<std::size_t>(layer)].mamba3.get(); }
  TransformerState* attention(std::int64_t layer) {
    return layers_[static_cast<std::size_t>(layer)].attention.get();
  }
  const Mamba3State* mamba3(std::int64_t layer) const {
    return layers_[static_cast<std::size_t>(layer)].mamba3.get();
  }
  const TransformerState* attention(std::int64_t layer) const {
    return layers_[static_cast<std::size_t>(layer)].attention.get();
  }
  // Appends a layer's state (allocate_state builds matching ones; a call checks them).
  void add_mamba3(Mamba3State state);
  void add_attention(TransformerState state);

 private:
  struct Layer {
    std::unique_ptr<Mamba3State> mamba3;
    std::unique_ptr<TransformerState> attention;
  };
  std::int64_t batch_size_;
  std::int64_t max_tokens_;
  std::vector<Layer> layers_;
};

class SambaInference {
 public:
  using NamedWeights = NamedTensors;

  // Weights keyed by registry name (float32, already materialized if they were packed): key set, then per
  // registry entry shape and finiteness, refused with upstream's sentences. Values are copied.
  SambaInference(const SambaConfig& config, const NamedWeights& weights,
                 std::string weight_format = "float32");
  // The same from the flat registry-layout vector (validated by the caller).
  SambaInference(const SambaConfig& config, std::vector<float> parameters,
                 std::string weight_format = "float32");
  // The same from one buffer per registry tensor, in registry order (validated by the caller), taken over
  // without a copy.
  SambaInference(const SambaConfig& config, std::vector<std::vector<float>> tensors,
                 std::string weight_format = "float32");
  // A SambaStack checkpoint: streamed v2 archive or legacy JSON (every failure a ValueError). The weights
  // are read once into per-tensor buffers and packed block by block (peak ~ parameter bytes + one block).
  static SambaInference from_checkpoint(const std::string& path);

  const SambaConfig& config() const { return config_; }
  const std::string& weight_format() const { return weight_format_; }
  // A copy of one registry tensor, bit for bit (ValueError for an unknown name).
  std::vector<float> parameter(const std::string& name) const;
  std::string repr() const;

  SambaState allocate_state(std::int64_t batch_size, std::int64_t max_tokens) const;

  // (B, L, vocab) logits. Stateless: every block from a zero state.
  std::vector<float> forward(const IdsView& ids) const;
  // Carried: each block's state read and updated in place.
  std::vector<float> forward(const IdsView& ids, SambaState& state) const;
  // One token per row (ids (B, 1)) -> (B, vocab) logits; the state is required.
  std::vector<float> step(const IdsView& ids, SambaState& state) const;
  // One decode token for each of N independent sequences (docs/api.md §18): ids[i] continues states[i], a
  // one-row state at its own position -> (N, vocab) logits, row i bit for bit what step({ids[i]}, *states[i])
  // gives; the weights are read once for all rows. Every state is checked before any kernel runs (step's
  // refusals; a state listed twice is refused too); when a layer refuses its input, every state is put back.
  std::vector<float> step_many(const std::vector<std::int32_t>& ids,
                               const std::vector<SambaState*>& states) const;
  // The same over per-layer states held outside a SambaState (one list per sequence, as run_layers).
  std::vector<float> step_many_layers(const std::vector<std::int32_t>& ids,
                                      const std::vector<std::vector<SambaLayerRef>>& sequences) const;
  // Ragged, right padded: padding ids (any value) become id 0, padding logits +0.0.
  std::vector<float> forward_ragged(const IdsView& ids, const std::vector<std::int64_t>& lengths) const;
  // The scalar twin of the stateless and the carried forward.
  std::vector<float> forward_reference(const IdsView& ids) const;
  std::vector<float> forward_reference(const IdsView& ids, SambaState& state) const;

  // A call on per-layer states held outside a SambaState (what the Python binding passes), one per layer
  // in stack order. Every refusal that depends on the ids or a state (of any layer) comes before any layer
  // moves; a layer that refuses its input has the layers below put back.
  std::vector<float> run_layers(const IdsView& ids, const std::vector<SambaLayerRef>& layers,
                                const std::string& what, bool reference) const;

  // Shape and id-range refusals of a call ("B and L must be positive", "inputs must be in [0, vocab)").
  void check_ids(const IdsView& ids, const std::string& what) const;
  // Batch and layer agreement between a call and a state.
  void check_state(const SambaState& state, std::int64_t batch, const std::string& what) const;

 private:
  friend struct ApiAccess;
  std::vector<float> run(const IdsView& ids, SambaState* state, const std::string& what,
                         bool reference) const;

  SambaConfig config_;
  std::shared_ptr<const models::SambaModel> model_;
  std::string weight_format_;
};

}  // namespace samebits
