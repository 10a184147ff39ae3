// Mamba3BlockInference and Mamba3State: upstream's checks and wording around the exact Mamba-3 block.
#include "blocks/mamba3/mamba3.hpp"

#include <algorithm>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/mamba3.hpp>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "models/samba_config.hpp"

namespace samebits {
namespace {

constexpr const char* kBlock = "samebits Mamba3Block";

static_assert(kMamba3StateDim == blocks::mamba3::kStateDim && kMamba3HeadDim == blocks::mamba3::kHeadDim &&
              kMamba3Angles == blocks::mamba3::kAngles);

// The engine's reports moved into the public struct.
void hand_over(Mamba3Reports&& from, Mamba3Reports* to) {
  if (to != nullptr) *to = std::move(from);
}

// d_model 32 sizes every table lookup that does not depend on it (the names, and the shapes for a
// tensor check at the caller's d_model).
std::vector<blocks::TensorSpec> table_for(std::int64_t d_model) {
  return blocks::mamba3_tensors(blocks::Mamba3Dims::of(d_model));
}

}  // namespace

std::vector<std::string> Mamba3BlockInference::weight_names() {
  std::vector<std::string> names;
  for (const auto& spec : table_for(blocks::mamba3::kDModelStep)) names.emplace_back(spec.name);
  return names;
}

void Mamba3BlockInference::check_keys(const std::vector<std::string>& given) {
  check_weight_key_set(given, weight_names(), kBlock, "the upstream (PyTorch-style) parameter names");
}

std::int64_t Mamba3BlockInference::check_norm_weight(const std::vector<std::int64_t>& shape) {
  const std::int64_t d_model = norm_weight_width(shape, kBlock, "block_norm.weight");
  if (d_model % blocks::mamba3::kDModelStep != 0)
    throw_value_error(
        std::string(kBlock) +
        ": d_model must be a multiple of 32 so that nheads = 2*d_model/64 is whole (head dim 64, "
        "expand 2: the profile's constants); got " +
        std::to_string(d_model));
  return d_model;
}

void Mamba3BlockInference::check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                                        std::int64_t d_model) {
  for (const auto& spec : table_for(d_model)) {
    if (name != spec.name) continue;
    if (shape != spec.shape)
      throw_value_error(std::string(kBlock) + ": " + name + " has shape " + shape_repr(shape) + ", want " +
                        shape_repr(spec.shape));
    return;
  }
  throw_value_error(std::string(kBlock) + ": no weight named " + models::python_str_repr(name));
}

Mamba3BlockInference::Mamba3BlockInference(const NamedTensors& weights, std::string weight_format)
    : weight_format_(std::move(weight_format)) {
  if (weight_format_ != "float32" && weight_format_ != "bfloat16" && weight_format_ != "int8")
    throw_value_error(std::string(kBlock) + ": unknown weight format " +
                      models::python_str_repr(weight_format_));
  std::vector<std::string> keys;
  for (const auto& entry : weights) keys.push_back(entry.first);
  check_keys(keys);
  auto view_named = [&](const std::string& name) -> const TensorView& {
    for (const auto& [key, view] : weights)
      if (key == name) return view;
    throw_value_error(std::string(kBlock) + ": missing weight " + models::python_str_repr(name));
  };
  const std::int64_t d_model = check_norm_weight(view_named("block_norm.weight").shape);
  blocks::Mamba3Weights copied;
  const auto specs = table_for(d_model);
  for (int i = 0; i < blocks::kMamba3TensorCount; ++i) {
    const TensorView& view = view_named(specs[i].name);
    check_weight(specs[i].name, view.shape, d_model);
    if (view.data == nullptr && specs[i].elements() > 0)
      throw_value_error(std::string(kBlock) + ": " + specs[i].name + " has no data");
    copied.tensors[i].assign(view.data, view.data + specs[i].elements());
  }
  block_ = std::make_shared<const blocks::Mamba3Block>(std::move(copied));
}

void Mamba3BlockInference::check_tokens(const std::vector<std::int64_t>& shape, bool step) const {
  check_token_shape(shape, block_->dims().d_model, step, std::string(kBlock) + (step ? ".step" : ".forward"));
}

Mamba3State Mamba3BlockInference::allocate_state(std::int64_t batch_size) const {
  if (batch_size < 1)
    throw_value_error(std::string(kBlock) + ": batch_size must be positive, got " +
                      std::to_string(batch_size));
  return ApiAccess::wrap(block_->allocate_state(batch_size));
}

