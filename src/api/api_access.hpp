// ApiAccess: how the api layer (and the engine's own tests) reach the engine objects behind the public
// handles of include/samebits/. Frontends never include this header (tools/check_include_rules.py).
#pragma once

#include <memory>
#include <samebits/samebits.hpp>
#include <utility>
#include <vector>

#include "api/transformer_state.hpp"
#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"
#include "models/samba.hpp"
#include "models/samba_config.hpp"

namespace samebits {

struct ApiAccess {
  // States: the engine object a public state holds, and a public state around a new engine object.
  static KvCacheState& engine(TransformerState& s) { return *s.impl_; }
  static const KvCacheState& engine(const TransformerState& s) { return *s.impl_; }
  static blocks::Mamba1State& engine(Mamba1State& s) { return *s.impl_; }
  static const blocks::Mamba1State& engine(const Mamba1State& s) { return *s.impl_; }
  static blocks::Mamba2State& engine(Mamba2State& s) { return *s.impl_; }
  static const blocks::Mamba2State& engine(const Mamba2State& s) { return *s.impl_; }
  static blocks::Mamba3State& engine(Mamba3State& s) { return *s.impl_; }
  static const blocks::Mamba3State& engine(const Mamba3State& s) { return *s.impl_; }

  static Mamba1State wrap(blocks::Mamba1State s) {
    return Mamba1State(std::make_unique<blocks::Mamba1State>(std::move(s)));
  }
  static Mamba2State wrap(blocks::Mamba2State s) {
    return Mamba2State(std::make_unique<blocks::Mamba2State>(std::move(s)));
  }
  static Mamba3State wrap(blocks::Mamba3State s) {
    return Mamba3State(std::make_unique<blocks::Mamba3State>(std::move(s)));
  }

  static TransformerBlockInference wrap(std::shared_ptr<const blocks::TransformerBlock> block,
                                        std::string weight_format) {
    return TransformerBlockInference(std::move(block), std::move(weight_format));
  }

  // A Mamba-2 call's report.
  static Mamba2Report wrap(std::shared_ptr<blocks::Mamba2Report> report) {
    Mamba2Report out;
    out.impl_ = std::move(report);
    return out;
  }
  static blocks::Mamba2Report* engine(const Mamba2Report& r) { return r.impl_.get(); }

  // Models: the engine blocks and the Samba model behind the public classes.
  static const std::shared_ptr<const blocks::TransformerBlock>& block(const TransformerBlockInference& m) {
    return m.block_;
  }
  static const std::shared_ptr<const blocks::Mamba1Block>& block(const Mamba1BlockInference& m) {
    return m.block_;
  }
  static const std::shared_ptr<const blocks::Mamba2Block>& block(const Mamba2BlockInference& m) {
    return m.block_;
  }
  static const std::shared_ptr<const blocks::Mamba3Block>& block(const Mamba3BlockInference& m) {
    return m.block_;
  }
  static const models::SambaModel& model(const SambaInference& m) { return *m.model_; }
  // The shared objects behind a model (their identity keys the fingerprint cache, src/api/state_file.cpp).
  static const std::shared_ptr<const models::SambaModel>& shared_model(const SambaInference& m) {
    return m.model_;
  }
  static const std::shared_ptr<const CausalLMModel>& shared_model(const CausalLM& m) { return m.model_; }
  // A CausalLM's embedding, final norm and (untied) head as parameters() names and copies them.
  static std::vector<NamedTensorCopy> end_tensors(const CausalLM& m);
  static const models::SambaConfig& engine(const SambaConfig& c) { return *c.impl_; }
};

}  // namespace samebits
