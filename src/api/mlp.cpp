// MLPInference: upstream's validation, then the engine model.
#include "models/mlp.hpp"

#include <samebits/errors.hpp>
#include <samebits/mlp.hpp>
#include <utility>

#include "api/checks.hpp"
#include "io/mlp_checkpoint.hpp"
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

namespace {
// The logits of `rows` rows, written by `predict` (the fast or the reference path), refused when any is not
// finite.
template <typename Predict>
std::vector<float> finite_logits(std::int64_t rows, Predict&& predict) {
  std::vector<float> logits(static_cast<std::size_t>(rows * models::kMlpOutputs));
  predict(logits.data());
  if (!all_finite(logits.data(), static_cast<std::int64_t>(logits.size())))
    throw_runtime_error("MLPInference returned an invalid result");
  return logits;
}
}  // namespace

std::vector<float> MLPInference::predict_logits(const TensorView& X) const {
  check_batch(X);
  return finite_logits(X.shape[0], [&](float* out) { model_->predict_logits(X.data, X.shape[0], out); });
}

std::vector<float> MLPInference::predict_logits_reference(const TensorView& X) const {
  check_batch(X);
  return finite_logits(X.shape[0],
                       [&](float* out) { model_->predict_logits_reference(X.data, X.shape[0], out); });
}

std::string MLPInference::repr() const { return "MLPInference(architecture=[8, 16, 3])"; }

std::vector<TensorInfo> MLPInference::weight_table() {
  std::vector<TensorInfo> table;
  for (const auto& spec : models::mlp_tensors()) table.push_back({spec.name, spec.shape});
  return table;
}

std::vector<float> MLPInference::weight(const std::string& name) const {
  const models::MlpWeights& w = model_->weights();
  if (name == "weight1") return w.weight1;
  if (name == "bias1") return w.bias1;
  if (name == "weight2") return w.weight2;
  if (name == "bias2") return w.bias2;
  throw_value_error("MLPInference has no weight named '" + name + "'");
}

}  // namespace samebits
