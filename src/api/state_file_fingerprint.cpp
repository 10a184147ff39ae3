// Model fingerprints (docs/formats.md §9.3): SHA-256 over a model's kind, configuration, weight format and
// every tensor it computes with (name, shape and the digest of its exact float32 bits), computed once per
// loaded model and cached while it lives.
#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <samebits/state_file.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/api_access.hpp"
#include "api/state_file_format.hpp"
#include "blocks/transformer/options.hpp"
#include "core/thread_pool.hpp"
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
  // A tensor's values enter by their count and the digest of their float32 bytes (values_digest).
  void floats(const std::vector<float>& values) {
    integer(static_cast<std::int64_t>(values.size()));
    const io::Sha256Digest digest = values_digest(values);
    hash_.update(digest.data(), digest.size());
  }
  void tensor(const std::string& name, const std::vector<std::int64_t>& extents,
              const std::vector<float>& values) {
    text(name);
    shape(extents);
    floats(values);
  }
  void shape(const std::vector<std::int64_t>& extents) {
    integer(static_cast<std::int64_t>(extents.size()));
    for (std::int64_t e : extents) integer(e);
  }
  template <typename Model>
  void weights(const Model& model) {
    const std::vector<TensorInfo> table = model.weight_table();
    for (std::size_t i = 0; i < table.size(); ++i) tensor(table[i].name, table[i].shape, model.weight(i));
  }
  std::string hex() { return io::digest_hex(hash_.finish()); }

 private:
  // SHA-256 over the SHA-256 of each kChunkFloats-value chunk in order: the chunks hash on the engine's
  // threads (a large model's one pass is the cost of a save or load), and the digest is the same at any
  // thread count because the chunking depends on the length alone.
  static io::Sha256Digest values_digest(const std::vector<float>& values) {
    constexpr std::size_t kChunkFloats = std::size_t{1} << 18;  // 1 MiB
    const std::size_t chunks = (values.size() + kChunkFloats - 1) / kChunkFloats;
    std::vector<io::Sha256Digest> parts(chunks);
    parallel_for(static_cast<std::int64_t>(chunks), [&](std::int64_t begin, std::int64_t end) {
      for (auto c = static_cast<std::size_t>(begin); c < static_cast<std::size_t>(end); ++c) {
        const std::size_t first = c * kChunkFloats;
        parts[c] =
            io::sha256(values.data() + first, std::min(kChunkFloats, values.size() - first) * sizeof(float));
      }
    });
    return io::sha256(parts.data(), parts.size() * sizeof(io::Sha256Digest));
  }

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

// Every tensor a transformer block computes with, rebuilt bit for bit from what it holds (one copy of the
// layer): the nine base weights in weight-table order, then each optional tensor of docs/models.md §2 by
// name (empty when its option is off), so two blocks that differ only in a bias or a q/k norm differ here.
void transformer_tensors(Digest& d, const TransformerBlockInference& model) {
  const blocks::TransformerWeights w = ApiAccess::block(model)->weights();
  const std::vector<TensorInfo> table = model.weight_table();
  const std::vector<float>* base[] = {&w.input_norm, &w.post_norm, &w.q,  &w.k,   &w.v,
                                      &w.o,          &w.gate,      &w.up, &w.down};
  static_assert(std::size(base) == 9, "the nine tensors of transformer_tensor_table, in its order");
  for (std::size_t i = 0; i < table.size(); ++i) d.tensor(table[i].name, table[i].shape, *base[i]);
  const std::vector<std::string>& optional = blocks::optional_tensor_names();
  for (std::size_t i = 0; i < optional.size(); ++i) {
    const std::vector<float>& values = w.optional(i);
    d.tensor(optional[i], {static_cast<std::int64_t>(values.size())}, values);
  }
}

// A block: its widths, its options, every tensor it computes with.
template <typename Block>
void describe(Digest& d, const Block& model) {
  d.integer(model.d_model());
  if constexpr (std::is_same_v<Block, TransformerBlockInference>) {
    transformer_options(d, model);
    transformer_tensors(d, model);
    return;
  }
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

// A CausalLM: its plan, its embedding, final norm and untied head, then each layer as the block it is
// (options and every tensor, one layer copied at a time).
void describe(Digest& d, const CausalLM& model) {
  for (const std::string* s : {&model.model_type(), &model.kind(), &model.loader()}) d.text(*s);
  for (std::int64_t v : {model.d_model(), model.vocab_size(), model.n_layers(),
                         std::int64_t{model.tie_embeddings()}, model.max_positions().value_or(-1)})
    d.integer(v);
  d.real(model.norm_eps());
  for (const NamedTensorCopy& end : ApiAccess::end_tensors(model)) d.tensor(end.name, end.shape, end.values);
  for (std::int64_t i = 0; i < model.n_layers(); ++i) {
    if (const TransformerBlockInference* block = model.transformer_block(i)) describe(d, *block);
    if (const Mamba1BlockInference* block = model.mamba1_block(i)) describe(d, *block);
    if (const Mamba2BlockInference* block = model.mamba2_block(i)) describe(d, *block);
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
