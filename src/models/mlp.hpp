// The SmallMLPTrainer network, 8 -> 16 ReLU -> 3 (docs/blocks.md §5): weights, tensor table and forward pass.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "blocks/common/tensor_spec.hpp"
#include "numerics/gemm.hpp"

namespace samebits::models {

// The blocks' tensor-spec type, the one every weights table of the engine uses.
using blocks::TensorSpec;

inline constexpr std::int64_t kMlpInputs = 8;
inline constexpr std::int64_t kMlpHidden = 16;
inline constexpr std::int64_t kMlpOutputs = 3;
inline constexpr std::int64_t kMlpMaxRows = 256;

// The four tensors in parameter order, torch [out, in] layout.
const std::array<TensorSpec, 4>& mlp_tensors();

struct MlpWeights {
  std::vector<float> weight1;  // [16, 8]
  std::vector<float> bias1;    // [16]
  std::vector<float> weight2;  // [3, 16]
  std::vector<float> bias2;    // [3]
};

// Immutable model: weights copied at construction, projections packed once for the fast GEMM.
class Mlp {
 public:
  explicit Mlp(MlpWeights weights);

  // logits[rows, 3] for X[rows, 8]; fast path (dispatched GEMM, thread pool).
  void predict_logits(const float* X, std::int64_t rows, float* logits) const;
  // The scalar twin: the same steps through gemm_reference.
  void predict_logits_reference(const float* X, std::int64_t rows, float* logits) const;

  const MlpWeights& weights() const { return weights_; }

 private:
  MlpWeights weights_;
  gemm::PackedRhs packed_weight1_;
  gemm::PackedRhs packed_weight2_;
};

}  // namespace samebits::models
