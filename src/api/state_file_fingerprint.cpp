// Model fingerprints (docs/formats.md §9.3): SHA-256 over a model's kind, configuration, weight format and
// every weight's name, shape and bits, computed once per loaded model and cached while it lives.
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <samebits/state_file.hpp>
#include <string>
#include <utility>
#include <vector>

#include "api/api_access.hpp"
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

}  // namespace

std::string model_fingerprint(const TransformerBlockInference& model) {
  return cached(ApiAccess::block(model), [&](Digest& d) {
    d.text("samebits.TransformerBlockInference");
    d.text(model.weight_format());
    transformer_options(d, model);
    d.weights(model);
  });
}

std::string model_fingerprint(const Mamba1BlockInference& model) {
  return cached(ApiAccess::block(model), [&](Digest& d) {
    d.text("samebits.Mamba1BlockInference");
    d.text(model.weight_format());
    d.integer(model.d_model());
    d.integer(model.d_inner());
    d.weights(model);
  });
}

std::string model_fingerprint(const Mamba2BlockInference& model) {
  return cached(ApiAccess::block(model), [&](Digest& d) {
    d.text("samebits.Mamba2BlockInference");
    d.text(model.weight_format());
    d.integer(model.d_model());
    d.real(model.dt_limit().first);
    d.real(model.dt_limit().second);
    d.weights(model);
  });
}

std::string model_fingerprint(const Mamba3BlockInference& model) {
  return cached(ApiAccess::block(model), [&](Digest& d) {
    d.text("samebits.Mamba3BlockInference");
    d.text(model.weight_format());
    d.integer(model.d_model());
    d.weights(model);
  });
}

std::string model_fingerprint(const SambaInference& model) {
  return cached(ApiAccess::shared_model(model), [&](Digest& d) {
    const SambaConfig& c = model.config();
    d.text("samebits.SambaInference");
    d.text(model.weight_format());
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
  });
}

std::string model_fingerprint(const CausalLM& model) {
  return cached(ApiAccess::shared_model(model), [&](Digest& d) {
    d.text("samebits.CausalLM");
    for (const std::string* s : {&model.model_type(), &model.kind(), &model.weight_format(), &model.loader()})
      d.text(*s);
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
  });
}

}  // namespace samebits
