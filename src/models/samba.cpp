// Samba stack forward: one code path for the stateless forward, the carried forward and the step.
#include "models/samba.hpp"

#include <algorithm>
#include <samebits/errors.hpp>
#include <utility>

#include "core/thread_pool.hpp"
#include "models/samba_guard.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::models {
namespace {

// Releases a raw buffer for good (clear() alone keeps the capacity).
void release(std::vector<float>& buffer) { std::vector<float>().swap(buffer); }

// The config leaves intermediate (and, for a Mamba-only stack, the head fields) unchecked, so a registry
// entry may want a negative dimension; no buffer can hold such a tensor, whatever its float count says.
void require_fillable(const SambaRegistry& registry) {
  for (const SambaRegistryEntry& entry : registry.entries)
    for (std::int64_t d : entry.shape)
      if (d < 0)
        throw_value_error("samebits.SambaInference: " + entry.name + " wants a negative dimension (" +
                          std::to_string(d) + ")");
}

// The flat registry-layout vector cut into one buffer per tensor; the flat copy is gone on return.
std::vector<std::vector<float>> split(const SambaConfig& config, std::vector<float> flat) {
  const SambaRegistry registry = config.registry();
  require_fillable(registry);
  if (static_cast<std::int64_t>(flat.size()) != registry.total)
    throw_value_error("samebits.SambaInference: the parameter vector holds " + std::to_string(flat.size()) +
                      " floats, the registry " + std::to_string(registry.total));
  std::vector<std::vector<float>> tensors;
  tensors.reserve(registry.entries.size());
  for (const SambaRegistryEntry& entry : registry.entries)
    tensors.emplace_back(flat.begin() + entry.offset, flat.begin() + entry.offset + entry.size);
  return tensors;
}

}  // namespace

SambaModel::SambaModel(SambaConfig config, std::vector<float> parameters)
    : SambaModel(config, split(config, std::move(parameters))) {}

SambaModel::SambaModel(SambaConfig config, std::vector<std::vector<float>> tensors)
    : config_(std::move(config)), registry_(config_.registry()) {
  require_fillable(registry_);
  bool sizes_match = tensors.size() == registry_.entries.size();
  for (std::size_t i = 0; sizes_match && i < tensors.size(); ++i)
    sizes_match = static_cast<std::int64_t>(tensors[i].size()) == registry_.entries[i].size;
  if (!sizes_match)
    throw_value_error("samebits.SambaInference: the tensor buffers do not match the registry of " +
                      std::to_string(registry_.entries.size()) + " tensors");
  std::size_t entry = 1;  // registry order: embed.weight, then each layer's nine tensors
  for (SambaLayerKind kind : config_.layer_kinds()) {
    if (kind == SambaLayerKind::Mamba3) {
      blocks::Mamba3Weights weights;
      for (auto& tensor : weights.tensors) tensor = std::move(tensors[entry++]);
      layers_.push_back({std::make_unique<blocks::Mamba3Block>(std::move(weights)), nullptr});
    } else {
      blocks::TransformerDims dims;
      dims.d_model = config_.d_model();
      dims.n_heads = *config_.n_heads();
      dims.n_kv_heads = *config_.n_kv_heads();
      dims.head_dim = *config_.head_dim();
      dims.intermediate = *config_.intermediate();
      dims.window = 0;  // a Samba stack's attention is always full causal (docs/formats.md §1.4)
      blocks::TransformerWeights w;
      for (std::vector<float>* t :
           {&w.input_norm, &w.post_norm, &w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down})
        *t = std::move(tensors[entry++]);
      layers_.push_back({nullptr, std::make_unique<blocks::TransformerBlock>(dims, std::move(w),
                                                                             "samebits.SambaInference")});
    }
  }
  norm_f_ = std::move(tensors[entry++]);
  // Tied: the head's panels are the embedding table's only copy (the gather reads them, already F'd).
  std::vector<float>& head = config_.tie_embeddings() ? tensors[0] : tensors[entry];
  head_ = gemm::PackedRhs::from_transposed(head.data(), config_.vocab(), config_.d_model(),
                                           Placement::kWeightPool);
  release(head);
  if (!config_.tie_embeddings()) embed_ = std::move(tensors[0]);
}

