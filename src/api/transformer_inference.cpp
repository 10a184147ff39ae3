// TransformerBlockInference: upstream-worded validation around blocks::TransformerBlock, and its state.
#include "api/transformer_inference.hpp"

#include <algorithm>
#include <cstring>

#include "blocks/transformer/state.hpp"
#include "core/errors.hpp"
#include "core/state_size.hpp"

namespace samebits {
namespace {

const std::string kBlock = "samebits TransformerBlock";

std::string what_of(bool step) { return kBlock + (step ? ".step" : ".forward"); }

}  // namespace

// ------------------------------------------------------------------ TransformerState

TransformerState::TransformerState(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                                   std::int64_t max_tokens, std::int64_t window)
    : batch_size_(batch_size),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      max_tokens_(max_tokens),
      window_(window) {
  allocate_state_buffers("TransformerState", {batch_size, n_kv_heads, capacity(), head_dim}, [&] {
    k_.assign_zero(static_cast<std::size_t>(cache_floats()));
    v_.assign_zero(static_cast<std::size_t>(cache_floats()));
  });
  trusted_ = window_ == 0;  // zeros are finite; a ring is scanned every call
}

TransformerState TransformerState::clone() const {
  TransformerState copy(batch_size_, n_kv_heads_, head_dim_, max_tokens_, window_);
  copy.cached_tokens_ = cached_tokens_;
  copy.k_ = k_.clone();
  copy.v_ = v_.clone();
  if (spread_) copy.k_tiles_ = k_tiles_.clone();
  copy.spread_ = spread_;
  copy.trusted_ = trusted();  // the copy's contents are what was vouched for, unless a pointer was out
  return copy;
}

blocks::KvCache TransformerState::cache_view() {
  blocks::KvCache cache{k_.data(), v_.data(), batch_size_, max_tokens_, cached_tokens_};
  cache.spread = spread_;
  return cache;
}

blocks::TransformerDims TransformerState::cache_dims() const {
  blocks::TransformerDims dims;  // what the layout moves read: the block count and the row length
  dims.n_kv_heads = n_kv_heads_;
  dims.head_dim = head_dim_;
  return dims;
}

void TransformerState::pack() {
  if (!spread_) return;
  blocks::KvCache cache = cache_view();
  blocks::kv::pack_spread(cache, cache_dims());
  spread_ = false;
}

std::vector<float> TransformerState::packed_copy(const AlignedBuffer<float>& buffer) const {
  std::vector<float> copy(buffer.data(), buffer.data() + cache_floats());
  if (spread_) {
    // pack() on a copy; pack_spread moves two buffers, so the second is a scratch twin of the first.
    std::vector<float> twin(copy);
    blocks::KvCache cache{copy.data(), twin.data(), batch_size_, max_tokens_, cached_tokens_};
    cache.spread = true;
    blocks::kv::pack_spread(cache, cache_dims());
  }
  return copy;
}

void TransformerState::set_cached_tokens(std::int64_t value) {
  pack();
  trusted_ = false;
  cached_tokens_ = value;
}

float* TransformerState::k_cache() {
  pack();
  exposed_ = true;
  trusted_ = false;  // what is written through it before forget_handouts() is scanned by the next call
  return k_.data();
}

float* TransformerState::v_cache() {
  pack();
  exposed_ = true;
  trusted_ = false;
  return v_.data();
}

TransformerStateView TransformerState::engine_view(bool reference) {
  const bool private_buffers = !exposed_ && !reference && window_ == 0;
  if (reference) pack();
  if (!spread_ && private_buffers && trusted_ && cached_tokens_ >= 0 && cached_tokens_ <= max_tokens_) {
    blocks::KvCache cache = cache_view();
    blocks::kv::spread_packed(cache, cache_dims());
    spread_ = true;
    blocks::kv::make_key_tiles(cache, cache_dims(), k_tiles_);  // empty if refused: calls read the rows
  }
  TransformerStateView view{k_.data(), v_.data(), batch_size_, max_tokens_, window_, cached_tokens_};
  view.spread = spread_;
  view.k_tiles = spread_ && k_tiles_.size() > 0 ? k_tiles_.data() : nullptr;
  view.trusted = trusted_ && private_buffers;
  view.private_buffers = private_buffers;
  return view;
}

void TransformerState::engine_commit(const TransformerStateView& view) {
  cached_tokens_ = view.cached_tokens;
  trusted_ = view.trusted;
}

std::int64_t TransformerState::held_tokens() const {
  return window_ > 0 ? std::min(cached_tokens_, window_) : cached_tokens_;
}

std::vector<float> TransformerState::used_region(const float* buffer) const {
  const std::int64_t held = held_tokens();
  const std::int64_t heads = batch_size_ * n_kv_heads_;
  std::vector<float> out(static_cast<std::size_t>(heads * held * head_dim_));
  if (window_ <= 0) {
    // Packed: one run; spread: each block from its own place.
    const std::int64_t stride = spread_ ? max_tokens_ : held;
    for (std::int64_t head = 0; head < heads; ++head)
      std::copy(buffer + head * stride * head_dim_, buffer + (head * stride + held) * head_dim_,
                out.begin() + head * held * head_dim_);
    return out;
  }
  for (std::int64_t head = 0; head < heads; ++head)
    for (std::int64_t j = 0; j < held; ++j) {
      const std::int64_t slot = (cached_tokens_ - held + j) % window_;
      std::copy(buffer + (head * window_ + slot) * head_dim_,
                buffer + (head * window_ + slot + 1) * head_dim_,
                out.begin() + (head * held + j) * head_dim_);
    }
  return out;
}

std::vector<float> TransformerState::keys() const { return used_region(k_.data()); }
std::vector<float> TransformerState::values() const { return used_region(v_.data()); }

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
  check_weight_key_set(
      names, weight_names(), kBlock,
      "the upstream parameter names (Llama's decoder layer: input_layernorm, self_attn.*_proj, "
      "post_attention_layernorm, mlp.*_proj)");
}