std::vector<float> Mamba3BlockInference::call(const TensorView& x, Mamba3State* state, Mamba3Reports* reports,
                                              bool step, bool reference) const {
  const std::string what = std::string(kBlock) + (step ? ".step" : ".forward");
  if (step) require_step_state(state != nullptr, "Mamba3Block");
  check_tokens(x.shape, step);
  const std::int64_t B = x.shape[0], L = x.shape.size() == 2 ? 1 : x.shape[1];
  blocks::Mamba3State* engine = state != nullptr ? &ApiAccess::engine(*state) : nullptr;
  if (engine != nullptr) {
    for (int p = 0; p < blocks::Mamba3State::kPieceCount; ++p) {
      const auto want = blocks::Mamba3State::piece_shape_for(p, B, block_->dims().heads);
      if (engine->piece_shape(p) != want)
        throw_value_error(what + ": state buffer " + blocks::Mamba3State::piece_name(p) + " has shape " +
                          shape_repr(engine->piece_shape(p)) + ", want " + shape_repr(want));
    }
  }
  if (B < 1 || L < 1) throw_value_error("mamba3: B and L must be positive");
  const char* entry =
      state == nullptr ? "mamba3_forward_fresh" : (step ? "mamba3_decode_step" : "mamba3_forward");
  std::vector<float> y(static_cast<std::size_t>(B * L * block_->dims().d_model));
  blocks::Mamba3State fresh;
  blocks::Mamba3State& target = engine != nullptr ? *engine : (fresh = block_->allocate_state(B));
  std::optional<Mamba3Reports> made;
  Mamba3Reports* wanted = reports != nullptr ? &made.emplace() : nullptr;
  if (reference)
    block_->forward_reference(x.data, B, L, target, y.data(), wanted, entry);
  else
    block_->forward(x.data, B, L, target, y.data(), wanted, entry);
  if (made) hand_over(std::move(*made), reports);
  return y;
}

std::vector<float> Mamba3BlockInference::forward(const TensorView& x, Mamba3State* state,
                                                 Mamba3Reports* reports) const {
  return call(x, state, reports, false, false);
}

std::vector<float> Mamba3BlockInference::step(const TensorView& x, Mamba3State* state,
                                              Mamba3Reports* reports) const {
  return call(x, state, reports, true, false);
}

std::vector<float> Mamba3BlockInference::forward_reference(const TensorView& x, Mamba3State* state,
                                                           Mamba3Reports* reports) const {
  return call(x, state, reports, false, true);
}

std::vector<float> Mamba3BlockInference::step_reference(const TensorView& x, Mamba3State* state,
                                                        Mamba3Reports* reports) const {
  return call(x, state, reports, true, true);
}

void Mamba3BlockInference::backward() const {
  throw_not_implemented(
      "samebits Mamba3BlockInference.backward: inference is forward only; the backward pass runs on the GPU "
      "block class over a training binding");
}

Mamba3Reports Mamba3BlockInference::reports_of(const Mamba3State& state) const {
  Mamba3Reports out;
  hand_over(block_->reports_of(ApiAccess::engine(state)), &out);
  return out;
}

std::int64_t Mamba3BlockInference::d_model() const { return block_->dims().d_model; }
std::int64_t Mamba3BlockInference::d_inner() const { return block_->dims().d_inner; }
std::int64_t Mamba3BlockInference::nheads() const { return block_->dims().heads; }
std::int64_t Mamba3BlockInference::d_in_proj() const { return block_->dims().d_in_proj; }

std::vector<TensorInfo> Mamba3BlockInference::weight_table() const {
  return tensor_infos(blocks::mamba3_tensors(block_->dims()));
}

std::vector<float> Mamba3BlockInference::weight(std::size_t index) const {
  check_weight_index(index, static_cast<std::size_t>(blocks::kMamba3TensorCount), kBlock);
  return block_->weight(static_cast<int>(index));
}

// ------------------------------------------------------------------------------ Mamba3State

Mamba3State::Mamba3State(std::unique_ptr<blocks::Mamba3State> impl) : impl_(std::move(impl)) {}
Mamba3State::Mamba3State(std::int64_t batch_size, std::int64_t heads)
    : impl_(std::make_unique<blocks::Mamba3State>(batch_size, heads)) {}
Mamba3State::Mamba3State(Mamba3State&&) noexcept = default;
Mamba3State& Mamba3State::operator=(Mamba3State&&) noexcept = default;
Mamba3State::~Mamba3State() = default;
Mamba3State Mamba3State::clone() const { return ApiAccess::wrap(impl_->clone()); }
std::int64_t Mamba3State::batch() const { return impl_->batch(); }
std::int64_t Mamba3State::heads() const { return impl_->heads(); }
const char* Mamba3State::piece_name(int piece) { return blocks::Mamba3State::piece_name(piece); }
std::vector<std::int64_t> Mamba3State::piece_shape(int piece) const { return impl_->piece_shape(piece); }
std::int64_t Mamba3State::piece_elements(int piece) const { return impl_->piece_elements(piece); }
const float* Mamba3State::piece(int piece) const { return std::as_const(*impl_).piece(piece); }
Mamba3State::Pin Mamba3State::pin(int piece) { return impl_->pin(piece); }
std::int64_t Mamba3State::buffered_tokens() const { return impl_->buffered_tokens; }
void Mamba3State::set_buffered_tokens(std::int64_t value) { impl_->buffered_tokens = value; }
bool Mamba3State::pending() const { return impl_->pending; }
void Mamba3State::set_pending(bool value) { impl_->pending = value; }
void Mamba3State::set_input_states(const float* theta, const float* h, const float* k, const float* v) {
  impl_->set_input_states(theta, h, k, v);
}
bool Mamba3State::trusted() const { return impl_->trusted(); }
bool Mamba3State::pinned() const { return impl_->pinned(); }

}  // namespace samebits
