// CausalLM: a Hugging Face checkpoint directory or a GGUF file (docs/gguf.md §10) loaded through its plan
// (docs/models.md §15-§16), the stack of block handles between the ends (docs/models.md §17), its state
// (§18) and greedy generate (§19).
#include "models/causal_lm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <samebits/causal_lm.hpp>
#include <samebits/errors.hpp>
#include <samebits/file_kind.hpp>
#include <samebits/lowbit.hpp>
#include <set>
#include <variant>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "api/gguf_packed.hpp"
#include "api/transformer_many.hpp"
#include "core/scratch.hpp"
#include "io/gguf_model.hpp"
#include "io/hf_config.hpp"
#include "io/safetensors.hpp"

namespace samebits {
namespace {

namespace fs = std::filesystem;

const std::string kLoad = "samebits.models.CausalLM.load";
const std::string kModel = "samebits.models.CausalLM";
const std::string kCall = "samebits CausalLM";
constexpr std::int64_t kCeiling = 8192;  // the transformer block's absolute-position ceiling

std::string squote(const std::string& text) { return "'" + text + "'"; }

std::string list_repr(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + squote(names[i]);
  return out + "]";
}

std::string dtype_name(io::SafetensorsDtype kind) {
  switch (kind) {
    case io::SafetensorsDtype::I32:
      return "I32";
    case io::SafetensorsDtype::I64:
      return "I64";
    default:
      return "?";
  }
}

bool all_finite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

using LayerBlock = std::variant<TransformerBlockInference, Mamba1BlockInference, Mamba2BlockInference>;
using LayerState = std::variant<TransformerState, Mamba1State, Mamba2State>;

// A projection key of a kind (docs/models.md §16.2): the tensors a weight format applies to.
bool is_projection(io::HFKind kind, const std::string& key) {
  static const std::set<std::string> transformer{"q_proj.weight",   "k_proj.weight",    "v_proj.weight",
                                                 "o_proj.weight",   "gate_proj.weight", "up_proj.weight",
                                                 "down_proj.weight"};
  static const std::set<std::string> mamba1{"in_proj.weight", "x_proj.weight", "dt_proj.weight",
                                            "out_proj.weight"};
  static const std::set<std::string> mamba2{"in_proj.weight", "out_proj.weight"};
  const std::set<std::string>& keys =
      kind == io::HFKind::Transformer ? transformer : (kind == io::HFKind::Mamba1 ? mamba1 : mamba2);
  return keys.count(key) != 0;
}

}  // namespace

// ------------------------------------------------------------------ the model

struct CausalLMModel {
  io::HFPlan plan;
  std::string kind_name;
  std::string weight_format;
  std::string loader_name;
  std::optional<std::int64_t> max_positions;
  std::vector<std::string> unused;
  std::vector<LayerBlock> blocks;
  std::unique_ptr<models::CausalLMEnds> ends;
  // Per layer: (block key, checkpoint name, row range) for parameters().
  std::vector<std::vector<io::HFTensorRef>> refs;
};

struct CausalLMState::Impl {
  const CausalLMModel* owner = nullptr;
  std::int64_t batch = 0;
  std::int64_t max_tokens = 0;
  std::int64_t positions = 0;
  std::vector<LayerState> layers;
};

CausalLMState::CausalLMState(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CausalLMState::CausalLMState(CausalLMState&&) noexcept = default;
CausalLMState& CausalLMState::operator=(CausalLMState&&) noexcept = default;
CausalLMState::~CausalLMState() = default;

CausalLMState CausalLMState::clone() const {
  auto copy = std::make_unique<Impl>();
  copy->owner = impl_->owner;
  copy->batch = impl_->batch;
  copy->max_tokens = impl_->max_tokens;
  copy->positions = impl_->positions;
  for (const LayerState& layer : impl_->layers)
    copy->layers.push_back(std::visit([](const auto& s) -> LayerState { return s.clone(); }, layer));
  return CausalLMState(std::move(copy));
}

std::int64_t CausalLMState::batch_size() const { return impl_->batch; }
std::int64_t CausalLMState::max_tokens() const { return impl_->max_tokens; }
std::int64_t CausalLMState::layers() const { return static_cast<std::int64_t>(impl_->layers.size()); }
std::int64_t CausalLMState::positions() const { return impl_->positions; }

namespace {
template <typename T, typename V>
const T* layer_as(const std::vector<V>& layers, std::int64_t i) {
  if (i < 0 || i >= static_cast<std::int64_t>(layers.size()))
    throw_value_error("samebits CausalLM: no layer " + std::to_string(i));
  return std::get_if<T>(&layers[static_cast<std::size_t>(i)]);
}
}  // namespace

const TransformerState* CausalLMState::transformer(std::int64_t i) const {
  return layer_as<TransformerState>(impl_->layers, i);
}
const Mamba1State* CausalLMState::mamba1(std::int64_t i) const {
  return layer_as<Mamba1State>(impl_->layers, i);
}
const Mamba2State* CausalLMState::mamba2(std::int64_t i) const {
  return layer_as<Mamba2State>(impl_->layers, i);
}
bool CausalLMState::belongs_to(const CausalLM& model) const { return impl_->owner == model.model_.get(); }
TransformerState* CausalLMState::transformer(std::int64_t i) {
  return const_cast<TransformerState*>(layer_as<TransformerState>(impl_->layers, i));
}
Mamba1State* CausalLMState::mamba1(std::int64_t i) {
  return const_cast<Mamba1State*>(layer_as<Mamba1State>(impl_->layers, i));
}
Mamba2State* CausalLMState::mamba2(std::int64_t i) {
  return const_cast<Mamba2State*>(layer_as<Mamba2State>(impl_->layers, i));
}
void CausalLMState::set_positions(std::int64_t positions) { impl_->positions = positions; }

// ------------------------------------------------------------------ loading

namespace {

// One checkpoint tensor as a source gives it: float32 values, shape, and whether they are BF16 storage.
struct SourceTensor {
  std::vector<float> values;
  std::vector<std::int64_t> shape;
  bool bf16_storage = false;
};

// What the loader reads: a safetensors directory or a GGUF file (docs/gguf.md §10), by checkpoint name.
struct Checkpoint {
  std::vector<std::string> names;
  std::function<bool(const std::string&)> contains;
  std::function<SourceTensor(const std::string&)> fetch;
};

// The float32 value of one planned tensor: read (widened), row-sliced, and through the weight format when
// it is a projection (docs/models.md §16.2).
std::vector<float> read_tensor(const Checkpoint& ckpt, const io::HFPlan& plan, const io::HFTensorRef& ref,
                               lowbit::WeightFormat format, std::vector<std::int64_t>& shape) {
  SourceTensor tensor = ckpt.fetch(ref.name);
  std::vector<float> values = std::move(tensor.values);
  shape = std::move(tensor.shape);
  if (ref.sliced()) {
    if (shape.size() != 2 || shape[0] < ref.row_end)
      throw_value_error("samebits.models: model_type " + squote(plan.model_type) + ": " + ref.name +
                        " has shape " + shape_repr(shape) + ", too small for the row slice [" +
                        std::to_string(ref.row_begin) + ", " + std::to_string(ref.row_end) +
                        ") that carries " + ref.key);
    const std::int64_t cols = shape[1];
    values = std::vector<float>(values.begin() + ref.row_begin * cols, values.begin() + ref.row_end * cols);
    shape = {ref.row_end - ref.row_begin, cols};
  }
  if (format == lowbit::WeightFormat::Float32 || !is_projection(plan.kind, ref.key) || shape.size() != 2)
    return values;
  // bfloat16 over BF16 storage (whole tensor): the checkpoint's own bits, whose widening is `values`.
  if (format == lowbit::WeightFormat::BFloat16 && tensor.bf16_storage && !ref.sliced()) return values;
  const lowbit::PackedMatrix packed = lowbit::pack_matrix(values.data(), static_cast<std::size_t>(shape[0]),
                                                          static_cast<std::size_t>(shape[1]), format);
  return lowbit::materialize(packed);
}

Checkpoint safetensors_checkpoint(const io::SafetensorsCheckpoint& ckpt) {
  Checkpoint out;
  out.names = ckpt.names();
  out.contains = [&ckpt](const std::string& name) { return ckpt.contains(name); };
  out.fetch = [&ckpt](const std::string& name) {
    const io::SafetensorsEntry& entry = ckpt.entry(name);
    if (entry.kind == io::SafetensorsDtype::I32 || entry.kind == io::SafetensorsDtype::I64)
      throw_type_error(kModel + ": tensor " + squote(name) + " is an integer tensor (" +
                       dtype_name(entry.kind) + "); a weight must be F32, F16 or BF16");
    return SourceTensor{ckpt.read_float32(name), entry.shape, entry.kind == io::SafetensorsDtype::BF16};
  };
  return out;
}

// A GGUF file's tensors are exact float32 values (docs/gguf.md §7), never BF16 storage for the loader: the
// bfloat16 format rounds them like any float32 weight.
Checkpoint gguf_checkpoint(const io::GgufModel& gguf) {
  Checkpoint out;
  out.names = gguf.names();
  out.contains = [&gguf](const std::string& name) { return gguf.contains(name); };
  out.fetch = [&gguf](const std::string& name) {
    SourceTensor t;
    t.values = gguf.read(name, t.shape);
    return t;
  };
  return out;
}

// A GGUF model at weight_format float32 keeps its matrices in the file's codes (docs/gguf.md §14) unless
// SAMEBITS_GGUF_MATERIALIZE is set to something other than 0: the materialized float32 model, the reference
// the packed one equals bit for bit.
bool keep_gguf_packed(lowbit::WeightFormat format) {
  const char* materialize = std::getenv("SAMEBITS_GGUF_MATERIALIZE");
  const bool forced = materialize != nullptr && *materialize != '\0' && std::string(materialize) != "0";
  return format == lowbit::WeightFormat::Float32 && !forced;
}

bool is_gguf_file(const std::string& path) {
  std::error_code error;
  return fs::is_regular_file(path, error) && detect_file_kind(path) == FileKind::Gguf;
}

TransformerOptions options_of(const io::HFPlan& plan, std::int64_t layer, std::int64_t max_positions) {
  const io::HFBlockOptions& b = plan.block;
  TransformerOptions o;
  o.n_heads = b.n_heads;
  o.n_kv_heads = b.n_kv_heads;
  o.head_dim = b.head_dim;
  o.window = plan.window_of(layer);
  o.rope_theta = static_cast<float>(b.rope_theta);
  o.rope_scaling = b.rope_scaling;
  if (!b.rope_scaling.empty()) o.rope_factor = static_cast<float>(b.rope_factor);
  if (b.rope_scaling == "llama3") {
    o.rope_low_freq_factor = static_cast<float>(b.rope_low_freq_factor);
    o.rope_high_freq_factor = static_cast<float>(b.rope_high_freq_factor);
    o.rope_original_max_position_embeddings = b.rope_original_max_position_embeddings;
  }
  if (b.rope_dim > 0) o.rope_dim = b.rope_dim;
  // Upstream never passes max_positions (the block keeps its 8192); samebits passes the model's ceiling.
  o.max_positions = plan.loader == io::HFLoader::Samebits ? max_positions : kCeiling;
  o.qkv_bias = b.qkv_bias;
  o.o_bias = b.o_bias;
  o.norm_eps = static_cast<float>(b.norm_eps);
  o.mlp_bias = b.mlp_bias;
  o.qk_norm = b.qk_norm;
  return o;
}

}  // namespace

CausalLM::CausalLM(std::shared_ptr<const CausalLMModel> model) : model_(std::move(model)) {}

CausalLM CausalLM::load(const std::string& path, const std::string& weight_format,
                        std::optional<std::int64_t> max_positions, const std::string& loader) {
  const std::optional<lowbit::WeightFormat> format = lowbit::format_from_name(weight_format);
  if (!format)
    throw_value_error(kLoad + ": weight_format must be one of ('float32', 'bfloat16', 'int8'), got " +
                      squote(weight_format));
  const io::HFLoader which = io::hf_loader_from_name(loader);
  auto model = std::make_shared<CausalLMModel>();
  std::optional<io::SafetensorsCheckpoint> safetensors;
  std::optional<io::GgufModel> gguf;
  Checkpoint ckpt;
  if (is_gguf_file(path)) {
    if (which != io::HFLoader::Samebits)
      throw_value_error(kLoad + ": loader " + squote(loader) + " reads config.json checkpoints; " + path +
                        " is a GGUF file (loader 'samebits' only)");
    gguf.emplace(path);
    model->plan = gguf->plan();
    ckpt = gguf_checkpoint(*gguf);
  } else {
    std::error_code error;
    if (!fs::is_directory(path, error)) throw_not_found(kLoad + ": " + path + " is not a directory");
    const json::Value config = io::read_hf_config(path);
    model->plan = io::plan_for(config, (fs::path(path) / "config.json").string(), which);
    safetensors.emplace(path);
    ckpt = safetensors_checkpoint(*safetensors);
  }
  io::HFPlan& plan = model->plan;
  model->weight_format = weight_format;
  model->loader_name = loader;
  model->kind_name = plan.kind == io::HFKind::Transformer
                         ? "transformer"
                         : (plan.kind == io::HFKind::Mamba1 ? "mamba1" : "mamba2");
  const std::string mt = "samebits.models: model_type " + squote(plan.model_type) + ": ";
  // Every planned name present (the first five missing named); the layer count is the config's, so the
  // names are counted and tested, never all listed.
  const std::vector<std::string>& names = ckpt.names;
  const std::int64_t planned = plan.planned_count();
  std::int64_t present = 0;
  for (const std::string& name : names)
    if (plan.is_planned(name))
      ++present;
    else
      model->unused.push_back(name);
  if (present != planned) {
    const std::vector<std::string> missing =
        plan.first_planned(5, [&](const std::string& name) { return !ckpt.contains(name); });
    throw_value_error(mt + "the checkpoint lacks " + std::to_string(planned - present) + " of the " +
                      std::to_string(planned) +
                      " tensors the plan names; first missing: " + list_repr(missing));
  }
  // Positions (docs/models.md §17.1).
  if (plan.kind == io::HFKind::Transformer) {
    const std::int64_t cap = std::min(plan.max_position_embeddings.value_or(kCeiling), kCeiling);
    if (max_positions && *max_positions < 1)
      throw_value_error(kModel + ": max_positions must be positive, got " + std::to_string(*max_positions));
    if (max_positions && *max_positions > kCeiling)
      throw_value_error(mt + "max_positions=" + std::to_string(*max_positions) +
                        " exceeds the transformer block's absolute-position ceiling 8192 (DEVIATION 812)");
    if (max_positions && plan.max_position_embeddings && *max_positions > *plan.max_position_embeddings)
      throw_value_error(
          mt + "max_positions=" + std::to_string(*max_positions) +
          " exceeds the config's max_position_embeddings=" + std::to_string(*plan.max_position_embeddings));
    model->max_positions = max_positions.value_or(cap);
  } else {
    if (max_positions && *max_positions < 1)
      throw_value_error(kModel + ": max_positions must be positive, got " + std::to_string(*max_positions));
    model->max_positions = max_positions;
  }
  // The ends: shapes, then finiteness.
  const io::HFTensorRef embed_ref{"embed", plan.embed_name};
  const bool packed = gguf && plan.kind == io::HFKind::Transformer && keep_gguf_packed(*format);
  // A packed model's head (the embedding when tied) in the file's codes; the shape of what it read.
  std::optional<gemm::PackedRhs> packed_head;
  auto read_packed = [&](const std::string& name, std::vector<std::int64_t>& shape_out) {
    packed_head = gguf_packed::matrix(*gguf, name);
    shape_out = {packed_head->n(), packed_head->k()};
  };
  std::vector<std::int64_t> shape;
  std::vector<float> embed;
  if (packed && plan.tie_embeddings)
    read_packed(plan.embed_name, shape);
  else
    embed = read_tensor(ckpt, plan, embed_ref, *format, shape);
  const std::vector<std::int64_t> table{plan.vocab_size, plan.d_model};
  if (shape != table)
    throw_value_error(mt + "vocab_size=" + std::to_string(plan.vocab_size) +
                      " and hidden_size=" + std::to_string(plan.d_model) + " but " + plan.embed_name +
                      " has shape " + shape_repr(shape));
  std::vector<float> norm = read_tensor(ckpt, plan, {"norm", plan.norm_name}, *format, shape);
  if (shape != std::vector<std::int64_t>{plan.d_model})
    throw_value_error(mt + "hidden_size=" + std::to_string(plan.d_model) + " but " + plan.norm_name +
                      " has shape " + shape_repr(shape));
  std::vector<float> head;
  if (!plan.tie_embeddings) {
    if (packed)
      read_packed(plan.head_name, shape);
    else
      head = read_tensor(ckpt, plan, {"head", plan.head_name}, *format, shape);
    if (shape != table)
      throw_value_error(mt + "vocab_size=" + std::to_string(plan.vocab_size) +
                        " and hidden_size=" + std::to_string(plan.d_model) + " but " + plan.head_name +
                        " has shape " + shape_repr(shape));
  }
  if (!all_finite(embed)) throw_value_error(kModel + ": " + plan.embed_name + " is not finite");
  if (!all_finite(norm)) throw_value_error(kModel + ": " + plan.norm_name + " is not finite");
  if (!all_finite(head)) throw_value_error(kModel + ": " + plan.head_name + " is not finite");
  const float norm_eps = static_cast<float>(plan.norm_eps);
  if (packed_head)
    model->ends = std::make_unique<models::CausalLMEnds>(plan.vocab_size, plan.d_model, std::move(embed),
                                                         std::move(norm), std::move(*packed_head), norm_eps);
  else
    model->ends = std::make_unique<models::CausalLMEnds>(plan.vocab_size, plan.d_model, std::move(embed),
                                                         std::move(norm), std::move(head), norm_eps);
  // The blocks, in checkpoint order, built once.
  for (std::int64_t i = 0; i < plan.n_layers; ++i) {
    std::vector<io::HFTensorRef> refs = plan.layer_weights(i);
    std::vector<std::vector<float>> values;
    std::vector<std::vector<std::int64_t>> shapes;
    values.reserve(refs.size());
    std::vector<std::string> keys;
    for (const io::HFTensorRef& ref : refs) {
      if (packed && gguf_packed::is_projection_key(ref.key)) continue;  // read from the file's codes below
      values.push_back(read_tensor(ckpt, plan, ref, *format, shape));
      shapes.push_back(shape);
      keys.push_back(ref.key);
    }
    NamedTensors named;
    for (std::size_t k = 0; k < keys.size(); ++k) named.push_back({keys[k], {values[k].data(), shapes[k]}});
    const TransformerOptions options = plan.kind == io::HFKind::Transformer
                                           ? options_of(plan, i, model->max_positions.value_or(kCeiling))
                                           : TransformerOptions{};
    if (packed)
      model->blocks.emplace_back(std::in_place_type<TransformerBlockInference>,
                                 gguf_packed::layer(*gguf, refs, named, options, weight_format));
    else if (plan.kind == io::HFKind::Transformer)
      model->blocks.emplace_back(std::in_place_type<TransformerBlockInference>, named, options,
                                 weight_format);
    else if (plan.kind == io::HFKind::Mamba1)
      model->blocks.emplace_back(std::in_place_type<Mamba1BlockInference>, named, weight_format);
    else
      model->blocks.emplace_back(std::in_place_type<Mamba2BlockInference>, named, plan.dt_lo, plan.dt_hi,
                                 weight_format);
    model->refs.push_back(std::move(refs));
  }
  return CausalLM(std::move(model));
}

// ------------------------------------------------------------------ calls

namespace {

const LayerBlock& block_at(const CausalLMModel& m, std::size_t i) { return m.blocks[i]; }

LayerState zero_state(const LayerBlock& block, std::int64_t batch, std::int64_t max_tokens) {
  if (const auto* t = std::get_if<TransformerBlockInference>(&block))
    return t->allocate_state(batch, max_tokens);
  if (const auto* m1 = std::get_if<Mamba1BlockInference>(&block)) return m1->allocate_state(batch);
  return std::get<Mamba2BlockInference>(block).allocate_state(batch);
}

// What a refused layer call must put back: a full-causal KV cache only needs its position count (the
// appended rows lie past it; KvCacheState::roll_back keeps the others where a reader finds them); a ring
// that would wrap and a Mamba state need a copy.
struct LayerUndo {
  std::optional<LayerState> copy;
  std::int64_t cached = -1;
};

LayerUndo save(LayerState& state, std::int64_t length) {
  LayerUndo undo;
  if (auto* kv = std::get_if<TransformerState>(&state)) {
    if (kv->window() == 0 || kv->cached_tokens() + length <= kv->window()) {
      undo.cached = kv->cached_tokens();
      return undo;
    }
  }
  undo.copy = std::visit([](const auto& s) -> LayerState { return s.clone(); }, state);
  return undo;
}

void restore(LayerState& state, LayerUndo& undo) {
  if (undo.copy) {
    state = std::move(*undo.copy);
  } else if (auto* kv = std::get_if<TransformerState>(&state)) {
    if (kv->cached_tokens() != undo.cached) ApiAccess::engine(*kv).roll_back(undo.cached);
  }
}

// The layers of a step_many over many one-row states (docs/api.md §18): each layer's engine states, every
// state refusal of every layer made at construction (layer by layer, worded as each block's step_many
// words it), so that step() checks only its input rows. Nothing moves before step().
class ManyLayers {
 public:
  ManyLayers(const CausalLMModel& m, const std::vector<std::vector<LayerState>*>& sequences)
      : model_(m), count_(static_cast<std::int64_t>(sequences.size())), layers_(m.blocks.size()) {
    for (std::size_t i = 0; i < m.blocks.size(); ++i) {
      Layer& layer = layers_[i];
      const LayerBlock& block = block_at(m, i);
      if (const auto* t = std::get_if<TransformerBlockInference>(&block)) {
        std::vector<TransformerState*> kv;
        for (std::vector<LayerState>* layers : sequences)
          kv.push_back(&std::get<TransformerState>((*layers)[i]));
        layer.transformer.emplace(*t, kv);
      } else if (const auto* m1 = std::get_if<Mamba1BlockInference>(&block)) {
        for (std::vector<LayerState>* layers : sequences) {
          layer.mamba1.push_back(&ApiAccess::engine(std::get<Mamba1State>((*layers)[i])));
          ApiAccess::block(*m1)->refuse_non_finite_state(*layer.mamba1.back(), kMamba1Entry);
        }
      } else {
        const auto& m2 = std::get<Mamba2BlockInference>(block);
        for (std::vector<LayerState>* layers : sequences) {
          layer.mamba2.push_back(&ApiAccess::engine(std::get<Mamba2State>((*layers)[i])));
          ApiAccess::block(m2)->refuse_state(*layer.mamba2.back(), kMamba2Entry);
        }
      }
    }
  }

  // Layer i: row s of x [count, d_model] continues sequence s, giving row s of y.
  void step(std::size_t i, const float* x, float* y) {
    Layer& layer = layers_[i];
    const LayerBlock& block = block_at(model_, i);
    if (layer.transformer)
      layer.transformer->step(x, y);
    else if (const auto* m1 = std::get_if<Mamba1BlockInference>(&block))
      ApiAccess::block(*m1)->step_many(x, count_, layer.mamba1.data(), y, kMamba1Entry, true);
    else
      ApiAccess::block(std::get<Mamba2BlockInference>(block))
          ->step_many(x, count_, layer.mamba2.data(), y, kMamba2Entry, true);
  }

 private:
  static constexpr const char* kMamba1Entry = "mamba1_decode_step";
  static constexpr const char* kMamba2Entry = "mamba2_decode_step";
  struct Layer {
    std::optional<TransformerManyStep> transformer;
    std::vector<blocks::Mamba1State*> mamba1;
    std::vector<blocks::Mamba2State*> mamba2;
  };
  const CausalLMModel& model_;
  std::int64_t count_;
  std::vector<Layer> layers_;
};

}  // namespace

CausalLMState CausalLM::allocate_state(std::int64_t batch_size, std::int64_t max_tokens) const {
  if (batch_size < 1 || max_tokens < 1)
    throw_value_error(kCall + ".allocate_state: batch_size and max_tokens must be positive");
  if (model_->plan.kind == io::HFKind::Transformer && model_->max_positions &&
      max_tokens > *model_->max_positions)
    throw_value_error(kCall + ".allocate_state: max_tokens=" + std::to_string(max_tokens) +
                      " exceeds max_positions=" + std::to_string(*model_->max_positions));
  auto impl = std::make_unique<CausalLMState::Impl>();
  impl->owner = model_.get();
  impl->batch = batch_size;
  impl->max_tokens = max_tokens;
  for (const LayerBlock& block : model_->blocks)
    impl->layers.push_back(zero_state(block, batch_size, max_tokens));
  return CausalLMState(std::move(impl));
}

CausalLMState& CausalLM::reset_state(CausalLMState& state) const {
  if (!state.impl_ || state.impl_->owner != model_.get())
    throw_value_error(kCall + ".reset_state: state belongs to another model");
  std::vector<LayerState> fresh;
  for (const LayerBlock& block : model_->blocks)
    fresh.push_back(zero_state(block, state.impl_->batch, state.impl_->max_tokens));
  state.impl_->layers = std::move(fresh);
  state.impl_->positions = 0;
  return state;
}

void CausalLM::check_state(const CausalLMState& state, std::int64_t batch, std::int64_t length,
                           const std::string& what) const {
  const CausalLMState::Impl& s = *state.impl_;
  if (s.owner != model_.get())
    throw_value_error(what + ": state belongs to another model; allocate a state on this model");
  const auto layers = static_cast<std::int64_t>(s.layers.size());
  if (s.batch != batch || layers != model_->plan.n_layers)
    throw_value_error(what + ": the state holds " + std::to_string(s.batch) + " rows and " +
                      std::to_string(layers) + " layers, the call has B = " + std::to_string(batch) +
                      " and the model " + std::to_string(model_->plan.n_layers) + " layers");
  if (model_->max_positions && s.positions + length > *model_->max_positions)
    throw_value_error(what + ": " + std::to_string(s.positions) + " + " + std::to_string(length) +
                      " positions exceed max_positions=" + std::to_string(*model_->max_positions) +
                      " (the transformer block's absolute-position ceiling is 8192, DEVIATION 812)");
  if (s.positions + length > s.max_tokens)
    throw_value_error(what + ": the state was allocated for " + std::to_string(s.max_tokens) +
                      " tokens and holds " + std::to_string(s.positions) + "; " + std::to_string(length) +
                      " more do not fit");
}

std::vector<float> CausalLM::run(const IdsView& ids, CausalLMState* state, bool step,
                                 const std::string& what) const {
  const CausalLMModel& m = *model_;
  const std::int64_t batch = ids.batch;
  const std::int64_t length = ids.length;
  if (batch < 1 || length < 1)
    throw_value_error(what + ": B and L must be positive, got (" + std::to_string(batch) + ", " +
                      std::to_string(length) + ")");
  if (step && length != 1)
    throw_value_error(what + ": ids must be (B,) or (B, 1) for a step, got shape (" + std::to_string(batch) +
                      ", " + std::to_string(length) + ")");
  const std::int64_t rows = batch * length;
  const std::int64_t vocab = m.plan.vocab_size;
  for (std::int64_t t = 0; t < rows; ++t)
    if (ids.data[t] < 0 || ids.data[t] >= vocab)
      throw_value_error(what + ": ids must be in [0, " + std::to_string(vocab) + ")");
  if (state != nullptr) {
    check_state(*state, batch, length, what);
  } else if (m.max_positions && length > *m.max_positions) {
    throw_value_error(what + ": 0 + " + std::to_string(length) +
                      " positions exceed max_positions=" + std::to_string(*m.max_positions) +
                      " (the transformer block's absolute-position ceiling is 8192, DEVIATION 812)");
  }
  const std::int64_t d = m.plan.d_model;
  // The layers' scratch buffers are faulted in once for the whole call, then reused layer after layer.
  const scratch::Scope reuse_scratch;
  std::vector<float> x(static_cast<std::size_t>(rows * d));
  m.ends->embed(ids.data, rows, x.data());
  std::vector<std::int64_t> shape{batch, length, d};
  std::vector<LayerUndo> undo;
  try {
    for (std::size_t i = 0; i < m.blocks.size(); ++i) {
      const TensorView view{x.data(), shape};
      const LayerBlock& block = block_at(m, i);
      if (state == nullptr) {
        if (const auto* t = std::get_if<TransformerBlockInference>(&block))
          x = t->forward(view);
        else if (const auto* m1 = std::get_if<Mamba1BlockInference>(&block))
          x = m1->forward(view);
        else
          x = std::get<Mamba2BlockInference>(block).forward(view);
        continue;
      }
      LayerState& ls = state->impl_->layers[i];
      undo.push_back(save(ls, length));
      if (const auto* t = std::get_if<TransformerBlockInference>(&block)) {
        auto& s = std::get<TransformerState>(ls);
        x = step ? t->step(view, s) : t->forward(view, s);
      } else if (const auto* m1 = std::get_if<Mamba1BlockInference>(&block)) {
        auto* s = &std::get<Mamba1State>(ls);
        x = step ? m1->step(view, s) : m1->forward(view, s);
      } else {
        const auto& m2 = std::get<Mamba2BlockInference>(block);
        auto* s = &std::get<Mamba2State>(ls);
        x = step ? m2.step(view, s) : m2.forward(view, s);
      }
    }
  } catch (...) {
    for (std::size_t i = 0; i < undo.size(); ++i) restore(state->impl_->layers[i], undo[i]);
    throw;
  }
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
  m.ends->logits(x.data(), rows, logits.data());
  if (state != nullptr) state->impl_->positions += length;
  return logits;
}

std::vector<float> CausalLM::forward(const IdsView& ids) const {
  return run(ids, nullptr, false, kCall + ".forward");
}

std::vector<float> CausalLM::forward(const IdsView& ids, CausalLMState& state) const {
  return run(ids, &state, false, kCall + ".forward");
}

std::vector<float> CausalLM::step(const IdsView& ids, CausalLMState& state) const {
  return run(ids, &state, true, kCall + ".step");
}

std::vector<float> CausalLM::step_many(const std::vector<std::int32_t>& ids,
                                       const std::vector<CausalLMState*>& states) const {
  const CausalLMModel& m = *model_;
  const std::string what = kCall + ".step_many";
  const auto count = static_cast<std::int64_t>(ids.size());
  if (count < 1 || states.size() != ids.size())
    throw_value_error(what + ": give one id per state and at least one, got " + std::to_string(ids.size()) +
                      " ids and " + std::to_string(states.size()) + " states");
  const std::int64_t vocab = m.plan.vocab_size;
  for (std::int32_t id : ids)
    if (id < 0 || id >= vocab)
      throw_value_error(what + ": ids must be in [0, " + std::to_string(vocab) + ")");
  for (std::size_t s = 0; s < states.size(); ++s) {
    if (states[s] == nullptr || !states[s]->impl_)
      throw_value_error(what + ": state " + std::to_string(s) + " is missing");
    check_distinct_state(states, s, what);
    check_state(*states[s], 1, 1, what);
  }
  std::vector<std::vector<LayerState>*> sequences;
  for (CausalLMState* state : states) sequences.push_back(&state->impl_->layers);
  const std::int64_t d = m.plan.d_model;
  std::vector<float> x(static_cast<std::size_t>(count * d));
  m.ends->embed(ids.data(), count, x.data());
  std::vector<std::vector<LayerUndo>> undo(states.size());
  try {
    // Every layer's state refusals, in each block's words, before any layer runs; the layer calls then
    // check only their input rows (a refusal there rolls back the layers that ran).
    ManyLayers layers(m, sequences);
    for (std::size_t i = 0; i < m.blocks.size(); ++i) {
      for (std::size_t s = 0; s < states.size(); ++s) undo[s].push_back(save((*sequences[s])[i], 1));
      std::vector<float> y(x.size());
      layers.step(i, x.data(), y.data());
      x = std::move(y);
    }
  } catch (...) {
    for (std::size_t s = 0; s < states.size(); ++s)
      for (std::size_t i = 0; i < undo[s].size(); ++i) restore((*sequences[s])[i], undo[s][i]);
    throw;
  }
  std::vector<float> logits(static_cast<std::size_t>(count * vocab));
  m.ends->logits(x.data(), count, logits.data());
  for (CausalLMState* state : states) state->impl_->positions += 1;
  return logits;
}

std::vector<std::int32_t> CausalLM::generate(const IdsView& ids, std::int64_t max_new_tokens) const {
  return generate(ids, max_new_tokens, GenerateOptions{});
}

std::vector<std::int32_t> CausalLM::generate(const IdsView& ids, std::int64_t max_new_tokens,
                                             const GenerateOptions& options) const {
  const std::string what = kCall + ".generate";
  if (max_new_tokens < 0)
    throw_value_error(what + ": max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
  const std::int64_t batch = ids.batch;
  const std::int64_t length = ids.length;
  if (batch < 1 || length < 1)
    throw_value_error(what + ": B and L must be positive, got (" + std::to_string(batch) + ", " +
                      std::to_string(length) + ")");
  for (std::int64_t t = 0; t < batch * length; ++t)
    if (ids.data[t] < 0 || ids.data[t] >= model_->plan.vocab_size)
      throw_value_error(what + ": ids must be in [0, " + std::to_string(model_->plan.vocab_size) + ")");
  if (!options.greedy) check_sampler_options(options.sampling, what);
  const std::int64_t n = max_new_tokens;
  const std::int64_t total = length + n;
  std::vector<std::int32_t> out(static_cast<std::size_t>(batch * total), -1);
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(ids.data + b * length, ids.data + (b + 1) * length, out.begin() + b * total);
  if (n == 0) return out;
  if (model_->max_positions && total > *model_->max_positions)
    throw_value_error(what + ": " + std::to_string(length) + " prompt + " + std::to_string(n) +
                      " new tokens exceed max_positions=" + std::to_string(*model_->max_positions));
  const std::int64_t vocab = model_->plan.vocab_size;
  // One sampler per row, fed the row's prompt (its penalty window), seeded seed + b.
  std::vector<Sampler> samplers;
  if (!options.greedy) {
    for (std::int64_t b = 0; b < batch; ++b) {
      SamplerOptions row = options.sampling;
      row.seed += static_cast<std::uint64_t>(b);
      samplers.emplace_back(row);
      for (std::int64_t t = 0; t < length; ++t) samplers.back().accept(ids.data[b * length + t]);
    }
  }
  const auto pick = [&](const float* row, std::int64_t b) {
    return options.greedy ? models::greedy_argmax(row, vocab)
                          : samplers[static_cast<std::size_t>(b)].sample_and_accept(row, vocab);
  };
  const auto is_stop = [&](std::int32_t id) {
    return std::find(options.stop_ids.begin(), options.stop_ids.end(), id) != options.stop_ids.end();
  };
  CausalLMState state = allocate_state(batch, total);
  std::vector<float> logits = run(ids, &state, false, what);
  std::vector<std::int32_t> next(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b)
    next[static_cast<std::size_t>(b)] = pick(logits.data() + ((b + 1) * length - 1) * vocab, b);
  std::vector<bool> running(static_cast<std::size_t>(batch), true);
  std::int64_t produced = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    bool any = false;
    for (std::int64_t b = 0; b < batch; ++b) {
      if (!running[static_cast<std::size_t>(b)]) continue;
      out[static_cast<std::size_t>(b * total + length + k)] = next[static_cast<std::size_t>(b)];
      if (is_stop(next[static_cast<std::size_t>(b)])) running[static_cast<std::size_t>(b)] = false;
      any = any || running[static_cast<std::size_t>(b)];
    }
    produced = k + 1;
    if (k + 1 == n || !any) break;
    // A stopped row keeps stepping on its last id (rows never mix), its picks unused.
    logits = run({next.data(), batch, 1}, &state, true, what);
    for (std::int64_t b = 0; b < batch; ++b)
      if (running[static_cast<std::size_t>(b)])
        next[static_cast<std::size_t>(b)] = pick(logits.data() + b * vocab, b);
  }
  if (produced == n) return out;
  // Drop the columns no row reached.
  const std::int64_t width = length + produced;
  std::vector<std::int32_t> narrow(static_cast<std::size_t>(batch * width));
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(out.begin() + b * total, out.begin() + b * total + width, narrow.begin() + b * width);
  return narrow;
}

// ------------------------------------------------------------------ reports

std::vector<NamedTensorCopy> ApiAccess::end_tensors(const CausalLM& model) {
  const CausalLMModel& m = *model.model_;
  const std::int64_t v = m.plan.vocab_size;
  const std::int64_t d = m.plan.d_model;
  std::vector<NamedTensorCopy> out;
  out.push_back({m.plan.embed_name, {v, d}, m.ends->embed_copy()});
  out.push_back({m.plan.norm_name, {d}, m.ends->norm()});
  if (!m.plan.tie_embeddings) out.push_back({m.plan.head_name, {v, d}, m.ends->head_copy()});
  return out;
}

std::vector<NamedTensorCopy> CausalLM::parameters() const {
  const CausalLMModel& m = *model_;
  std::vector<NamedTensorCopy> ends = ApiAccess::end_tensors(*this);
  std::vector<NamedTensorCopy> out;
  out.push_back(std::move(ends.front()));  // the embedding first, the norm and head last
  for (std::size_t i = 0; i < m.blocks.size(); ++i) {
    std::vector<TensorInfo> table;
    std::visit([&](const auto& b) { table = b.weight_table(); }, m.blocks[i]);
    std::map<std::string, std::size_t> fused;  // fused checkpoint name -> index in out
    for (std::size_t k = 0; k < table.size(); ++k) {
      std::vector<float> values;
      std::visit([&](const auto& b) { values = b.weight(k); }, m.blocks[i]);
      const auto ref = std::find_if(m.refs[i].begin(), m.refs[i].end(),
                                    [&](const io::HFTensorRef& r) { return r.key == table[k].name; });
      if (ref == m.refs[i].end()) continue;
      if (!ref->sliced()) {
        out.push_back({ref->name, table[k].shape, std::move(values)});
        continue;
      }
      auto at = fused.find(ref->name);
      if (at == fused.end()) {
        fused[ref->name] = out.size();
        out.push_back({ref->name, table[k].shape, std::move(values)});
      } else {  // the rows follow the earlier slices
        NamedTensorCopy& whole = out[at->second];
        whole.values.insert(whole.values.end(), values.begin(), values.end());
        whole.shape[0] += table[k].shape[0];
      }
    }
  }
  for (std::size_t i = 1; i < ends.size(); ++i) out.push_back(std::move(ends[i]));
  return out;
}

const std::vector<std::string>& CausalLM::unused_names() const { return model_->unused; }
const std::string& CausalLM::model_type() const { return model_->plan.model_type; }
const std::string& CausalLM::kind() const { return model_->kind_name; }
const std::string& CausalLM::weight_format() const { return model_->weight_format; }
const std::string& CausalLM::loader() const { return model_->loader_name; }
std::int64_t CausalLM::d_model() const { return model_->plan.d_model; }
std::int64_t CausalLM::vocab_size() const { return model_->plan.vocab_size; }
std::int64_t CausalLM::n_layers() const { return model_->plan.n_layers; }
bool CausalLM::tie_embeddings() const { return model_->plan.tie_embeddings; }
double CausalLM::norm_eps() const { return model_->plan.norm_eps; }
std::optional<std::int64_t> CausalLM::max_positions() const { return model_->max_positions; }

const TransformerBlockInference* CausalLM::transformer_block(std::int64_t i) const {
  return layer_as<TransformerBlockInference>(model_->blocks, i);
}
const Mamba1BlockInference* CausalLM::mamba1_block(std::int64_t i) const {
  return layer_as<Mamba1BlockInference>(model_->blocks, i);
}
const Mamba2BlockInference* CausalLM::mamba2_block(std::int64_t i) const {
  return layer_as<Mamba2BlockInference>(model_->blocks, i);
}

std::string CausalLM::repr() const {
  return "CausalLM(model_type=" + squote(model_->plan.model_type) +
         ", layers=" + std::to_string(model_->plan.n_layers) +
         ", d_model=" + std::to_string(model_->plan.d_model) +
         ", vocab=" + std::to_string(model_->plan.vocab_size) +
         ", weight_format=" + squote(model_->weight_format) + ", device='cpu')";
}

}  // namespace samebits