TransformerBlockInference::TransformerBlockInference(const NamedWeights& weights,
                                                     const TransformerOptions& options,
                                                     std::string weight_format)
    : weight_format_(std::move(weight_format)) {
  std::vector<std::string> names;
  for (const auto& entry : weights) names.push_back(entry.first);
  check_weight_names(names);
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
  const TensorView& gate = view("gate_proj.weight");
  if (gate.shape.size() != 2 || gate.shape[0] < 1 || gate.shape[1] != d.d_model)
    throw_value_error(kBlock + ": gate_proj.weight must be (intermediate, d_model=" +
                      std::to_string(d.d_model) + "), got shape " + shape_repr(gate.shape));
  d.intermediate = gate.shape[0];
  d.window = options.window;

  blocks::TransformerWeights values;
  std::vector<float>* slots[] = {&values.input_norm, &values.post_norm, &values.q,  &values.k,   &values.v,
                                 &values.o,          &values.gate,      &values.up, &values.down};
  // Shapes in the upstream order (post norm, q, k, v, o, gate, up, down), then the copies.
  const auto tensors = blocks::transformer_tensors(d);
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    const TensorView& given = view(tensors[i].name);
    if (given.shape != tensors[i].shape)
      throw_value_error(kBlock + ": " + tensors[i].name + " has shape " + shape_repr(given.shape) +
                        ", want " + shape_repr(tensors[i].shape));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& given = view(tensors[i].name);
    if (given.data == nullptr && given.elements() > 0)
      throw_value_error(kBlock + ": " + tensors[i].name + " has no data");
    slots[i]->assign(given.data, given.data + given.elements());
  }
  block_ = std::make_shared<const blocks::TransformerBlock>(d, std::move(values), kBlock);
}

TransformerState TransformerBlockInference::allocate_state(std::int64_t batch_size,
                                                           std::int64_t max_tokens) const {
  if (batch_size < 1)
    throw_value_error(kBlock + ": batch_size must be positive, got " + std::to_string(batch_size));
  if (max_tokens < 1)
    throw_value_error(kBlock + ": max_tokens must be positive, got " + std::to_string(max_tokens));
  return TransformerState(batch_size, dims().n_kv_heads, dims().head_dim, max_tokens, dims().window);
}

// ------------------------------------------------------------------ calls

std::array<std::int64_t, 2> TransformerBlockInference::check_tokens(const std::vector<std::int64_t>& shape,
                                                                    bool step) const {
  const std::string what = what_of(step);
  const auto [batch, length] = check_token_shape(shape, dims().d_model, step, what);
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
  if (state_window != dims().window)
    throw_value_error(what + ": the state was allocated for window " + std::to_string(state_window) +
                      " but this block has window " + std::to_string(dims().window) +
                      " (allocate_state on THIS block makes a matching one)");
}

