// Public API: argument validation with upstream wording, then the engine.
#include "api/samebits.hpp"

#include <algorithm>
#include <utility>

#include "io/mlp_checkpoint.hpp"
#include "models/samba_config.hpp"
#include "numerics/fp.hpp"

namespace samebits {
namespace {

constexpr const char* kTrainer = "SmallMLPTrainer ";

bool all_finite(const float* data, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    if (!fp::is_finite(data[i])) return false;
  return true;
}

// Validates one MLP tensor (shape, then finiteness) and returns an owned copy.
std::vector<float> checked_copy(const TensorView& view, const models::TensorSpec& spec) {
  if (view.shape != spec.shape)
    throw_value_error(std::string(kTrainer) + spec.name + " must have shape " + shape_repr(spec.shape));
  if (view.data == nullptr && spec.elements() > 0)
    throw_value_error(std::string(kTrainer) + spec.name + " has no data");
  if (!all_finite(view.data, spec.elements()))
    throw_value_error(std::string(kTrainer) + spec.name + " must be finite");
  return std::vector<float>(view.data, view.data + spec.elements());
}

}  // namespace

const char* version() { return SAMEBITS_VERSION; }
const char* neural_arithmetic_profile() { return "mojolearn.neural-training.fp32.v1"; }
const char* numeric_mode() { return "identical"; }

std::int64_t TensorView::elements() const {
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  return count;
}

void check_ragged_lengths(const std::vector<std::int64_t>& lengths, std::int64_t batch, std::int64_t length,
                          const std::string& what) {
  if (static_cast<std::int64_t>(lengths.size()) != batch)
    throw_value_error(what + ": lengths has " + std::to_string(lengths.size()) +
                      " entries but the batch has B = " + std::to_string(batch));
  for (std::size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1 || lengths[i] > length)
      throw_value_error(what + ": lengths[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) +
                        " is outside [1, L = " + std::to_string(length) +
                        "] (right padding: a row has at least one real position and at most L)");
}

std::string python_name_list(const std::vector<std::string>& names) {
  std::string text = "[";
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + models::python_str_repr(names[i]);
  return text + "]";
}

void check_weight_key_set(const std::vector<std::string>& given, const std::vector<std::string>& expected,
                          const std::string& prefix, const std::string& names_note) {
  std::vector<std::string> missing, unknown;
  for (const auto& name : expected)
    if (std::find(given.begin(), given.end(), name) == given.end()) missing.push_back(name);
  for (const auto& name : given)
    if (std::find(expected.begin(), expected.end(), name) == expected.end()) unknown.push_back(name);
  if (missing.empty() && unknown.empty()) return;
  std::string message = prefix + ": weight dict mismatch";
  if (!missing.empty()) message += "; missing " + python_name_list(missing);
  if (!unknown.empty()) message += "; unknown " + python_name_list(unknown);
  throw_value_error(message + ". The exact key set is " + python_name_list(expected) + " -- " + names_note);
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

std::array<std::int64_t, 2> check_token_shape(const std::vector<std::int64_t>& shape, std::int64_t d_model,
                                              bool step, const std::string& what) {
  std::vector<std::int64_t> s = shape;
  if (step && s.size() == 2) s = {s[0], 1, s[1]};
  if (s.size() != 3)
    throw_value_error(what + ": x must be (B, L, d_model)" +
                      (step ? " -- or (B, d_model) for a step --" : "") + ", got " +
                      std::to_string(shape.size()) + "-D shape " + shape_repr(shape));
  if (s[2] != d_model)
    throw_value_error(what + ": x has d_model " + std::to_string(s[2]) + ", the weights have " +
                      std::to_string(d_model));
  if (step && s[1] != 1)
    throw_value_error(what + ": a decode step takes exactly one token per batch row, got L = " +
                      std::to_string(s[1]) + "; use forward() for prefill");
  return {s[0], s[1]};
}

MLPInference::MLPInference(const TensorView& weight1, const TensorView& bias1, const TensorView& weight2,
                           const TensorView& bias2, std::string weight_format)
    : weight_format_(std::move(weight_format)) {
  if (weight_format_ != "float32" && weight_format_ != "bfloat16" && weight_format_ != "int8")
    throw_value_error("MLPInference: unknown weight format '" + weight_format_ + "'");
  const auto& specs = models::mlp_tensors();
  models::MlpWeights weights;
  weights.weight1 = checked_copy(weight1, specs[0]);
  weights.bias1 = checked_copy(bias1, specs[1]);
  weights.weight2 = checked_copy(weight2, specs[2]);
  weights.bias2 = checked_copy(bias2, specs[3]);
  model_ = std::make_shared<const models::Mlp>(std::move(weights));
}

namespace {
// A packed matrix as a float32 view over its materialized values (kept alive by `storage`).
TensorView materialized_view(const lowbit::PackedMatrix& packed, std::vector<float>& storage) {
  storage = lowbit::materialize(packed);
  return {storage.data(), {static_cast<std::int64_t>(packed.rows), static_cast<std::int64_t>(packed.cols)}};
}

std::string packed_format(const lowbit::PackedMatrix& a, const lowbit::PackedMatrix& b) {
  if (a.format != b.format)
    throw_value_error(std::string("samebits.lowbit: weights mix formats ['") + lowbit::format_name(a.format) +
                      "', '" + lowbit::format_name(b.format) + "']; store a model one way");
  return lowbit::format_name(a.format);
}
}  // namespace

MLPInference::MLPInference(const lowbit::PackedMatrix& weight1, const TensorView& bias1,
                           const lowbit::PackedMatrix& weight2, const TensorView& bias2) {
  std::vector<float> w1, w2;
  const std::string format = packed_format(weight1, weight2);
  *this = MLPInference(materialized_view(weight1, w1), bias1, materialized_view(weight2, w2), bias2, format);
}

MLPInference MLPInference::from_checkpoint(const std::string& path) {
  const io::MlpCheckpoint checkpoint = io::read_mlp_checkpoint(path);
  return MLPInference({checkpoint.weight1.data(), {16, 8}}, {checkpoint.bias1.data(), {16}},
                      {checkpoint.weight2.data(), {3, 16}}, {checkpoint.bias2.data(), {3}});
}

void MLPInference::check_tensor(const std::string& name, const TensorView& value) {
  for (const auto& spec : models::mlp_tensors()) {
    if (name == spec.name) {
      checked_copy(value, spec);
      return;
    }
  }
  throw_value_error("MLPInference has no weight named '" + name + "'");
}

void MLPInference::check_batch_shape(const std::vector<std::int64_t>& shape) {
  if (shape.size() != 2 || shape[1] != models::kMlpInputs)
    throw_value_error(std::string(kTrainer) + "X must have shape (batch, 8)");
  if (shape[0] < 1 || shape[0] > models::kMlpMaxRows)
    throw_value_error(std::string(kTrainer) + "batch must be in [1, 256]");
}

void MLPInference::check_batch(const TensorView& X) const {
  check_batch_shape(X.shape);
  if (X.data == nullptr) throw_value_error(std::string(kTrainer) + "X has no data");
  if (!all_finite(X.data, X.elements())) throw_value_error(std::string(kTrainer) + "X must be finite");
}

std::vector<float> MLPInference::predict_logits(const TensorView& X) const {
  check_batch(X);
  std::vector<float> logits(static_cast<std::size_t>(X.shape[0] * models::kMlpOutputs));
  model_->predict_logits(X.data, X.shape[0], logits.data());
  if (!all_finite(logits.data(), static_cast<std::int64_t>(logits.size())))
    throw_runtime_error("MLPInference returned an invalid result");
  return logits;
}

std::vector<float> MLPInference::predict_logits_reference(const TensorView& X) const {
  check_batch(X);
  std::vector<float> logits(static_cast<std::size_t>(X.shape[0] * models::kMlpOutputs));
  model_->predict_logits_reference(X.data, X.shape[0], logits.data());
  if (!all_finite(logits.data(), static_cast<std::int64_t>(logits.size())))
    throw_runtime_error("MLPInference returned an invalid result");
  return logits;
}

std::string MLPInference::repr() const { return "MLPInference(architecture=[8, 16, 3])"; }

}  // namespace samebits
