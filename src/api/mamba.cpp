// Mamba1BlockInference / Mamba2BlockInference and their states: upstream's checks and wording around the
// exact blocks.
#include <algorithm>
#include <cmath>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/mamba.hpp>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "models/samba_config.hpp"

namespace samebits {
namespace {

constexpr const char* kPackage = "samebits ";

static_assert(kMambaConvWidth == blocks::Mamba1Dims::kConv && kMambaConvWidth == blocks::Mamba2Dims::kConv &&
              kMamba1StateDim == blocks::Mamba1Dims::kState &&
              kMamba2HeadDim == blocks::Mamba2Dims::kHeadDim &&
              kMamba2StateDim == blocks::Mamba2Dims::kState);

// Python's repr of a str (the quote choice and escapes of CPython), for the key lists in messages.

template <std::size_t N>
std::vector<std::string> names_of(const std::array<blocks::TensorSpec, N>& table) {
  std::vector<std::string> names;
  for (const auto& t : table) names.emplace_back(t.name);
  return names;
}

template <std::size_t N>
const blocks::TensorSpec& spec_named(const std::array<blocks::TensorSpec, N>& table, const std::string& block,
                                     const std::string& name) {
  for (const auto& t : table)
    if (name == t.name) return t;
  throw_value_error(kPackage + block + ": no weight named " + models::python_str_repr(name));
}

// Looks a name up in the caller's list (already checked to be exactly the table's key set).
const TensorView& view_named(const NamedTensors& weights, const std::string& name) {
  for (const auto& [key, view] : weights)
    if (key == name) return view;
  throw_value_error("missing weight " + name);
}

std::vector<float> copy_of(const TensorView& view) {
  const std::int64_t count = view.elements();
  if (count > 0 && view.data == nullptr) throw_value_error("a weight has no data");
  return std::vector<float>(view.data, view.data + count);
}

std::vector<std::string> keys_of(const NamedTensors& weights) {
  std::vector<std::string> keys;
  for (const auto& entry : weights) keys.push_back(entry.first);
  return keys;
}

constexpr const char* kBackwardSentence =
    ".backward: inference is forward only; the backward pass runs on the GPU block class over a training "
    "binding";

}  // namespace

// The refusals both blocks share (and Mamba-3's binding-facing checks mirror).
namespace mamba_api {
namespace {

void check_weight_keys(const std::string& block, const std::vector<std::string>& expected,
                       const std::vector<std::string>& given) {
  check_weight_key_set(given, expected, kPackage + block, "the upstream (PyTorch-style) parameter names");
}

void check_weight_shape(const std::string& block, const blocks::TensorSpec& spec,
                        const std::vector<std::int64_t>& shape) {
  if (shape == spec.shape || (!spec.alt_shape.empty() && shape == spec.alt_shape)) return;
  std::string message = kPackage + block + ": " + spec.name + " has shape " + shape_repr(shape) + ", want " +
                        shape_repr(spec.shape);
  if (!spec.alt_shape.empty()) message += " (or " + shape_repr(spec.alt_shape) + ")";
  throw_value_error(message);
}

std::pair<std::int64_t, std::int64_t> check_tokens(const std::string& what,
                                                   const std::vector<std::int64_t>& shape,
                                                   std::int64_t d_model, bool step) {
  const auto [batch, length] = check_token_shape(shape, d_model, step, kPackage + what);
  if (batch < 1 || length < 1) throw_value_error(kPackage + what + ": B and L must be positive");
  return {batch, length};
}

void check_state_buffer(const std::string& what, const std::string& name,
                        const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& want) {
  if (shape != want)
    throw_value_error(kPackage + what + ": state buffer " + name + " has shape " + shape_repr(shape) +
                      ", want " + shape_repr(want));
}

// Every weight of `table`, its shape checked against the table's spec, copied out of the caller's views.
template <typename Weights, typename Table>
Weights checked_copies(const std::string& block, const Table& table, const NamedTensors& weights) {
  Weights values;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const TensorView& view = view_named(weights, table[i].name);
    check_weight_shape(block, table[i], view.shape);
    values[i] = copy_of(view);
  }
  return values;
}

}  // namespace
}  // namespace mamba_api