std::vector<float> SambaModel::tensor_copy(std::size_t index) const {
  const std::size_t layer_tensors = blocks::kMamba3TensorCount;  // nine for either block kind
  const std::size_t after_layers = 1 + layer_tensors * layers_.size();
  if (index == 0) return config_.tie_embeddings() ? head_.unpack_transposed() : embed_;
  if (index < after_layers) {
    const Layer& layer = layers_[(index - 1) / layer_tensors];
    const std::size_t k = (index - 1) % layer_tensors;
    return layer.mamba3 ? layer.mamba3->weight(static_cast<int>(k)) : layer.attention->weight(k);
  }
  if (index == after_layers) return norm_f_;
  if (index == after_layers + 1 && !config_.tie_embeddings()) return head_.unpack_transposed();
  throw_runtime_error("SambaModel: no tensor index " + std::to_string(index));
}

std::vector<float> SambaModel::parameters() const {
  std::vector<float> flat(static_cast<std::size_t>(registry_.total));
  for (std::size_t i = 0; i < registry_.entries.size(); ++i) {
    const std::vector<float> tensor = tensor_copy(i);
    std::copy(tensor.begin(), tensor.end(), flat.begin() + registry_.entries[i].offset);
  }
  return flat;
}

void SambaModel::embed(const std::int32_t* ids, std::int64_t count, float* x) const {
  const std::int64_t d = config_.d_model();
  if (!config_.tie_embeddings()) {
    rmsnorm::embedding(embed_.data(), d, ids, count, x);
    return;
  }
  head_.gather_rows_flushed(ids, count, x);  // the table is the packed head, flushed (F(embed[j][p]))
}

const blocks::TransformerBlock& SambaModel::attention(std::int64_t i) const {
  return *layers_[static_cast<std::size_t>(i)].attention;
}

const blocks::Mamba3Block& SambaModel::mamba3(std::int64_t i) const {
  return *layers_[static_cast<std::size_t>(i)].mamba3;
}

template <bool Reference>
void SambaModel::run(const std::int32_t* ids, std::int64_t batch, std::int64_t length,
                     std::vector<SambaLayerState>& states, float* logits, const std::string& what) const {
  // Every refusal that depends on a state comes before any layer moves. The fast path leaves each KV
  // cache's scan to its layer's restride (one read of the cache, not two); whenever anything is refused,
  // the stack is put back and the full up-front check runs, so the refusal raised is the one it finds.
  const blocks::StateScan kv_scan = Reference ? blocks::StateScan::kNow : blocks::StateScan::kAtAppend;
  auto recheck_in_full = [&] {
    if (kv_scan != blocks::StateScan::kNow) check_layer_states(*this, batch, length, states, what);
  };
  try {
    check_layer_states(*this, batch, length, states, what, kv_scan);
  } catch (...) {
    recheck_in_full();
    throw;
  }
  const std::int64_t d = config_.d_model();
  const std::int64_t rows = batch * length;
  std::vector<float> x(static_cast<std::size_t>(rows * d));  // [B, L, d_model]
  std::vector<float> y(x.size());                            // [B, L, d_model]
  // The twin reads the raw tables, rebuilt from the panels for this call.
  std::vector<float> raw_head;
  if constexpr (Reference) {
    raw_head = head_.unpack_transposed();
    rmsnorm::embedding_reference(config_.tie_embeddings() ? raw_head.data() : embed_.data(), d, ids, rows,
                                 x.data());
  } else {
    embed(ids, rows, x.data());
  }
  // A layer's input is known only once the layer below has run: when a layer refuses it (non-finite),
  // the layers below are put back as they were.
  StackUndo undo;
  try {
    for (std::int64_t i = 0; i < layer_count(); ++i) {
      SambaLayerState& state = states[static_cast<std::size_t>(i)];
      const Layer& layer = layers_[static_cast<std::size_t>(i)];
      if (i + 1 < layer_count()) undo.save(*this, i, state, length);  // the top layer's output is not refused
      if (const blocks::Mamba3Block* block = layer.mamba3.get()) {
        if (state.mamba3 == nullptr)
          throw_value_error(what + ": layer " + std::to_string(i) + " needs a Mamba3State");
        if constexpr (Reference)
          block->forward_reference(x.data(), batch, length, *state.mamba3, y.data(), nullptr, what.c_str(),
                                   true);
        else
          block->forward(x.data(), batch, length, *state.mamba3, y.data(), nullptr, what.c_str(), true);
      } else {
        const blocks::TransformerBlock& attention = *layer.attention;
        if (state.kv == nullptr)
          throw_value_error(what + ": layer " + std::to_string(i) + " needs a TransformerState");
        if constexpr (Reference)
          attention.forward_reference(x.data(), batch, length, *state.kv, y.data(), what,
                                      blocks::StateScan::kDone);
        else
          attention.forward(x.data(), batch, length, *state.kv, y.data(), what, kv_scan);
      }
      undo.commit();
      std::swap(x, y);
    }
  } catch (...) {
    undo.restore();
    recheck_in_full();
    throw;
  }
  if constexpr (Reference) {
    rmsnorm::rmsnorm_reference(x.data(), norm_f_.data(), x.data(), rows, d, config_.norm_eps_f32());
    gemm::gemm_reference(gemm::Orientation::NT, x.data(), raw_head.data(), logits, rows, config_.vocab(), d);
  } else {
    head(x.data(), rows, logits);
  }
}

