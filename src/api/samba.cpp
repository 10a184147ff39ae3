// SambaInference and SambaState: weight and call validation with upstream wording, then the Samba stack.
#include "models/samba.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <samebits/samba.hpp>
#include <set>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "api/transformer_state.hpp"
#include "io/samba_checkpoint.hpp"
#include "numerics/fp.hpp"

namespace samebits {
namespace {

const std::string kClass = "samebits.SambaInference";

std::string what_of(const char* method) { return std::string("samebits SambaInference.") + method; }

}  // namespace

// ---------------------------------------------------------------------------------------- state

void SambaState::add_mamba3(Mamba3State state) {
  layers_.push_back({std::make_unique<Mamba3State>(std::move(state)), nullptr});
}

void SambaState::add_attention(TransformerState state) {
  layers_.push_back({nullptr, std::make_unique<TransformerState>(std::move(state))});
}

SambaState SambaState::clone() const {
  SambaState copy(batch_size_, max_tokens_);
  for (const Layer& layer : layers_) {
    if (layer.mamba3)
      copy.add_mamba3(layer.mamba3->clone());
    else
      copy.add_attention(layer.attention->clone());
  }
  return copy;
}

// ---------------------------------------------------------------------------------------- model

SambaInference::SambaInference(const SambaConfig& config, std::vector<float> parameters,
                               std::string weight_format)
    : config_(config), weight_format_(std::move(weight_format)) {
  model_ = std::make_shared<const models::SambaModel>(ApiAccess::engine(config), std::move(parameters));
}

SambaInference::SambaInference(const SambaConfig& config, std::vector<std::vector<float>> tensors,
                               std::string weight_format)
    : config_(config), weight_format_(std::move(weight_format)) {
  model_ = std::make_shared<const models::SambaModel>(ApiAccess::engine(config), std::move(tensors));
}

namespace {
std::vector<std::vector<float>> tensor_parameters(const SambaConfig& public_config,
                                                  const SambaInference::NamedWeights& weights) {
  const models::SambaRegistry registry = ApiAccess::engine(public_config).registry();
  std::vector<std::string> missing, unknown;
  std::set<std::string> given;
  for (const auto& [name, view] : weights) {
    given.insert(name);
    if (registry.index_of(name) == models::SambaRegistry::npos) unknown.push_back(name);
  }
  for (const auto& entry : registry.entries)
    if (!given.count(entry.name)) missing.push_back(entry.name);
  if (!missing.empty() || !unknown.empty())
    throw_value_error(kClass + ": weight dict mismatch; missing " + python_name_list(missing) + ", unknown " +
                      python_name_list(unknown));
  std::vector<std::vector<float>> tensors;
  tensors.reserve(registry.entries.size());
  for (const auto& entry : registry.entries) {
    const auto it =
        std::find_if(weights.begin(), weights.end(), [&](const auto& w) { return w.first == entry.name; });
    const TensorView& view = it->second;
    // intermediate is not range-checked by the config (docs/formats.md §1.2), so an entry may want a negative
    // dimension; no array has one, so that entry can never be filled.
    const bool fillable = std::all_of(entry.shape.begin(), entry.shape.end(), [](auto d) { return d >= 0; });
    if (view.shape != entry.shape || !fillable)
      throw_value_error(kClass + ": " + entry.name + " has shape " + shape_repr(view.shape) + ", want " +
                        shape_repr(entry.shape));
    for (std::int64_t i = 0; i < entry.size; ++i)
      if (!fp::is_finite(view.data[i])) throw_value_error(kClass + ": " + entry.name + " is not finite");
    tensors.emplace_back(view.data, view.data + entry.size);
  }
  return tensors;
}
}  // namespace

SambaInference::SambaInference(const SambaConfig& config, const NamedWeights& weights,
                               std::string weight_format)
    : SambaInference(config, tensor_parameters(config, weights), std::move(weight_format)) {}

SambaInference SambaInference::from_checkpoint(const std::string& path) {
  io::SambaCheckpointTensors checkpoint = io::read_samba_checkpoint_tensors(path);
  return SambaInference(SambaConfig(checkpoint.config), std::move(checkpoint.tensors));
}

std::string SambaInference::repr() const {
  return "SambaInference(layers=" + python_name_list(config().layers()) +
         ", d_model=" + std::to_string(config().d_model()) + ", vocab=" + std::to_string(config().vocab()) +
         ")";
}

SambaState SambaInference::allocate_state(std::int64_t batch_size, std::int64_t max_tokens) const {
  if (batch_size < 1 || max_tokens < 1)
    throw_value_error(kClass + ".allocate_state: batch_size and max_tokens must be positive");
  SambaState state(batch_size, max_tokens);
  for (std::int64_t i = 0; i < model_->layer_count(); ++i) {
    if (model_->layer_kind(i) == models::SambaLayerKind::Mamba3) {
      state.add_mamba3(ApiAccess::wrap(model_->mamba3(i).allocate_state(batch_size)));
    } else {
      const auto& dims = model_->attention(i).dims();
      state.add_attention(TransformerState(batch_size, dims.n_kv_heads, dims.head_dim, max_tokens, 0));
    }
  }
  return state;
}

void SambaInference::check_ids(const IdsView& ids, const std::string& what) const {
  if (ids.batch < 1 || ids.length < 1) throw_value_error(what + ": B and L must be positive");
  if (ids.data == nullptr) throw_value_error(what + ": inputs has no data");
  const std::int64_t vocab = config().vocab();
  for (std::int64_t i = 0; i < ids.batch * ids.length; ++i)
    if (ids.data[i] < 0 || ids.data[i] >= vocab) throw_value_error(what + ": inputs must be in [0, vocab)");
}

void SambaInference::check_state(const SambaState& state, std::int64_t batch, const std::string& what) const {
  if (state.batch_size() != batch || state.layer_count() != model_->layer_count())
    throw_value_error(what + ": the state holds " + std::to_string(state.batch_size()) + " rows and " +
                      std::to_string(state.layer_count()) +
                      " layers, the call has B = " + std::to_string(batch) + " and the stack " +
                      std::to_string(model_->layer_count()) + " layers");
  for (std::int64_t i = 0; i < model_->layer_count(); ++i) {
    const bool mamba = model_->layer_kind(i) == models::SambaLayerKind::Mamba3;
    if (mamba ? state.mamba3(i) == nullptr : state.attention(i) == nullptr)
      throw_value_error(what + ": layer " + std::to_string(i) + " of the state is not a " +
                        (mamba ? "Mamba3State" : "TransformerState"));
    // The block sizes its cache reads and writes by its own dims: a cache of other dims is refused here.
    const TransformerState* cache = state.attention(i);
    if (!mamba && (cache->n_kv_heads() != model_->attention(i).dims().n_kv_heads ||
                   cache->head_dim() != model_->attention(i).dims().head_dim || cache->window() != 0))
      throw_value_error(what + ": layer " + std::to_string(i) +
                        " of the state does not match the stack (allocate_state makes a matching one)");
  }
}

namespace {
// Whether a call of `ids` may run on the borrowed layers: count, kinds, batch and KV capacity.
void check_borrowed(const models::SambaModel& model, const IdsView& ids,
                    const std::vector<models::SambaLayerState>& layers, const std::string& what) {
  if (static_cast<std::int64_t>(layers.size()) != model.layer_count())
    throw_value_error(what + ": the state has " + std::to_string(layers.size()) + " layers, the stack " +
                      std::to_string(model.layer_count()));
  // Every layer must be able to take this call before any layer moves.
  for (std::int64_t i = 0; i < model.layer_count(); ++i) {
    const models::SambaLayerState& layer = layers[static_cast<std::size_t>(i)];
    const bool mamba = model.layer_kind(i) == models::SambaLayerKind::Mamba3;
    if (mamba ? layer.mamba3 == nullptr : layer.kv == nullptr)
      throw_value_error(what + ": layer " + std::to_string(i) + " of the state is not a " +
                        (mamba ? "Mamba3State" : "TransformerState"));
    if (mamba ? layer.mamba3->batch() != ids.batch : layer.kv->batch != ids.batch)
      throw_value_error(what + ": layer " + std::to_string(i) + " of the state holds " +
                        std::to_string(mamba ? layer.mamba3->batch() : layer.kv->batch) +
                        " rows, the call has B = " + std::to_string(ids.batch));
    // cached_tokens + L > max_tokens; a corrupt cached_tokens may be anything, so the sum is checked for
    // overflow (a sum past INT64_MAX is past every capacity).
    if (!mamba) {
      std::int64_t slots = 0;
      const bool wrapped = __builtin_add_overflow(layer.kv->cached_tokens, ids.length, &slots);
      if (wrapped || slots > layer.kv->max_tokens)
        throw_value_error(what + ": this call would use " +
                          (wrapped ? "more than " + std::to_string(std::numeric_limits<std::int64_t>::max())
                                   : std::to_string(slots)) +
                          " KV slots and the cache holds " + std::to_string(layer.kv->max_tokens) +
                          " (allocate_state(B, max_tokens) with a larger max_tokens)");
    }
  }
}

// run_layers on the blocks' raw caches, as its states' engine access hands them out.
std::vector<float> run_borrowed(const SambaInference& self, const models::SambaModel& model,
                                const IdsView& ids, std::vector<models::SambaLayerState>& layers,
                                const std::string& what, bool reference) {
  self.check_ids(ids, what);
  check_borrowed(model, ids, layers, what);
  std::vector<float> logits(static_cast<std::size_t>(ids.batch * ids.length * self.config().vocab()));
  if (reference)
    model.forward_reference(ids.data, ids.batch, ids.length, layers, logits.data(), what);
  else
    model.forward(ids.data, ids.batch, ids.length, layers, logits.data(), what);
  return logits;
}
}  // namespace

namespace {
// Each attention layer of `refs` through its state's engine access (which commits the cache when the call
// returns), and the borrowed engine states the model reads.
void borrow(const std::vector<SambaLayerRef>& refs, bool reference,
            std::vector<std::optional<KvCacheState::EngineAccess>>& access,
            std::vector<models::SambaLayerState>& borrowed) {
  access = std::vector<std::optional<KvCacheState::EngineAccess>>(refs.size());
  borrowed.assign(refs.size(), {});
  for (std::size_t i = 0; i < refs.size(); ++i) {
    if (refs[i].mamba3 != nullptr) borrowed[i].mamba3 = &ApiAccess::engine(*refs[i].mamba3);
    if (refs[i].attention != nullptr)
      borrowed[i].kv = &access[i].emplace(ApiAccess::engine(*refs[i].attention), reference).cache();
  }
}
}  // namespace

std::vector<float> SambaInference::step_many_layers(
    const std::vector<std::int32_t>& ids, const std::vector<std::vector<SambaLayerRef>>& sequences) const {
  const std::string what = what_of("step_many");
  const auto count = static_cast<std::int64_t>(ids.size());
  if (count < 1 || sequences.size() != ids.size())
    throw_value_error(what + ": give one id per state and at least one, got " + std::to_string(ids.size()) +
                      " ids and " + std::to_string(sequences.size()) + " states");
  check_ids({ids.data(), count, 1}, what);
  std::vector<std::vector<std::optional<KvCacheState::EngineAccess>>> access(sequences.size());
  std::vector<std::vector<models::SambaLayerState>> borrowed(sequences.size());
  for (std::size_t s = 0; s < sequences.size(); ++s) {
    borrow(sequences[s], false, access[s], borrowed[s]);
    check_borrowed(*model_, {ids.data() + s, 1, 1}, borrowed[s], what);
  }
  // A layer state (or a borrowed cache's buffer) listed twice would take two tokens at one position.
  std::set<const void*> seen;
  for (std::size_t s = 0; s < borrowed.size(); ++s)
    for (const models::SambaLayerState& layer : borrowed[s]) {
      const void* held = layer.mamba3 != nullptr ? static_cast<const void*>(layer.mamba3)
                                                 : static_cast<const void*>(layer.kv->k);
      if (!seen.insert(held).second)
        throw_value_error(what + ": state " + std::to_string(s) +
                          " shares a layer state with an earlier one; each sequence needs its own state");
    }
  std::vector<float> logits(static_cast<std::size_t>(count * config().vocab()));
  model_->step_many(ids.data(), count, borrowed, logits.data(), what);
  return logits;
}

std::vector<float> SambaInference::step_many(const std::vector<std::int32_t>& ids,
                                             const std::vector<SambaState*>& states) const {
  const std::string what = what_of("step_many");
  std::vector<std::vector<SambaLayerRef>> sequences;
  for (SambaState* state : states) {
    if (state == nullptr) throw_value_error(what + ": a state is missing");
    check_state(*state, 1, what);
    std::vector<SambaLayerRef>& layers =
        sequences.emplace_back(static_cast<std::size_t>(model_->layer_count()));
    for (std::size_t i = 0; i < layers.size(); ++i)
      layers[i] = {state->mamba3(static_cast<std::int64_t>(i)),
                   state->attention(static_cast<std::int64_t>(i))};
  }
  return step_many_layers(ids, sequences);
}

std::vector<float> SambaInference::run_layers(const IdsView& ids, const std::vector<SambaLayerRef>& layers,
                                              const std::string& what, bool reference) const {
  std::vector<std::optional<KvCacheState::EngineAccess>> access;
  std::vector<models::SambaLayerState> borrowed;
  borrow(layers, reference, access, borrowed);
  return run_borrowed(*this, *model_, ids, borrowed, what, reference);
}

std::vector<float> SambaInference::run(const IdsView& ids, SambaState* state, const std::string& what,
                                       bool reference) const {
  check_ids(ids, what);
  SambaState fresh(0, 0);
  if (state == nullptr) {
    fresh = allocate_state(ids.batch, ids.length);
    state = &fresh;
  } else {
    check_state(*state, ids.batch, what);
  }
  std::vector<SambaLayerRef> layers(static_cast<std::size_t>(model_->layer_count()));
  for (std::size_t i = 0; i < layers.size(); ++i)
    layers[i] = {state->mamba3(static_cast<std::int64_t>(i)), state->attention(static_cast<std::int64_t>(i))};
  return run_layers(ids, layers, what, reference);
}

std::vector<float> SambaInference::forward(const IdsView& ids) const {
  return run(ids, nullptr, what_of("forward"), false);
}

std::vector<float> SambaInference::forward(const IdsView& ids, SambaState& state) const {
  return run(ids, &state, what_of("forward"), false);
}

std::vector<float> SambaInference::step(const IdsView& ids, SambaState& state) const {
  if (ids.length != 1) throw_value_error(kClass + ".step: inputs must be (B,) or (B, 1) integer ids");
  return run(ids, &state, what_of("step"), false);
}

std::vector<float> SambaInference::forward_ragged(const IdsView& ids,
                                                  const std::vector<std::int64_t>& lengths) const {
  const std::string what = what_of("forward");
  if (ids.batch < 1 || ids.length < 1) throw_value_error(what + ": B and L must be positive");
  check_ragged_lengths(lengths, ids.batch, ids.length, what);
  // Padding ids (any value) become id 0 and padding logits +0.0.
  return ragged_run(ids.data, ids.batch, ids.length, 1, lengths, config().vocab(),
                    [&](const std::int32_t* padded) {
                      return forward({padded, ids.batch, ids.length});
                    });
}

std::vector<float> SambaInference::forward_reference(const IdsView& ids) const {
  return run(ids, nullptr, what_of("forward"), true);
}

std::vector<float> SambaInference::forward_reference(const IdsView& ids, SambaState& state) const {
  return run(ids, &state, what_of("forward"), true);
}

std::vector<float> SambaInference::parameter(const std::string& name) const {
  const models::SambaRegistry& registry = model_->registry();
  const std::size_t index = registry.index_of(name);
  if (index == models::SambaRegistry::npos) throw_value_error(kClass + ": no tensor " + name);
  return model_->tensor_copy(index);
}

}  // namespace samebits