// ------------------------------------------------------------------------------------------ Mamba-1

namespace {
const char* kM1 = "Mamba1Block";
}  // namespace

std::vector<std::string> Mamba1BlockInference::weight_names() {
  return names_of(blocks::mamba1_tensors(blocks::Mamba1Dims::for_d_model(1)));
}

void Mamba1BlockInference::check_keys(const std::vector<std::string>& given) {
  mamba_api::check_weight_keys(kM1, weight_names(), given);
}

std::int64_t Mamba1BlockInference::check_norm_weight(const std::vector<std::int64_t>& shape) {
  return norm_weight_width(shape, std::string(kPackage) + kM1, "norm.weight");
}

void Mamba1BlockInference::check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                                        std::int64_t d_model) {
  const auto table = blocks::mamba1_tensors(blocks::Mamba1Dims::for_d_model(d_model));
  mamba_api::check_weight_shape(kM1, spec_named(table, kM1, name), shape);
}

Mamba1BlockInference::Mamba1BlockInference(const NamedTensors& weights, std::string weight_format)
    : weight_format_(std::move(weight_format)) {
  check_keys(keys_of(weights));
  const std::int64_t d_model = check_norm_weight(view_named(weights, "norm.weight").shape);
  const auto table = blocks::mamba1_tensors(blocks::Mamba1Dims::for_d_model(d_model));
  auto values = mamba_api::checked_copies<blocks::Mamba1Weights>(kM1, table, weights);
  block_ = std::make_shared<const blocks::Mamba1Block>(std::move(values));
}

Mamba1State Mamba1BlockInference::allocate_state(std::int64_t batch_size) const {
  if (batch_size < 1)
    throw_value_error(std::string(kPackage) + kM1 + ": batch_size must be positive, got " +
                      std::to_string(batch_size));
  return Mamba1State(batch_size, d_inner());
}

std::vector<float> Mamba1BlockInference::call(const TensorView& x, Mamba1State* state, bool step,
                                              bool reference) const {
  const std::string what = std::string(kM1) + (step ? ".step" : ".forward");
  if (step) require_step_state(state != nullptr, kM1);
  const auto [batch, length] = mamba_api::check_tokens(what, x.shape, d_model(), step);
  std::optional<blocks::Mamba1State> fresh;
  blocks::Mamba1State* engine = state ? &ApiAccess::engine(*state) : &fresh.emplace(batch, d_inner());
  mamba_api::check_state_buffer(what, "conv_window",
                                {engine->batch(), engine->d_inner(), blocks::Mamba1Dims::kConv},
                                {batch, d_inner(), blocks::Mamba1Dims::kConv});
  mamba_api::check_state_buffer(what, "h", {engine->batch(), engine->d_inner(), blocks::Mamba1Dims::kState},
                                {batch, d_inner(), blocks::Mamba1Dims::kState});
  if (x.data == nullptr) throw_value_error(kPackage + what + ": x has no data");
  std::vector<float> y(static_cast<std::size_t>(batch * length * d_model()));
  const std::string entry = step ? "mamba1_decode_step" : "mamba1_forward";
  if (reference)
    block_->forward_reference(x.data, batch, length, *engine, y.data(), entry);
  else
    block_->forward(x.data, batch, length, *engine, y.data(), entry);
  return y;
}

std::vector<float> Mamba1BlockInference::forward(const TensorView& x, Mamba1State* state) const {
  return call(x, state, false, false);
}
std::vector<float> Mamba1BlockInference::step(const TensorView& x, Mamba1State* state) const {
  return call(x, state, true, false);
}
std::vector<float> Mamba1BlockInference::forward_reference(const TensorView& x, Mamba1State* state) const {
  return call(x, state, false, true);
}
std::vector<float> Mamba1BlockInference::step_reference(const TensorView& x, Mamba1State* state) const {
  return call(x, state, true, true);
}

void Mamba1BlockInference::backward() const {
  throw_not_implemented(std::string(kPackage) + "Mamba1BlockInference" + kBackwardSentence);
}

// ------------------------------------------------------------------------------------------ Mamba-2

namespace {
const char* kM2 = "Mamba2Block";
}  // namespace

