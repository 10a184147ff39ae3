// Samba stack forward: one code path for the stateless forward, the carried forward and the step.
#include "models/samba.hpp"

#include <utility>

#include "core/errors.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::models {
namespace {

std::vector<float> slice(const std::vector<float>& flat, const SambaRegistryEntry& entry) {
  return std::vector<float>(flat.begin() + entry.offset, flat.begin() + entry.offset + entry.size);
}

}  // namespace

const float* SambaModel::tensor(const std::string& name) const {
  const std::size_t index = registry_.index_of(name);
  if (index == SambaRegistry::npos) throw_runtime_error("SambaModel: no tensor named " + name);
  return parameters_.data() + registry_.entries[index].offset;
}

SambaModel::SambaModel(SambaConfig config, std::vector<float> parameters)
    : config_(std::move(config)), registry_(config_.registry()), parameters_(std::move(parameters)) {
  if (static_cast<std::int64_t>(parameters_.size()) != registry_.total)
    throw_value_error("samebits.SambaInference: the parameter vector holds " +
                      std::to_string(parameters_.size()) + " floats, the registry " +
                      std::to_string(registry_.total));
  std::size_t entry = 1;  // registry order: embed.weight, then each layer's nine tensors
  for (SambaLayerKind kind : config_.layer_kinds()) {
    if (kind == SambaLayerKind::Mamba3) {
      blocks::Mamba3Weights weights;
      for (auto& tensor : weights.tensors) tensor = slice(parameters_, registry_.entries[entry++]);
      layers_.push_back({std::make_unique<blocks::Mamba3Block>(std::move(weights)), nullptr});
    } else {
      blocks::TransformerDims dims;
      dims.d_model = config_.d_model();
      dims.n_heads = *config_.n_heads();
      dims.n_kv_heads = *config_.n_kv_heads();
      dims.head_dim = *config_.head_dim();
      dims.intermediate = *config_.intermediate();
      dims.window = 0;  // a Samba stack's attention is always full causal (formats.md 1.4)
      blocks::TransformerWeights w;
      for (std::vector<float>* t :
           {&w.input_norm, &w.post_norm, &w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down})
        *t = slice(parameters_, registry_.entries[entry++]);
      layers_.push_back({nullptr, std::make_unique<blocks::TransformerBlock>(dims, std::move(w),
                                                                             "samebits.SambaInference")});
    }
  }
  const float* head = tensor(config_.tie_embeddings() ? "embed.weight" : "lm_head.weight");
  head_ = gemm::PackedRhs::from_transposed(head, config_.vocab(), config_.d_model());
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
  if (static_cast<std::int64_t>(states.size()) != layer_count())
    throw_value_error(what + ": the state has " + std::to_string(states.size()) +
                      " layers but the stack has " + std::to_string(layer_count()));
  const std::int64_t d = config_.d_model();
  const std::int64_t rows = batch * length;
  std::vector<float> x(static_cast<std::size_t>(rows * d));  // [B, L, d_model]
  std::vector<float> y(x.size());                            // [B, L, d_model]
  const float* embed = tensor("embed.weight");
  if constexpr (Reference)
    norm::embedding_reference(embed, d, ids, rows, x.data());
  else
    norm::embedding(embed, d, ids, rows, x.data());
  for (std::int64_t i = 0; i < layer_count(); ++i) {
    SambaLayerState& state = states[static_cast<std::size_t>(i)];
    const Layer& layer = layers_[static_cast<std::size_t>(i)];
    if (const blocks::Mamba3Block* block = layer.mamba3.get()) {
      if (state.mamba3 == nullptr)
        throw_value_error(what + ": layer " + std::to_string(i) + " needs a Mamba3State");
      if constexpr (Reference)
        block->forward_reference(x.data(), batch, length, *state.mamba3, y.data(), nullptr, what.c_str());
      else
        block->forward(x.data(), batch, length, *state.mamba3, y.data(), nullptr, what.c_str());
    } else {
      const blocks::TransformerBlock& attention = *layer.attention;
      if (state.kv == nullptr)
        throw_value_error(what + ": layer " + std::to_string(i) + " needs a TransformerState");
      if constexpr (Reference)
        attention.forward_reference(x.data(), batch, length, *state.kv, y.data(), what);
      else
        attention.forward(x.data(), batch, length, *state.kv, y.data(), what);
    }
    std::swap(x, y);
  }
  const float* norm_f = tensor("norm_f.weight");
  if constexpr (Reference) {
    norm::rmsnorm_reference(x.data(), norm_f, x.data(), rows, d, config_.norm_eps_f32());
    const float* head = tensor(config_.tie_embeddings() ? "embed.weight" : "lm_head.weight");
    gemm::gemm_reference(gemm::Orientation::NT, x.data(), head, logits, rows, config_.vocab(), d);
  } else {
    norm::rmsnorm(x.data(), norm_f, x.data(), rows, d, config_.norm_eps_f32());
    gemm::gemm_packed({x.data(), d, 1}, rows, head_, logits);
  }
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