blocks::KvCache engine_cache(const TransformerStateView& view, std::int64_t batch) {
  blocks::KvCache cache{view.k_cache, view.v_cache, batch, view.max_tokens, view.cached_tokens};
  cache.spread = view.spread && view.window == 0;
  cache.trusted = view.trusted && view.private_buffers && view.window == 0;
  cache.k_tiles = cache.spread ? view.k_tiles : nullptr;
  return cache;
}

void finish_engine_call(TransformerStateView& view, const blocks::KvCache& cache,
                        const blocks::TransformerDims& dims, std::int64_t pos0, bool reference) {
  view.cached_tokens = cache.cached_tokens;
  // Every carried value was scanned or vouched for; the rows this call wrote are checked here. The twin
  // ends the trust, as a caller's write does.
  view.trusted =
      view.private_buffers && dims.window == 0 && !reference && blocks::kv::rows_finite(cache, dims, pos0);
}

std::vector<float> TransformerBlockInference::run(const TensorView& x, TransformerStateView& state, bool step,
                                                  bool reference) const {
  const std::string what = what_of(step);
  const auto [batch, length] = check_tokens(x.shape, step);
  check_state(batch, state.batch_size, state.window, step);
  if (x.data == nullptr) throw_value_error(what + ": x has no data");
  if (state.k_cache == nullptr || state.v_cache == nullptr)
    throw_value_error(what + ": the state has no buffers");
  blocks::KvCache cache = engine_cache(state, batch);
  const std::int64_t pos0 = cache.cached_tokens;
  std::vector<float> y(static_cast<std::size_t>(batch * length * dims().d_model));
  if (reference)
    block_->forward_reference(x.data, batch, length, cache, y.data(), what);
  else
    block_->forward(x.data, batch, length, cache, y.data(), what);
  finish_engine_call(state, cache, dims(), pos0, reference);
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
}  // namespace

std::vector<float> TransformerBlockInference::forward(const TensorView& x) const {
  const auto [batch, length] = check_tokens(x.shape, false);
  TransformerState fresh(batch, dims().n_kv_heads, dims().head_dim, length, dims().window);
  TransformerStateView view = fresh.engine_view(false);
  return run(x, view, false, false);
}

std::vector<float> TransformerBlockInference::forward(const TensorView& x, TransformerState& state) const {
  check_tokens(x.shape, false);
  check_cache_dims(state, dims(), false);
  TransformerStateView view = state.engine_view(false);
  std::vector<float> y = run(x, view, false, false);
  state.engine_commit(view);
  return y;
}

std::vector<float> TransformerBlockInference::forward(const TensorView& x,
                                                      TransformerStateView& state) const {
  return run(x, state, false, false);
}

std::vector<float> TransformerBlockInference::step(const TensorView& x, TransformerState& state) const {
  check_tokens(x.shape, true);
  check_cache_dims(state, dims(), true);
  TransformerStateView view = state.engine_view(false);
  std::vector<float> y = run(x, view, true, false);
  state.engine_commit(view);
  return y;
}

std::vector<float> TransformerBlockInference::step(const TensorView& x, TransformerStateView& state) const {
  return run(x, state, true, false);
}

std::vector<float> TransformerBlockInference::forward_ragged(const TensorView& x,
                                                             const std::vector<std::int64_t>& lengths) const {
  const std::string what = what_of(false);
  const auto [batch, length] = check_tokens(x.shape, false);
  check_ragged_lengths(lengths, batch, length, what);
  const std::int64_t dm = dims().d_model;
  return ragged_run(x.data, batch, length, dm, lengths, dm, [&](const float* padded) {
    return forward(TensorView{padded, x.shape});
  });
}

std::vector<float> TransformerBlockInference::forward_reference(const TensorView& x) const {
  const auto [batch, length] = check_tokens(x.shape, false);
  TransformerState fresh(batch, dims().n_kv_heads, dims().head_dim, length, dims().window);
  TransformerStateView view = fresh.engine_view(true);
  return run(x, view, false, true);
}

std::vector<float> TransformerBlockInference::forward_reference(const TensorView& x,
                                                                TransformerStateView& state,
                                                                bool step) const {
  return run(x, state, step, true);
}

void TransformerBlockInference::backward() const {
  throw_not_implemented(
      "samebits TransformerBlockInference.backward: inference is forward only; the backward pass runs on "
      "TransformerBlock over a training binding");
}

}  // namespace samebits