std::vector<std::string> Mamba2BlockInference::weight_names() {
  return names_of(blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(32)));
}

void Mamba2BlockInference::check_keys(const std::vector<std::string>& given) {
  mamba_api::check_weight_keys(kM2, weight_names(), given);
}

std::int64_t Mamba2BlockInference::check_norm_weight(const std::vector<std::int64_t>& shape) {
  const std::int64_t d_model = norm_weight_width(shape, std::string(kPackage) + kM2, "block_norm.weight");
  if (d_model % 32 != 0)
    throw_value_error(
        std::string(kPackage) + kM2 +
        ": d_model must be a multiple of 32 so that nheads = 2*d_model/64 is whole (profile constants "
        "headdim 64, expand 2); got " +
        std::to_string(d_model));
  return d_model;
}

void Mamba2BlockInference::check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                                        std::int64_t d_model) {
  const auto table = blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(d_model));
  mamba_api::check_weight_shape(kM2, spec_named(table, kM2, name), shape);
}

Mamba2BlockInference::Mamba2BlockInference(const NamedTensors& weights, double dt_lo, double dt_hi,
                                           std::string weight_format)
    : weight_format_(std::move(weight_format)) {
  check_keys(keys_of(weights));
  const std::int64_t d_model = check_norm_weight(view_named(weights, "block_norm.weight").shape);
  const auto table = blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(d_model));
  auto values = mamba_api::checked_copies<blocks::Mamba2Weights>(kM2, table, weights);
  // The limits go down unjudged (docs/blocks.md §2.1): a float64 -> float32 conversion, round to nearest
  // even.
  block_ = std::make_shared<const blocks::Mamba2Block>(std::move(values), static_cast<float>(dt_lo),
                                                       static_cast<float>(dt_hi));
}

Mamba2State Mamba2BlockInference::allocate_state(std::int64_t batch_size) const {
  if (batch_size < 1)
    throw_value_error(std::string(kPackage) + kM2 + ": batch_size must be positive, got " +
                      std::to_string(batch_size));
  return ApiAccess::wrap(blocks::Mamba2State(batch_size, block_->dims()));
}

std::vector<float> Mamba2BlockInference::call(const TensorView& x, Mamba2State* state, bool step,
                                              bool reference, Mamba2Report* report,
                                              std::vector<float>* h_last,
                                              const Mamba2Report* superseded) const {
  const std::string what = std::string(kM2) + (step ? ".step" : ".forward");
  if (step) require_step_state(state != nullptr, kM2);
  const auto [batch, length] = mamba_api::check_tokens(what, x.shape, d_model(), step);
  std::optional<blocks::Mamba2State> fresh;
  blocks::Mamba2State* engine = state ? &ApiAccess::engine(*state) : &fresh.emplace(batch, block_->dims());
  const blocks::Mamba2Dims& have = engine->dims();
  const std::int64_t cd = conv_dim(), H = nheads(), Q = blocks::Mamba2Dims::kChunk;
  mamba_api::check_state_buffer(what, "conv_window",
                                {engine->batch(), have.conv_dim, blocks::Mamba2Dims::kConv},
                                {batch, cd, blocks::Mamba2Dims::kConv});
  mamba_api::check_state_buffer(
      what, "h", {engine->batch(), have.nheads, blocks::Mamba2Dims::kHeadDim, blocks::Mamba2Dims::kState},
      {batch, H, blocks::Mamba2Dims::kHeadDim, blocks::Mamba2Dims::kState});
  mamba_api::check_state_buffer(what, "buffer_xbc", {engine->batch(), Q, have.conv_dim}, {batch, Q, cd});
  mamba_api::check_state_buffer(what, "buffer_dtraw", {engine->batch(), Q, have.nheads}, {batch, Q, H});
  if (x.data == nullptr) throw_value_error(kPackage + what + ": x has no data");
  std::vector<float> y(static_cast<std::size_t>(batch * length * d_model()));
  const std::string entry = step ? "mamba2_decode_step" : "mamba2_forward";
  if (reference) {
    block_->forward_reference(x.data, batch, length, *engine, y.data(), entry, h_last);
  } else {
    auto made = block_->forward(x.data, batch, length, *engine, y.data(), entry,
                                superseded ? ApiAccess::engine(*superseded) : nullptr);
    if (report) *report = ApiAccess::wrap(std::move(made));
  }
  return y;
}

