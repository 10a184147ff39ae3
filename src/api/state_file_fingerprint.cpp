// Model fingerprints (docs/formats.md §9.3): SHA-256 over a model's kind, configuration, weight format and
// every weight's name, shape and bits, computed once per loaded model and cached while it lives.
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <samebits/state_file.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/api_access.hpp"
#include "api/state_file_format.hpp"
#include "io/sha256.hpp"

namespace samebits {
namespace {

// Length-prefixed fields, so that no two different field sequences hash the same bytes.
class Digest {
 public:
  void text(const std::string& value) {
    integer(static_cast<std::int64_t>(value.size()));
    hash_.update(value);
  }
  void integer(std::int64_t value) { hash_.update(&value, sizeof value); }
  void real(double value) { hash_.update(&value, sizeof value); }
  void floats(const std::vector<float>& values) {
    integer(static_cast<std::int64_t>(values.size()));
    hash_.update(values.data(), values.size() * sizeof(float));
  }
  void shape(const std::vector<std::int64_t>& extents) {
    integer(static_cast<std::int64_t>(extents.size()));
    for (std::int64_t e : extents) integer(e);
  }
  template <typename Model>
  void weights(const Model& model) {
    const std::vector<TensorInfo> table = model.weight_table();
    for (std::size_t i = 0; i < table.size(); ++i) {
      text(table[i].name);
      shape(table[i].shape);
      floats(model.weight(i));
    }
  }
  std::string hex() { return io::digest_hex(hash_.finish()); }

 private:
  io::Sha256 hash_;
};

// The cache: one entry per live model object (keyed by the identity of the shared engine object behind it,
// so copies of a handle share it and a freed model's entry can never answer for a new one).
std::string cached(const std::shared_ptr<const void>& identity, const std::function<void(Digest&)>& compute) {
  static std::mutex mutex;
  static std::vector<std::pair<std::weak_ptr<const void>, std::string>> entries;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    std::erase_if(entries, [](const auto& entry) { return entry.first.expired(); });
    for (const auto& entry : entries)
      if (!entry.first.owner_before(identity) && !identity.owner_before(entry.first)) return entry.second;
  }
  Digest digest;
  compute(digest);
  std::string hex = digest.hex();
  const std::lock_guard<std::mutex> lock(mutex);
  entries.emplace_back(identity, hex);
  return hex;
}

void transformer_options(Digest& d, const TransformerBlockInference& model) {
  const blocks::BlockOptions& o = ApiAccess::block(model)->options();
  for (std::int64_t v : {model.d_model(), model.n_heads(), model.n_kv_heads(), model.head_dim(),
                         model.intermediate(), model.window()})
    d.integer(v);
  d.real(o.rope_theta);
  d.integer(static_cast<std::int64_t>(o.rope_scaling.kind));
  d.real(o.rope_scaling.factor);
  d.real(o.rope_scaling.low_freq_factor);
  d.real(o.rope_scaling.high_freq_factor);
  d.integer(o.rope_scaling.original);
  for (std::int64_t v : {o.rope_dim, o.max_positions, std::int64_t{o.qkv_bias}, std::int64_t{o.o_bias},
                         static_cast<std::int64_t>(o.norm), std::int64_t{o.norm_bias},
                         static_cast<std::int64_t>(o.mlp), std::int64_t{o.mlp_bias}, std::int64_t{o.qk_norm}})
    d.integer(v);
  d.real(o.norm_eps);
  d.real(o.attn_softcap);
}

// A block: its widths, its options, its weights.
template <typename Block>
void describe(Digest& d, const Block& model) {
  d.integer(model.d_model());
  if constexpr (std::is_same_v<Block, TransformerBlockInference>) transformer_options(d, model);
  if constexpr (std::is_same_v<Block, Mamba1BlockInference>) d.integer(model.d_inner());
  if constexpr (std::is_same_v<Block, Mamba2BlockInference>) d.real(model.dt_limit().first);
  if constexpr (std::is_same_v<Block, Mamba2BlockInference>) d.real(model.dt_limit().second);
  d.weights(model);
}

void describe(Digest& d, const SambaInference& model) {
  const SambaConfig& c = model.config();
  d.integer(c.vocab());
  d.integer(c.d_model());
  for (const std::string& layer : c.layers()) d.text(layer);
  for (const std::optional<std::int64_t>& v : {c.n_heads(), c.n_kv_heads(), c.head_dim(), c.intermediate()})
    d.integer(v.value_or(-1));
  d.integer(c.tie_embeddings() ? 1 : 0);
  d.real(c.norm_eps());
  for (const SambaTensorEntry& entry : c.registry()) {
    d.text(entry.name);
    d.shape(entry.shape);
    d.floats(model.parameter(entry.name));
  }
}

void describe(Digest& d, const CausalLM& model) {
  for (const std::string* s : {&model.model_type(), &model.kind(), &model.loader()}) d.text(*s);
  for (std::int64_t v : {model.d_model(), model.vocab_size(), model.n_layers(),
                         std::int64_t{model.tie_embeddings()}, model.max_positions().value_or(-1)})
    d.integer(v);
  d.real(model.norm_eps());
  for (std::int64_t i = 0; i < model.n_layers(); ++i)
    if (const TransformerBlockInference* block = model.transformer_block(i)) transformer_options(d, *block);
  for (const NamedTensorCopy& tensor : model.parameters()) {
    d.text(tensor.name);
    d.shape(tensor.shape);
    d.floats(tensor.values);
  }
}

// The engine object a model shares with its copies (its identity in the cache).
template <typename Model>
std::shared_ptr<const void> identity(const Model& model) {
  if constexpr (requires { ApiAccess::block(model); })
    return ApiAccess::block(model);
  else
    return ApiAccess::shared_model(model);
}

}  // namespace

template <typename Model>
std::string model_fingerprint(const Model& model) {
  return cached(identity(model), [&](Digest& d) {
    d.integer(static_cast<std::int64_t>(state_file_detail::IndexIn<Model, SavedStateModels>::value));
    d.text(model.weight_format());
    describe(d, model);
  });
}

#define SAMEBITS_MODEL_FINGERPRINT(Model) template std::string model_fingerprint<Model>(const Model&);
SAMEBITS_FOR_EACH_SAVED_STATE_MODEL(SAMEBITS_MODEL_FINGERPRINT)
#undef SAMEBITS_MODEL_FINGERPRINT

}  // namespace samebits
