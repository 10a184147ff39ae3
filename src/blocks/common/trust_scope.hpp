// TrustScope: the trust protocol of one block call on a Mamba-2 or Mamba-3 state, in one RAII object.
#pragma once

#include <cstdint>
#include <vector>

#include "blocks/common/block_support.hpp"

namespace samebits::blocks {

// A state is trusted when every value in it is known finite, so that a call may skip its non-finite scan
// (docs/architecture.md, "States, trust and pins"). A call opens a scope before its first write: the state
// becomes untrusted, so a call that throws half-way leaves it to be scanned by the next one. The fast path
// lists, before writing, every span it will write; commit() after its last write checks exactly those and
// trusts the state again when they are finite and no pin is alive. The scalar twin opens an unchecked scope
// and never commits: the next fast call scans what it wrote.
template <typename State>
class TrustScope {
 public:
  using Access = typename State::EngineAccess;

  // The fast path of a call of `length` new tokens.
  TrustScope(State& state, std::int64_t length) : state_(state), checked_(true) {
    written_ = Access(state).spans_written_by(length);
    Access(state).untrust();
  }
  // The scalar twin (or any call that does not check its writes).
  explicit TrustScope(State& state) : state_(state), checked_(false) { Access(state).untrust(); }
  TrustScope(const TrustScope&) = delete;
  TrustScope& operator=(const TrustScope&) = delete;

  // After the call's last write (fast path only): trusted iff every written span is finite and unpinned.
  void commit() {
    if (checked_) Access(state_).trust_after_call(spans_finite(written_));
  }

 private:
  State& state_;
  bool checked_;
  std::vector<typename State::Span> written_;
};

}  // namespace samebits::blocks
