// Mamba3BlockInference: upstream's checks and wording around the exact Mamba-3 block.
#include "api/mamba3_inference.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "models/samba_config.hpp"

namespace samebits {
namespace {

constexpr const char* kBlock = "samebits Mamba3Block";

// Python's repr of a str, for the key lists in messages.

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
  if (shape.size() != 1 || shape[0] < 1)
    throw_value_error(std::string(kBlock) + ": block_norm.weight must be 1-D (d_model,), got shape " +
                      shape_repr(shape));
  const std::int64_t d_model = shape[0];
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

Mamba3BlockInference::Mamba3BlockInference(const std::vector<std::pair<std::string, TensorView>>& weights,
                                           std::string weight_format)
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
  check_token_shape(shape, dims().d_model, step, std::string(kBlock) + (step ? ".step" : ".forward"));
}

Mamba3State Mamba3BlockInference::allocate_state(std::int64_t batch_size) const {
  if (batch_size < 1)
    throw_value_error(std::string(kBlock) + ": batch_size must be positive, got " +
                      std::to_string(batch_size));
  return block_->allocate_state(batch_size);
}

std::vector<float> Mamba3BlockInference::call(const TensorView& x, Mamba3State* state, Mamba3Reports* reports,
                                              bool step, bool reference) const {
  const std::string what = std::string(kBlock) + (step ? ".step" : ".forward");
  if (step && state == nullptr)
    throw_value_error(
        what +
        ": state is required (a decode step continues a sequence; allocate_state(B) makes the fresh "
        "one)");
  check_tokens(x.shape, step);
  const std::int64_t B = x.shape[0], L = x.shape.size() == 2 ? 1 : x.shape[1];
  if (state != nullptr) {
    for (int p = 0; p < Mamba3State::kPieceCount; ++p) {
      const auto want = Mamba3State::piece_shape_for(p, B, dims().heads);
      if (state->piece_shape(p) != want)
        throw_value_error(what + ": state buffer " + Mamba3State::piece_name(p) + " has shape " +
                          shape_repr(state->piece_shape(p)) + ", want " + shape_repr(want));
    }
  }
  if (B < 1 || L < 1) throw_value_error("mamba3: B and L must be positive");
  const char* entry =
      state == nullptr ? "mamba3_forward_fresh" : (step ? "mamba3_decode_step" : "mamba3_forward");
  std::vector<float> y(static_cast<std::size_t>(B * L * dims().d_model));
  Mamba3State fresh;
  Mamba3State& target = state != nullptr ? *state : (fresh = block_->allocate_state(B));
  if (reference)
    block_->forward_reference(x.data, B, L, target, y.data(), reports, entry);
  else
    block_->forward(x.data, B, L, target, y.data(), reports, entry);
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

}  // namespace samebits
