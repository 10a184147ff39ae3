// TransformerManyStep: one block's layer call inside a stack's step_many, its state refusals made up front.
#pragma once

#include <optional>
#include <samebits/transformer.hpp>
#include <vector>

#include "api/transformer_state.hpp"

namespace samebits {

// The one-row states of one Transformer layer, opened for a stack's step_many (docs/api.md §18): the
// constructor makes every state refusal TransformerBlockInference::step_many makes after its pointer and
// duplicate checks (the stack's own), in its words, and scans each cache now, so that a stack checks every
// layer before any layer runs and step() checks only its input rows. The caches commit when step() returns
// (while this layer's rows are still hot), never when an exception unwinds them.
class TransformerManyStep {
 public:
  TransformerManyStep(const TransformerBlockInference& block, const std::vector<TransformerState*>& states);
  TransformerManyStep(const TransformerManyStep&) = delete;
  TransformerManyStep& operator=(const TransformerManyStep&) = delete;

  // Row i of x [count, d_model] continues state i, giving row i of y [count, d_model]; the block's step_many
  // with the states already checked. Once: it closes the caches.
  void step(const float* x, float* y);

 private:
  const blocks::TransformerBlock& block_;
  std::vector<std::optional<KvCacheState::EngineAccess>> access_;
  std::vector<blocks::KvCache*> caches_;
};

}  // namespace samebits
