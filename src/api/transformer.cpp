// TransformerBlockInference: upstream-worded validation around blocks::TransformerBlock, and its state.
#include "blocks/transformer/transformer.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/transformer.hpp>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "api/transformer_many.hpp"
#include "api/transformer_options.hpp"
#include "api/transformer_state.hpp"
#include "blocks/transformer/state.hpp"

namespace samebits {
namespace {

const std::string kBlock = "samebits TransformerBlock";

std::string what_of(bool step) { return kBlock + (step ? ".step" : ".forward"); }

}  // namespace

// ------------------------------------------------------------------ construction

const std::vector<std::string>& TransformerBlockInference::weight_names() {
  static const std::vector<std::string> names{"input_layernorm.weight", "post_attention_layernorm.weight",
                                              "q_proj.weight",          "k_proj.weight",
                                              "v_proj.weight",          "o_proj.weight",
                                              "gate_proj.weight",       "up_proj.weight",
                                              "down_proj.weight"};
  return names;
}

void TransformerBlockInference::check_weight_names(const std::vector<std::string>& names) {
  check_weight_names(names, TransformerOptions{});
}

void TransformerBlockInference::check_weight_names(const std::vector<std::string>& names,
                                                   const TransformerOptions& options) {
  const blocks::BlockOptions block = transformer_options::block_options(options, kBlock);
  transformer_options::check_optional_names(names, block, options.mlp, kBlock);
  check_weight_key_set(
      names, transformer_options::expected_names(weight_names(), block), kBlock,
      "the upstream parameter names (Llama's decoder layer: input_layernorm, self_attn.*_proj, "
      "post_attention_layernorm, mlp.*_proj)");
}

TransformerBlockInference::TransformerBlockInference(const NamedWeights& weights,
                                                     const TransformerOptions& options,
                                                     std::string weight_format)
    : weight_format_(std::move(weight_format)) {
  std::vector<std::string> names;
  for (const auto& entry : weights) names.push_back(entry.first);
  check_weight_names(names, options);
  blocks::BlockOptions block = transformer_options::block_options(options, kBlock);  // docs/models.md §2
  auto view = [&](const std::string& name) -> const TensorView& {
    for (const auto& entry : weights)
      if (entry.first == name) return entry.second;
    throw_value_error(kBlock + ": no weight named " + name);
  };
  if (options.window < 0)
    throw_value_error(kBlock + ": window must be 0 (full causal) or a positive sliding-window width, got " +
                      std::to_string(options.window));
  const TensorView& norm1 = view("input_layernorm.weight");
  if (norm1.shape.size() != 1 || norm1.shape[0] < 1)
    throw_value_error(kBlock + ": input_layernorm.weight must be 1-D (d_model,), got shape " +
                      shape_repr(norm1.shape));
  blocks::TransformerDims d;
  d.d_model = norm1.shape[0];
  if (options.n_heads < 1)
    throw_value_error(kBlock + ": n_heads must be positive, got " + std::to_string(options.n_heads));
  d.n_heads = options.n_heads;
  d.head_dim = options.head_dim ? *options.head_dim : d.d_model / d.n_heads;
  d.n_kv_heads = options.n_kv_heads ? *options.n_kv_heads : d.n_heads;
  if (d.d_model != d.n_heads * d.head_dim)
    throw_value_error(
        kBlock +
        ": d_model must equal n_heads*head_dim (LlamaDims.validate carries the same refusal), got "
        "d_model " +
        std::to_string(d.d_model) + " vs n_heads " + std::to_string(d.n_heads) + " * head_dim " +
        std::to_string(d.head_dim));
  if (d.n_kv_heads < 1)
    throw_value_error(kBlock + ": n_kv_heads must be positive, got " + std::to_string(d.n_kv_heads));
  block.rope_dim = transformer_options::check_rope_dim(options, d.head_dim, kBlock);
  // The intermediate size comes from gate_proj.weight, or up_proj.weight for an ungated MLP.
  const std::string it_source = block.gated() ? "gate_proj.weight" : "up_proj.weight";
  const TensorView& gate = view(it_source);
  if (gate.shape.size() != 2 || gate.shape[0] < 1 || gate.shape[1] != d.d_model)
    throw_value_error(kBlock + ": " + it_source + " must be (intermediate, d_model=" +
                      std::to_string(d.d_model) + "), got shape " + shape_repr(gate.shape));
  d.intermediate = gate.shape[0];
  d.window = options.window;

  blocks::TransformerWeights values;
  std::vector<float>* slots[] = {&values.input_norm, &values.post_norm, &values.q,  &values.k,   &values.v,
                                 &values.o,          &values.gate,      &values.up, &values.down};
  // Shapes in the upstream order (post norm, q, k, v, o, gate, up, down), then the copies.
  auto tensors = blocks::transformer_tensors(d);
  if (!block.gated()) tensors[6].shape.clear();  // no gate_proj.weight (its slot stays empty)
  const auto optional =
      blocks::optional_tensors(block, d.d_model, d.q_width(), d.kv_width(), d.intermediate, d.head_dim);
  for (const auto& t : optional)
    if (t.on) tensors.push_back({t.name, {t.length}});
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].shape.empty()) continue;
    const TensorView& given = view(tensors[i].name);
    if (given.shape != tensors[i].shape)
      throw_value_error(kBlock + ": " + tensors[i].name + " has shape " + shape_repr(given.shape) +
                        ", want " + shape_repr(tensors[i].shape));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape.empty()) continue;
    const TensorView& given = view(tensors[i].name);
    if (given.data == nullptr && given.elements() > 0)
      throw_value_error(kBlock + ": " + tensors[i].name + " has no data");
    std::vector<float>* slot = i < 9 ? slots[i] : nullptr;
    for (std::size_t o = 0; slot == nullptr && o < optional.size(); ++o)
      if (std::string(tensors[i].name) == optional[o].name) slot = &values.optional(o);
    slot->assign(given.data, given.data + given.elements());
  }
  block_ = std::make_shared<const blocks::TransformerBlock>(d, std::move(values), kBlock, block);
}

