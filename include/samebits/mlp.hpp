// MLPInference: the forward-only SmallMLPTrainer network (8 -> 16 ReLU -> 3) over exact fp32 arithmetic.
#pragma once

#include <cstdint>
#include <memory>
#include <samebits/lowbit.hpp>
#include <samebits/tensor.hpp>
#include <string>
#include <vector>

namespace samebits {

namespace models {
class Mlp;  // the engine model (opaque here)
}

// Forward-only SmallMLPTrainer network (docs/api.md §1). Immutable after construction; copies share the
// model.
class MLPInference {
 public:
  // Shapes (16, 8), (16,), (3, 16), (3,); all finite. The values are copied.
  // weight_format records how the matrices were given ("float32", "bfloat16", "int8").
  MLPInference(const TensorView& weight1, const TensorView& bias1, const TensorView& weight2,
               const TensorView& bias2, std::string weight_format = "float32");
  // The two matrices packed by lowbit (both in one format): materialized exactly to float32 first,
  // and weight_format() records the format. Mixed formats are refused.
  MLPInference(const lowbit::PackedMatrix& weight1, const TensorView& bias1,
               const lowbit::PackedMatrix& weight2, const TensorView& bias2);
  // A SmallMLPTrainer checkpoint (docs/formats.md §4); every refusal is a ValueError.
  static MLPInference from_checkpoint(const std::string& path);

  // X: (rows, 8) with 1 <= rows <= 256, finite. Returns (rows, 3) logits, row-major.
  std::vector<float> predict_logits(const TensorView& X) const;
  // The same through the scalar twin (for tests and cross-checks).
  std::vector<float> predict_logits_reference(const TensorView& X) const;

  // The per-tensor check the constructor runs (shape, then finiteness), by parameter name.
  static void check_tensor(const std::string& name, const TensorView& value);
  // The batch-shape part of predict_logits' checks: (rows, 8) with 1 <= rows <= 256.
  static void check_batch_shape(const std::vector<std::int64_t>& shape);

  // The four tensors (weight1, bias1, weight2, bias2) with their shapes, and a copy of one by name.
  static std::vector<TensorInfo> weight_table();
  std::vector<float> weight(const std::string& name) const;
  const std::string& weight_format() const { return weight_format_; }
  std::string repr() const;

 private:
  void check_batch(const TensorView& X) const;

  std::shared_ptr<const models::Mlp> model_;
  std::string weight_format_;
};

}  // namespace samebits
