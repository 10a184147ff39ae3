// Public C++ API of the Mamba-3 block (docs/api.md §6): Mamba3BlockInference with upstream's validation
// wording over the exact block of src/blocks/mamba3/mamba3.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/samebits.hpp"
#include "blocks/mamba3/mamba3.hpp"

namespace samebits {

using Mamba3State = blocks::Mamba3State;
using Mamba3Reports = blocks::Mamba3Reports;

class Mamba3BlockInference {
 public:
  // The nine named weights (docs/blocks.md §3.1), in any order: key set, the norm's rank, d_model (a multiple
  // of 32) and every shape are refused with upstream's wording ("samebits Mamba3Block: …"). The values
  // are copied. weight_format records how the weights were given ("float32", "bfloat16", "int8").
  explicit Mamba3BlockInference(const std::vector<std::pair<std::string, TensorView>>& weights,
                                std::string weight_format = "float32");

  // The checks the constructor runs, exposed so the Python layer can interleave its dtype refusals in
  // upstream's order: the key set, then per tensor (block_norm.weight first) the shape.
  static std::vector<std::string> weight_names();
  static void check_keys(const std::vector<std::string>& given);
  static std::int64_t check_norm_weight(const std::vector<std::int64_t>& shape);  // returns d_model
  static void check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                           std::int64_t d_model);
  // x's rank, width and (for a step) length, in upstream's order; returns (B, L). A step admits (B, d_model).
  void check_tokens(const std::vector<std::int64_t>& shape, bool step) const;

  // A zero state for batch_size rows ("batch_size must be positive" otherwise).
  Mamba3State allocate_state(std::int64_t batch_size) const;

  // y (B, L, d_model) for x (B, L, d_model). state == nullptr runs from a zero state and discards it;
  // otherwise the state is read and updated in place. reports (optional) receives h_last_, k_last_,
  // v_last_ and theta_last_.
  std::vector<float> forward(const TensorView& x, Mamba3State* state = nullptr,
                             Mamba3Reports* reports = nullptr) const;
  // One token per batch row: x (B, 1, d_model) or (B, d_model); the state is required.
  std::vector<float> step(const TensorView& x, Mamba3State* state, Mamba3Reports* reports = nullptr) const;
  // The same entry points through the scalar twin (tests and cross-checks).
  std::vector<float> forward_reference(const TensorView& x, Mamba3State* state = nullptr,
                                       Mamba3Reports* reports = nullptr) const;
  std::vector<float> step_reference(const TensorView& x, Mamba3State* state,
                                    Mamba3Reports* reports = nullptr) const;
  // The four reports of the call that left `state` as it is (valid while the state has not changed since).
  Mamba3Reports reports_of(const Mamba3State& state) const { return block_->reports_of(state); }
  // Always NotImplementedError: inference is forward only.
  [[noreturn]] void backward() const;

  const blocks::Mamba3Dims& dims() const { return block_->dims(); }
  // A fresh copy of every weight, bit for bit (the block keeps its projections only as packed panels).
  blocks::Mamba3Weights weights() const { return block_->weights(); }
  std::vector<float> weight(int index) const { return block_->weight(index); }
  const std::string& weight_format() const { return weight_format_; }
  // The engine block, shared (immutable) with every copy of this object; a Samba stack runs it directly.
  std::shared_ptr<const blocks::Mamba3Block> block() const { return block_; }

 private:
  std::vector<float> call(const TensorView& x, Mamba3State* state, Mamba3Reports* reports, bool step,
                          bool reference) const;

  std::shared_ptr<const blocks::Mamba3Block> block_;
  std::string weight_format_;
};

}  // namespace samebits