TransformerState TransformerBlockInference::allocate_state(std::int64_t batch_size,
                                                           std::int64_t max_tokens) const {
  if (batch_size < 1)
    throw_value_error(kBlock + ": batch_size must be positive, got " + std::to_string(batch_size));
  if (max_tokens < 1)
    throw_value_error(kBlock + ": max_tokens must be positive, got " + std::to_string(max_tokens));
  return TransformerState(batch_size, block_->dims().n_kv_heads, block_->dims().head_dim, max_tokens,
                          block_->dims().window);
}

// ------------------------------------------------------------------ calls

std::array<std::int64_t, 2> TransformerBlockInference::check_tokens(const std::vector<std::int64_t>& shape,
                                                                    bool step) const {
  const std::string what = what_of(step);
  const auto [batch, length] = check_token_shape(shape, block_->dims().d_model, step, what);
  if (batch < 1 || length < 1) throw_value_error(what + ": B and L must be positive");
  return {batch, length};
}

void TransformerBlockInference::check_state(std::int64_t batch, std::int64_t state_batch,
                                            std::int64_t state_window, bool step) const {
  const std::string what = what_of(step);
  if (state_batch != batch)
    throw_value_error(what + ": the state was allocated for batch_size " + std::to_string(state_batch) +
                      " but x has B = " + std::to_string(batch) +
                      " (allocate_state(B, max_tokens) makes a matching one)");
  if (state_window != block_->dims().window)
    throw_value_error(what + ": the state was allocated for window " + std::to_string(state_window) +
                      " but this block has window " + std::to_string(block_->dims().window) +
                      " (allocate_state on THIS block makes a matching one)");
}

std::vector<float> TransformerBlockInference::run(const TensorView& x, TransformerState& state, bool step,
                                                  bool reference) const {
  const std::string what = what_of(step);
  const auto [batch, length] = check_tokens(x.shape, step);
  check_state(batch, state.batch_size(), state.window(), step);
  if (x.data == nullptr) throw_value_error(what + ": x has no data");
  KvCacheState::EngineAccess access(ApiAccess::engine(state), reference);
  std::vector<float> y(static_cast<std::size_t>(batch * length * block_->dims().d_model));
  if (reference)
    block_->forward_reference(x.data, batch, length, access.cache(), y.data(), what);
  else
    block_->forward(x.data, batch, length, access.cache(), y.data(), what);
  return y;
}

namespace {

// The block sizes its cache reads and writes by its own dims, so an owned state of other dims (another
// model's) is refused before its buffers are handed over.
void check_cache_dims(const TransformerState& state, const blocks::TransformerDims& dims, bool step) {
  if (state.n_kv_heads() != dims.n_kv_heads || state.head_dim() != dims.head_dim)
    throw_value_error(what_of(step) + ": the state was allocated for n_kv_heads " +
                      std::to_string(state.n_kv_heads()) + " x head_dim " + std::to_string(state.head_dim()) +
                      " but this block has n_kv_heads " + std::to_string(dims.n_kv_heads) + " x head_dim " +
                      std::to_string(dims.head_dim) + " (allocate_state on THIS block makes a matching one)");
}

// step_many's refusals of one state past its pointer: this block's cache dims, one row, this window.
void check_many_state(const TransformerBlockInference& block, const TransformerState& state) {
  check_cache_dims(state, ApiAccess::block(block)->dims(), true);
  block.check_state(1, state.batch_size(), state.window(), true);
}
}  // namespace

std::vector<float> TransformerBlockInference::forward(const TensorView& x) const {
  const auto [batch, length] = check_tokens(x.shape, false);
  TransformerState fresh(batch, block_->dims().n_kv_heads, block_->dims().head_dim, length,
                         block_->dims().window);
  return run(x, fresh, false, false);
}

