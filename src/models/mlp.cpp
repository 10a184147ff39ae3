// MLP forward (docs/blocks.md §5): two GEMM_NT projections, flushed bias adds, ReLU to +0.0.
#include "models/mlp.hpp"

#include <utility>

#include "numerics/fp.hpp"

namespace samebits::models {
namespace {

using fp::F;

// h = F(F(pre) + F(bias)) per cell, then ReLU (h <= 0, including -0.0, becomes +0.0) when asked.
void add_bias(float* values, std::int64_t rows, std::int64_t cols, const float* bias, bool relu) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = values + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      float h = F(F(row[c]) + F(bias[c]));
      if (relu && h <= 0.0f) h = 0.0f;
      row[c] = h;
    }
  }
}

}  // namespace

const std::array<TensorSpec, 4>& mlp_tensors() {
  static const std::array<TensorSpec, 4> tensors{{{"weight1", {kMlpHidden, kMlpInputs}},
                                                  {"bias1", {kMlpHidden}},
                                                  {"weight2", {kMlpOutputs, kMlpHidden}},
                                                  {"bias2", {kMlpOutputs}}}};
  return tensors;
}

Mlp::Mlp(MlpWeights weights)
    : weights_(std::move(weights)),
      packed_weight1_(gemm::PackedRhs::from_transposed(weights_.weight1.data(), kMlpHidden, kMlpInputs,
                                                       Placement::kWeightPool)),
      packed_weight2_(gemm::PackedRhs::from_transposed(weights_.weight2.data(), kMlpOutputs, kMlpHidden,
                                                       Placement::kWeightPool)) {}

void Mlp::predict_logits(const float* X, std::int64_t rows, float* logits) const {
  std::vector<float> hidden(static_cast<std::size_t>(rows * kMlpHidden));  // [rows, 16]
  gemm::gemm_packed({X, kMlpInputs, 1}, rows, packed_weight1_, hidden.data());
  add_bias(hidden.data(), rows, kMlpHidden, weights_.bias1.data(), true);
  gemm::gemm_packed({hidden.data(), kMlpHidden, 1}, rows, packed_weight2_, logits);
  add_bias(logits, rows, kMlpOutputs, weights_.bias2.data(), false);
}

void Mlp::predict_logits_reference(const float* X, std::int64_t rows, float* logits) const {
  std::vector<float> hidden(static_cast<std::size_t>(rows * kMlpHidden));  // [rows, 16]
  gemm::gemm_reference(gemm::Orientation::NT, X, weights_.weight1.data(), hidden.data(), rows, kMlpHidden,
                       kMlpInputs);
  add_bias(hidden.data(), rows, kMlpHidden, weights_.bias1.data(), true);
  gemm::gemm_reference(gemm::Orientation::NT, hidden.data(), weights_.weight2.data(), logits, rows,
                       kMlpOutputs, kMlpHidden);
  add_bias(logits, rows, kMlpOutputs, weights_.bias2.data(), false);
}

}  // namespace samebits::models