void SambaModel::head(float* x, std::int64_t rows, float* logits) const {
  const std::int64_t d = config_.d_model();
  rmsnorm::rmsnorm(x, norm_f_.data(), x, rows, d, config_.norm_eps_f32());
  gemm::gemm_packed({x, d, 1}, rows, head_, logits);
}

void SambaModel::step_many(const std::int32_t* ids, std::int64_t count,
                           std::vector<std::vector<SambaLayerState>>& sequences, float* logits,
                           const std::string& what) const {
  // Every sequence's state refusals first (the KV caches scanned now unless trusted), so no layer call can
  // refuse a state after another sequence moved.
  for (const std::vector<SambaLayerState>& states : sequences)
    check_layer_states(*this, 1, 1, states, what, blocks::StateScan::kNow);
  const std::int64_t d = config_.d_model();
  std::vector<float> x(static_cast<std::size_t>(count * d));
  std::vector<float> y(x.size());
  embed(ids, count, x.data());
  std::vector<StackUndo> undo(static_cast<std::size_t>(count));
  std::vector<blocks::Mamba3State*> mamba3(static_cast<std::size_t>(count));
  std::vector<blocks::KvCache*> caches(static_cast<std::size_t>(count));
  try {
    for (std::int64_t i = 0; i < layer_count(); ++i) {
      const Layer& layer = layers_[static_cast<std::size_t>(i)];
      for (std::int64_t s = 0; s < count; ++s) {
        SambaLayerState& state = sequences[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
        if (i + 1 < layer_count()) undo[static_cast<std::size_t>(s)].save(*this, i, state, 1);
        mamba3[static_cast<std::size_t>(s)] = state.mamba3;
        caches[static_cast<std::size_t>(s)] = state.kv;
      }
      if (layer.mamba3)
        layer.mamba3->step_many(x.data(), count, mamba3.data(), y.data(), what.c_str(), true);
      else
        layer.attention->step_many(x.data(), count, caches.data(), y.data(), what, true);
      for (StackUndo& record : undo) record.commit();
      std::swap(x, y);
    }
  } catch (...) {
    for (StackUndo& record : undo) record.restore();
    throw;
  }
  head(x.data(), count, logits);
}

void SambaModel::forward(const std::int32_t* ids, std::int64_t batch, std::int64_t length,
                         std::vector<SambaLayerState>& states, float* logits, const std::string& what) const {
  run<false>(ids, batch, length, states, logits, what);
}

void SambaModel::forward_reference(const std::int32_t* ids, std::int64_t batch, std::int64_t length,
                                   std::vector<SambaLayerState>& states, float* logits,
                                   const std::string& what) const {
  run<true>(ids, batch, length, states, logits, what);
}

}  // namespace samebits::models