std::vector<float> TransformerBlockInference::forward(const TensorView& x, TransformerState& state) const {
  check_tokens(x.shape, false);
  check_cache_dims(state, block_->dims(), false);
  return run(x, state, false, false);
}

std::vector<float> TransformerBlockInference::step(const TensorView& x, TransformerState& state) const {
  check_tokens(x.shape, true);
  check_cache_dims(state, block_->dims(), true);
  return run(x, state, true, false);
}

TransformerManyStep::TransformerManyStep(const TransformerBlockInference& block,
                                         const std::vector<TransformerState*>& states)
    : block_(*ApiAccess::block(block)), access_(states.size()) {
  for (const TransformerState* state : states) check_many_state(block, *state);
  for (std::size_t i = 0; i < states.size(); ++i) {
    caches_.push_back(&access_[i].emplace(ApiAccess::engine(*states[i]), false).cache());
    block_.check_call(nullptr, 1, 1, *caches_.back(), what_of(true), blocks::StateScan::kNow);
  }
}

void TransformerManyStep::step(const float* x, float* y) {
  if (caches_.empty()) throw_runtime_error(what_of(true) + ": a layer's caches were stepped twice");
  block_.step_many(x, static_cast<std::int64_t>(caches_.size()), caches_.data(), y, what_of(true), true);
  caches_.clear();
  access_.clear();  // commits each cache
}

std::vector<float> TransformerBlockInference::step_many(const TensorView& x,
                                                        const std::vector<TransformerState*>& states) const {
  const std::string what = what_of(true);
  const auto [count, length] = check_tokens(x.shape, true);
  if (static_cast<std::size_t>(count) != states.size())
    throw_value_error(what + "_many: x has " + std::to_string(count) + " rows for " +
                      std::to_string(states.size()) + " states");
  if (x.data == nullptr) throw_value_error(what + ": x has no data");
  for (std::size_t i = 0; i < states.size(); ++i) {
    if (states[i] == nullptr) throw_value_error(what + "_many: state " + std::to_string(i) + " is missing");
    check_distinct_state(states, i, what + "_many");
    check_many_state(*this, *states[i]);
  }
  std::vector<std::optional<KvCacheState::EngineAccess>> access(states.size());
  std::vector<blocks::KvCache*> caches(states.size());
  for (std::size_t i = 0; i < states.size(); ++i)
    caches[i] = &access[i].emplace(ApiAccess::engine(*states[i]), false).cache();
  std::vector<float> y(static_cast<std::size_t>(count * length * block_->dims().d_model));
  block_->step_many(x.data, count, caches.data(), y.data(), what);
  return y;
}

std::vector<float> TransformerBlockInference::forward_ragged(const TensorView& x,
                                                             const std::vector<std::int64_t>& lengths) const {
  const std::string what = what_of(false);
  const auto [batch, length] = check_tokens(x.shape, false);
  check_ragged_lengths(lengths, batch, length, what);
  const std::int64_t dm = block_->dims().d_model;
  return ragged_run(x.data, batch, length, dm, lengths, dm, [&](const float* padded) {
    return forward(TensorView{padded, x.shape});
  });
}

std::vector<float> TransformerBlockInference::forward_reference(const TensorView& x) const {
  const auto [batch, length] = check_tokens(x.shape, false);
  TransformerState fresh(batch, block_->dims().n_kv_heads, block_->dims().head_dim, length,
                         block_->dims().window);
  return run(x, fresh, false, true);
}

std::vector<float> TransformerBlockInference::forward_reference(const TensorView& x, TransformerState& state,
                                                                bool step) const {
  check_tokens(x.shape, step);
  check_cache_dims(state, block_->dims(), step);
  return run(x, state, step, true);
}

void TransformerBlockInference::backward() const {
  throw_not_implemented(
      "samebits TransformerBlockInference.backward: inference is forward only; the backward pass runs on "
      "TransformerBlock over a training binding");
}

// ------------------------------------------------------------------ shape and weights

std::int64_t TransformerBlockInference::d_model() const { return block_->dims().d_model; }
std::int64_t TransformerBlockInference::n_heads() const { return block_->dims().n_heads; }
std::int64_t TransformerBlockInference::n_kv_heads() const { return block_->dims().n_kv_heads; }
std::int64_t TransformerBlockInference::head_dim() const { return block_->dims().head_dim; }
std::int64_t TransformerBlockInference::intermediate() const { return block_->dims().intermediate; }
std::int64_t TransformerBlockInference::window() const { return block_->dims().window; }

std::vector<TensorInfo> TransformerBlockInference::weight_table() const {
  return tensor_infos(blocks::transformer_tensors(block_->dims()));
}

std::vector<float> TransformerBlockInference::weight(std::size_t index) const {
  check_weight_index(index, blocks::transformer_tensors(block_->dims()).size(), kBlock);
  return block_->weight(index);
}

}  // namespace samebits
