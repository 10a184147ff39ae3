// Mamba1Block, profile mojolearn.identical.mamba1.fp32.v1 (blocks.md 1): weights table, state, and the
// one forward function (stateless prefill, carried prefill and decode step are all this function).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "blocks/common/causal_conv.hpp"
#include "core/aligned_buffer.hpp"
#include "numerics/gemm.hpp"

namespace samebits::blocks {

// One named weight of a Mamba block: its shape, and the one alternative spelling some accept.
struct MambaTensor {
  const char* name;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> alt_shape;  // empty when there is none
  std::int64_t elements() const {
    std::int64_t count = 1;
    for (auto d : shape) count *= d;
    return count;
  }
};

struct Mamba1Dims {
  static constexpr std::int64_t kState = 16;
  static constexpr std::int64_t kConv = 4;
  std::int64_t d_model = 0;
  std::int64_t d_inner = 0;  // 2 * d_model
  std::int64_t dt_rank = 0;  // ceil(d_model / 16) (blocks.md Open point 9.1)
  std::int64_t x_proj_rows() const { return dt_rank + 2 * kState; }
  static Mamba1Dims for_d_model(std::int64_t d_model);
};

// The ten weights in upstream's _W_NAMES order.
inline constexpr std::size_t kMamba1TensorCount = 10;
enum Mamba1Tensor : std::size_t {
  kM1NormWeight,
  kM1InProj,
  kM1ConvWeight,
  kM1ConvBias,
  kM1XProj,
  kM1DtProjWeight,
  kM1DtProjBias,
  kM1ALog,
  kM1D,
  kM1OutProj,
};
std::array<MambaTensor, kMamba1TensorCount> mamba1_tensors(const Mamba1Dims& dims);

// Values in table order, each row-major with the table's element count.
using Mamba1Weights = std::array<std::vector<float>, kMamba1TensorCount>;

// The per-sequence state (blocks.md 1.2): conv_window [B, d_inner, 4] and h [B, d_inner, 16], zero at start.
class Mamba1State {
 public:
  Mamba1State(std::int64_t batch, std::int64_t d_inner);
  Mamba1State clone() const;

  std::int64_t batch() const { return batch_; }
  std::int64_t d_inner() const { return d_inner_; }
  float* conv_window() { return conv_window_.data(); }
  const float* conv_window() const { return conv_window_.data(); }
  float* h() { return h_.data(); }
  const float* h() const { return h_.data(); }
  std::int64_t conv_window_size() const { return batch_ * d_inner_ * Mamba1Dims::kConv; }
  std::int64_t h_size() const { return batch_ * d_inner_ * Mamba1Dims::kState; }

 private:
  Mamba1State() = default;
  std::int64_t batch_ = 0;
  std::int64_t d_inner_ = 0;
  AlignedBuffer<float> conv_window_;
  AlignedBuffer<float> h_;
};

// Immutable block: weights copied (shapes already validated), GEMM weights packed once.
class Mamba1Block {
 public:
  explicit Mamba1Block(Mamba1Weights weights);

  // x [batch, length, d_model] -> y [batch, length, d_model]; the state is read and updated in place.
  // `entry` names the call in refusals ("mamba1_forward: NaN in x at flat index 3 REFUSED").
  // Non-finite x, weights or state are refused before any arithmetic. The state's batch and width
  // must already match.
  void forward(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state, float* y,
               const std::string& entry) const;
  // The scalar twin: blocks.md 1.3 literally (gemm_reference, prim::, one cell at a time).
  void forward_reference(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state,
                         float* y, const std::string& entry) const;

  const Mamba1Dims& dims() const { return dims_; }
  const Mamba1Weights& weights() const { return weights_; }

 private:
  void refuse_non_finite_inputs(const float* x, std::int64_t count, const Mamba1State& state,
                                const std::string& entry) const;

  Mamba1Dims dims_;
  Mamba1Weights weights_;
  std::optional<std::size_t> non_finite_weight_;  // first weight (table order) holding NaN/inf
  std::vector<float> A_;                          // -F(expf(F(A_log))), [d_inner][16]
  CausalConv conv_;
  gemm::PackedRhs in_proj_;
  gemm::PackedRhs x_proj_;
  gemm::PackedRhs dt_proj_;
  gemm::PackedRhs out_proj_;
};

}  // namespace samebits::blocks
