// SambaInference (docs/api.md §7): the forward-only Samba language model over token ids, with its
// per-sequence SambaState. The model is immutable and may be shared by threads; each state belongs to one
// caller.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/samebits.hpp"
#include "api/transformer_state.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "models/samba.hpp"

namespace samebits {

// Token ids (B, L) as int32, borrowed.
struct IdsView {
  const std::int32_t* data = nullptr;
  std::int64_t batch = 0;
  std::int64_t length = 0;
};

// One layer's state for a call: exactly one of the two is set, by the layer's kind.
struct SambaLayerRef {
  blocks::Mamba3State* mamba3 = nullptr;
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
  // Exactly one of these is non-null for each layer.
  blocks::Mamba3State* mamba3(std::int64_t layer) {
    return layers_[static_cast<std::size_t>(layer)].mamba3.get();
  }
  TransformerState* attention(std::int64_t layer) {
    return layers_[static_cast<std::size_t>(layer)].attention.get();
  }
  const blocks::Mamba3State* mamba3(std::int64_t layer) const {
    return layers_[static_cast<std::size_t>(layer)].mamba3.get();
  }
  const TransformerState* attention(std::int64_t layer) const {
    return layers_[static_cast<std::size_t>(layer)].attention.get();
  }

  void add_mamba3(blocks::Mamba3State state);
  void add_attention(TransformerState state);

 private:
  struct Layer {
    std::unique_ptr<blocks::Mamba3State> mamba3;
    std::unique_ptr<TransformerState> attention;
  };
  std::int64_t batch_size_;
  std::int64_t max_tokens_;
  std::vector<Layer> layers_;
};

class SambaInference {
 public:
  using NamedWeights = std::vector<std::pair<std::string, TensorView>>;

  // Weights keyed by registry name (float32, already materialized if they were packed): key set, then per
  // registry entry shape and finiteness, refused with upstream's sentences. Values are copied.
  SambaInference(models::SambaConfig config, const NamedWeights& weights,
                 std::string weight_format = "float32");
  // The same from the flat registry-layout vector (validated as above by the caller).
  SambaInference(models::SambaConfig config, std::vector<float> parameters,
                 std::string weight_format = "float32");
  // The same from one buffer per registry tensor, in registry order (validated by the caller), taken
  // over without a copy: what from_checkpoint builds from.
  SambaInference(models::SambaConfig config, std::vector<std::vector<float>> tensors,
                 std::string weight_format = "float32");
  // A SambaStack checkpoint: streamed v2 archive or legacy JSON (every failure a ValueError). Memory:
  // the weights are read once into per-tensor buffers and packed block by block, so the peak is about
  // the parameter bytes plus one block's panels (bench/load_memory.py measures it).
  static SambaInference from_checkpoint(const std::string& path);

  const models::SambaConfig& config() const { return model_->config(); }
  const std::string& weight_format() const { return weight_format_; }
  const models::SambaModel& model() const { return *model_; }
  std::string repr() const;

  SambaState allocate_state(std::int64_t batch_size, std::int64_t max_tokens) const;

  // (B, L, vocab) logits. Stateless: every block from a zero state.
  std::vector<float> forward(const IdsView& ids) const;
  // Carried: each block's state read and updated in place.
  std::vector<float> forward(const IdsView& ids, SambaState& state) const;
  // One token per row (ids (B, 1)) -> (B, vocab) logits; the state is required.
  std::vector<float> step(const IdsView& ids, SambaState& state) const;
  // Ragged, right padded: padding ids (any value) become id 0, padding logits +0.0.
  std::vector<float> forward_ragged(const IdsView& ids, const std::vector<std::int64_t>& lengths) const;
  // The scalar twin of the stateless and the carried forward.
  std::vector<float> forward_reference(const IdsView& ids) const;
  std::vector<float> forward_reference(const IdsView& ids, SambaState& state) const;

  // A call on per-layer states held outside a SambaState (what the Python binding passes), one per layer
  // in stack order. State safety: every refusal that depends on the ids or a state (of any layer) comes
  // before any layer moves; a layer that refuses its input (non-finite, from finite weights that overflow)
  // has the layers below put back (models/samba_guard.hpp).
  std::vector<float> run_layers(const IdsView& ids, const std::vector<SambaLayerRef>& layers,
                                const std::string& what, bool reference) const;

  // Shape and id-range refusals of a call ("B and L must be positive", "inputs must be in [0, vocab)").
  void check_ids(const IdsView& ids, const std::string& what) const;
  // Batch and layer agreement between a call and a state.
  void check_state(const SambaState& state, std::int64_t batch, const std::string& what) const;

 private:
  std::vector<float> run(const IdsView& ids, SambaState* state, const std::string& what,
                         bool reference) const;
  // run_layers on the blocks' raw caches, as its states' engine access hands them out.
  std::vector<float> run_borrowed(const IdsView& ids, std::vector<models::SambaLayerState>& layers,
                                  const std::string& what, bool reference) const;

  std::shared_ptr<const models::SambaModel> model_;
  std::string weight_format_;
};

}  // namespace samebits