std::vector<float> Mamba2BlockInference::forward(const TensorView& x, Mamba2State* state,
                                                 Mamba2Report* report, const Mamba2Report* superseded) const {
  return call(x, state, false, false, report, nullptr, superseded);
}
std::vector<float> Mamba2BlockInference::step(const TensorView& x, Mamba2State* state, Mamba2Report* report,
                                              const Mamba2Report* superseded) const {
  return call(x, state, true, false, report, nullptr, superseded);
}
std::vector<float> Mamba2BlockInference::forward_reference(const TensorView& x, Mamba2State* state,
                                                           std::vector<float>* h_last) const {
  return call(x, state, false, true, nullptr, h_last, nullptr);
}
std::vector<float> Mamba2BlockInference::step_reference(const TensorView& x, Mamba2State* state,
                                                        std::vector<float>* h_last) const {
  return call(x, state, true, true, nullptr, h_last, nullptr);
}

void Mamba2BlockInference::backward() const {
  throw_not_implemented(std::string(kPackage) + "Mamba2BlockInference" + kBackwardSentence);
}

// ------------------------------------------------------------------------------ shapes, weights, checks

void Mamba1BlockInference::check_tokens(const std::vector<std::int64_t>& shape, bool step,
                                        const std::string& what) const {
  mamba_api::check_tokens(what, shape, d_model(), step);
}
std::int64_t Mamba1BlockInference::d_model() const { return block_->dims().d_model; }
std::int64_t Mamba1BlockInference::d_inner() const { return block_->dims().d_inner; }
std::int64_t Mamba1BlockInference::dt_rank() const { return block_->dims().dt_rank; }
std::vector<TensorInfo> Mamba1BlockInference::weight_table() const {
  return tensor_infos(blocks::mamba1_tensors(block_->dims()));
}
std::vector<float> Mamba1BlockInference::weight(std::size_t index) const {
  check_weight_index(index, blocks::kMamba1TensorCount, std::string(kPackage) + kM1);
  return block_->weights()[index];
}

void Mamba2BlockInference::check_tokens(const std::vector<std::int64_t>& shape, bool step,
                                        const std::string& what) const {
  mamba_api::check_tokens(what, shape, d_model(), step);
}
std::int64_t Mamba2BlockInference::d_model() const { return block_->dims().d_model; }
std::int64_t Mamba2BlockInference::d_inner() const { return block_->dims().d_inner; }
std::int64_t Mamba2BlockInference::nheads() const { return block_->dims().nheads; }
std::int64_t Mamba2BlockInference::conv_dim() const { return block_->dims().conv_dim; }
std::pair<float, float> Mamba2BlockInference::dt_limit() const { return block_->dt_limit(); }
std::vector<TensorInfo> Mamba2BlockInference::weight_table() const {
  return tensor_infos(blocks::mamba2_tensors(block_->dims()));
}
std::vector<float> Mamba2BlockInference::weight(std::size_t index) const {
  check_weight_index(index, blocks::kMamba2TensorCount, std::string(kPackage) + kM2);
  return block_->weights()[index];
}

// ------------------------------------------------------------------------------ Mamba1State

Mamba1State::Mamba1State(std::unique_ptr<blocks::Mamba1State> impl) : impl_(std::move(impl)) {}
Mamba1State::Mamba1State(std::int64_t batch_size, std::int64_t d_inner)
    : impl_(std::make_unique<blocks::Mamba1State>(batch_size, d_inner)) {}
