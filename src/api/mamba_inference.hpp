// Public C++ API of the Mamba blocks (docs/api.md §4, §5): Mamba1BlockInference and Mamba2BlockInference with
// upstream's validation wording, over the exact blocks of src/blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/samebits.hpp"
#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"

namespace samebits {

using Mamba1State = blocks::Mamba1State;
using Mamba2State = blocks::Mamba2State;
using Mamba2Report = blocks::Mamba2Report;

// Weights as given by the caller, in the caller's (dict) order.
using NamedTensors = std::vector<std::pair<std::string, TensorView>>;

// A block's refusal context: "samebits Mamba1Block" and the parameter-name table.
namespace mamba_api {
// "…: weight dict mismatch; missing [...]; unknown [...]. The exact key set is [...] -- …"
void check_weight_keys(const std::string& block, const std::vector<std::string>& expected,
                       const std::vector<std::string>& given);
// "<name> has shape (a, b), want (c, d)" (plus " (or (…))" where an alternative spelling exists).
void check_weight_shape(const std::string& block, const blocks::TensorSpec& spec,
                        const std::vector<std::int64_t>& shape);
// x rank, width, step length and positivity, in upstream's order; returns (B, L).
std::pair<std::int64_t, std::int64_t> check_tokens(const std::string& what,
                                                   const std::vector<std::int64_t>& shape,
                                                   std::int64_t d_model, bool step);
// "state buffer <name> has shape (…), want (…)".
void check_state_buffer(const std::string& what, const std::string& name,
                        const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& want);
}  // namespace mamba_api

class Mamba1BlockInference {
 public:
  // The ten named weights (docs/blocks.md §1.1); key set, norm rank and shapes refused with upstream wording.
  explicit Mamba1BlockInference(const NamedTensors& weights, std::string weight_format = "float32");

  // Checks the Python layer runs one by one so dtype refusals interleave in upstream's order.
  static std::vector<std::string> weight_names();
  static void check_keys(const std::vector<std::string>& given);
  static std::int64_t check_norm_weight(const std::vector<std::int64_t>& shape);  // returns d_model
  static void check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                           std::int64_t d_model);

  Mamba1State allocate_state(std::int64_t batch_size) const;
  // x (B, L, d_model). state == nullptr runs from a zero state and discards it; otherwise the state is
  // read and updated in place.
  std::vector<float> forward(const TensorView& x, Mamba1State* state = nullptr) const;
  // One token per batch row: x (B, 1, d_model) or (B, d_model); the state is required.
  std::vector<float> step(const TensorView& x, Mamba1State* state) const;
  // The same entry points through the scalar twin (tests and cross-checks).
  std::vector<float> forward_reference(const TensorView& x, Mamba1State* state = nullptr) const;
  std::vector<float> step_reference(const TensorView& x, Mamba1State* state) const;
  [[noreturn]] void backward() const;

  std::int64_t d_model() const { return block_->dims().d_model; }
  std::int64_t d_inner() const { return block_->dims().d_inner; }
  std::int64_t dt_rank() const { return block_->dims().dt_rank; }
  const blocks::Mamba1Weights& weights() const { return block_->weights(); }
  const std::string& weight_format() const { return weight_format_; }

 private:
  std::vector<float> call(const TensorView& x, Mamba1State* state, bool step, bool reference) const;

  std::shared_ptr<const blocks::Mamba1Block> block_;
  std::string weight_format_;
};

class Mamba2BlockInference {
 public:
  // The nine named weights (docs/blocks.md §2.1) and dt_limit (lo, hi), converted to float32 here.
  Mamba2BlockInference(const NamedTensors& weights, double dt_lo = 0.0, double dt_hi = 1.0 / 0.0,
                       std::string weight_format = "float32");

  static std::vector<std::string> weight_names();
  static void check_keys(const std::vector<std::string>& given);
  static std::int64_t check_norm_weight(const std::vector<std::int64_t>& shape);  // returns d_model
  static void check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                           std::int64_t d_model);

  Mamba2State allocate_state(std::int64_t batch_size) const;
  // As Mamba1BlockInference; additionally the report of this call (h_last) is returned through `report`
  // when it is not null. The report is computed on first read (see blocks::Mamba2Report). Pass the
  // previous call's report as `superseded` when it will be dropped unread, so it is not evaluated.
  std::vector<float> forward(const TensorView& x, Mamba2State* state = nullptr,
                             std::shared_ptr<Mamba2Report>* report = nullptr,
                             const Mamba2Report* superseded = nullptr) const;
  std::vector<float> step(const TensorView& x, Mamba2State* state,
                          std::shared_ptr<Mamba2Report>* report = nullptr,
                          const Mamba2Report* superseded = nullptr) const;
  std::vector<float> forward_reference(const TensorView& x, Mamba2State* state = nullptr,
                                       std::vector<float>* h_last = nullptr) const;
  std::vector<float> step_reference(const TensorView& x, Mamba2State* state,
                                    std::vector<float>* h_last = nullptr) const;
  [[noreturn]] void backward() const;

  std::int64_t d_model() const { return block_->dims().d_model; }
  std::int64_t d_inner() const { return block_->dims().d_inner; }
  std::int64_t nheads() const { return block_->dims().nheads; }
  std::int64_t conv_dim() const { return block_->dims().conv_dim; }
  std::pair<float, float> dt_limit() const { return block_->dt_limit(); }
  const blocks::Mamba2Weights& weights() const { return block_->weights(); }
  const std::string& weight_format() const { return weight_format_; }

 private:
  std::vector<float> call(const TensorView& x, Mamba2State* state, bool step, bool reference,
                          std::shared_ptr<Mamba2Report>* report, std::vector<float>* h_last,
                          const Mamba2Report* superseded) const;

  std::shared_ptr<const blocks::Mamba2Block> block_;
  std::string weight_format_;
};

}  // namespace samebits
