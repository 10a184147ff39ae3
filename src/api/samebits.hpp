// The public C++ API of samebits: validated entry points over the engine, with upstream refusal wording.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/thread_pool.hpp"
#include "models/mlp.hpp"
#include "numerics/lowbit.hpp"

namespace samebits {

const char* version();
// The neural arithmetic profile this engine implements (docs/formats.md §8.3).
const char* neural_arithmetic_profile();
// The numeric mode every surface runs in.
const char* numeric_mode();

// Worker threads: samebits::set_num_threads(n) / samebits::num_threads() from core/thread_pool.hpp
// (default: SAMEBITS_NUM_THREADS or every core); the bits never depend on it.

// A borrowed, C-contiguous float32 array with its shape.
struct TensorView {
  const float* data = nullptr;
  std::vector<std::int64_t> shape;
  std::int64_t elements() const;
};

// "(16, 8)" / "(16,)": Python's repr of a shape tuple, as upstream messages print it.
std::string shape_repr(const std::vector<std::int64_t>& shape);

// The x-shape refusals the block classes share: x is (B, L, d_model); a step also takes (B, d_model) and
// needs L = 1. `what` starts every message. Returns {B, L}; whether B and L are positive is the caller's
// check (the blocks differ in when they make it).
std::array<std::int64_t, 2> check_token_shape(const std::vector<std::int64_t>& shape, std::int64_t d_model,
                                              bool step, const std::string& what);

// Ragged-batch lengths (docs/api.md §11): `batch` entries, each in [1, length]; refused by name with `what`
// ("samebits TransformerBlock.forward") otherwise.
void check_ragged_lengths(const std::vector<std::int64_t>& lengths, std::int64_t batch, std::int64_t length,
                          const std::string& what);

// The one ragged spelling (docs/blocks.md §6): a copy of x [batch, length, width] whose padding positions
// hold zeros (+0.0 / id 0) goes through `run`, whose [batch, length, out_width] result gets its padding
// positions overwritten with +0.0. No arithmetic changes, so real positions equal each row run alone.
template <typename T, typename Run>
std::vector<float> ragged_run(const T* x, std::int64_t batch, std::int64_t length, std::int64_t width,
                              const std::vector<std::int64_t>& lengths, std::int64_t out_width, Run&& run) {
  std::vector<T> padded(static_cast<std::size_t>(batch * length * width), T{});
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(x + b * length * width, x + (b * length + lengths[static_cast<std::size_t>(b)]) * width,
              padded.begin() + b * length * width);
  std::vector<float> out = run(padded.data());
  for (std::int64_t b = 0; b < batch; ++b)
    std::fill(out.begin() + (b * length + lengths[static_cast<std::size_t>(b)]) * out_width,
              out.begin() + (b + 1) * length * out_width, 0.0f);
  return out;
}

// Python's repr of a list of names: "['a', 'b']" (each name as Python's repr of a str).
std::string python_name_list(const std::vector<std::string>& names);

// The block weight-dict check: "<prefix>: weight dict mismatch; missing [...]; unknown [...]. The exact key
// set is [...] -- <names_note>" (a part only when non-empty), a ValueError; nothing when the sets agree.
void check_weight_key_set(const std::vector<std::string>& given, const std::vector<std::string>& expected,
                          const std::string& prefix, const std::string& names_note);

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

  const models::MlpWeights& weights() const { return model_->weights(); }
  const std::string& weight_format() const { return weight_format_; }
  std::string repr() const;

 private:
  void check_batch(const TensorView& X) const;

  std::shared_ptr<const models::Mlp> model_;
  std::string weight_format_;
};

}  // namespace samebits