Mamba1State::Mamba1State(Mamba1State&&) noexcept = default;
Mamba1State& Mamba1State::operator=(Mamba1State&&) noexcept = default;
Mamba1State::~Mamba1State() = default;
Mamba1State Mamba1State::clone() const { return ApiAccess::wrap(impl_->clone()); }
std::int64_t Mamba1State::batch() const { return impl_->batch(); }
std::int64_t Mamba1State::d_inner() const { return impl_->d_inner(); }
const float* Mamba1State::conv_window() const { return std::as_const(*impl_).conv_window(); }
const float* Mamba1State::h() const { return std::as_const(*impl_).h(); }
std::int64_t Mamba1State::conv_window_size() const { return impl_->conv_window_size(); }
std::int64_t Mamba1State::h_size() const { return impl_->h_size(); }
Mamba1State::Pin Mamba1State::pin_conv_window() { return impl_->pin_conv_window(); }
Mamba1State::Pin Mamba1State::pin_h() { return impl_->pin_h(); }
bool Mamba1State::pinned() const { return impl_->pinned(); }

// ------------------------------------------------------------------------------ Mamba2State, report

Mamba2State::Mamba2State(std::unique_ptr<blocks::Mamba2State> impl) : impl_(std::move(impl)) {}
Mamba2State::Mamba2State(std::int64_t batch_size, std::int64_t d_model)
    : impl_(std::make_unique<blocks::Mamba2State>(batch_size, blocks::Mamba2Dims::for_d_model(d_model))) {}
Mamba2State::Mamba2State(Mamba2State&&) noexcept = default;
Mamba2State& Mamba2State::operator=(Mamba2State&&) noexcept = default;
Mamba2State::~Mamba2State() = default;
Mamba2State Mamba2State::clone() const { return ApiAccess::wrap(impl_->clone()); }
std::int64_t Mamba2State::batch() const { return impl_->batch(); }
std::int64_t Mamba2State::d_model() const { return impl_->dims().d_model; }
std::int64_t Mamba2State::nheads() const { return impl_->dims().nheads; }
std::int64_t Mamba2State::conv_dim() const { return impl_->dims().conv_dim; }

const char* Mamba2State::buffer_name(Buffer buffer) {
  static const char* const names[] = {"conv_window", "h", "buffer_xbc", "buffer_dtraw"};
  return names[buffer];
}

std::vector<std::int64_t> Mamba2State::buffer_shape(Buffer buffer) const {
  using D = blocks::Mamba2Dims;
  const std::int64_t b = batch(), cd = conv_dim(), h = nheads();
  switch (buffer) {
    case kConvWindow:
      return {b, cd, D::kConv};
    case kH:
      return {b, h, D::kHeadDim, D::kState};
    case kBufferXbc:
      return {b, D::kChunk, cd};
    case kBufferDtraw:
      return {b, D::kChunk, h};
  }
  throw_value_error("Mamba2State: no buffer " + std::to_string(static_cast<int>(buffer)));
}

const float* Mamba2State::conv_window() const { return impl_->conv_window(); }
const float* Mamba2State::h() const { return impl_->h(); }
const float* Mamba2State::buffer_xbc() const { return impl_->buffer_xbc(); }
const float* Mamba2State::buffer_dtraw() const { return impl_->buffer_dtraw(); }
std::int64_t Mamba2State::conv_window_size() const { return impl_->conv_window_size(); }
std::int64_t Mamba2State::h_size() const { return impl_->h_size(); }
std::int64_t Mamba2State::buffer_xbc_size() const { return impl_->buffer_xbc_size(); }
std::int64_t Mamba2State::buffer_dtraw_size() const { return impl_->buffer_dtraw_size(); }

Mamba2State::Pin Mamba2State::pin(Buffer buffer) {
  impl_->settle_pending_report();
  return impl_->pin(static_cast<blocks::Mamba2State::Piece>(buffer));
}
std::int64_t Mamba2State::buffered_tokens() const { return impl_->buffered_tokens(); }
void Mamba2State::set_buffered_tokens(std::int64_t value) {
  impl_->settle_pending_report();
  impl_->set_buffered_tokens(value);
}
void Mamba2State::settle_pending_report() { impl_->settle_pending_report(); }
bool Mamba2State::trusted() const { return impl_->trusted(); }
bool Mamba2State::pinned() const { return impl_->pinned(); }

std::vector<float> Mamba2Report::h_last() const {
  if (!impl_) throw_value_error("Mamba2Report: no call has filled this report");
  return impl_->h_last();
}
bool Mamba2Report::evaluated() const { return impl_ && impl_->evaluated(); }

}  // namespace samebits
