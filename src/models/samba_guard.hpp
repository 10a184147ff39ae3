// State safety of a Samba stack call: every refusal a layer can raise from its state is raised before any
// layer moves, and what the layers below wrote is put back when a layer refuses the input they made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/samba.hpp"

namespace samebits::models {

// Every refusal of a call of (batch, length) that does not depend on a layer's input, layer by layer in
// stack order, without touching any state: the state count and kinds, then each block's own checks on
// its state (bounds, batch and heads, buffered_tokens, Input_States, non-finite contents, KV overflow).
// The Mamba-3 states are scanned here; the KV caches too with kv_scan = kNow, while with kAtAppend each
// attention layer scans its cache as it restrides it, and a caller that sees any refusal puts the stack
// back and runs this again with kNow, so the refusal raised is the one the up-front scan would raise.
void check_layer_states(const SambaModel& model, std::int64_t batch, std::int64_t length,
                        const std::vector<SambaLayerState>& states, const std::string& what,
                        blocks::StateScan kv_scan = blocks::StateScan::kNow);

// What the layers of one call overwrote, saved just before each ran, so that a refusal by a later layer
// (its input x non-finite: finite but huge weights can overflow a layer's output) leaves every state as
// it was. A record costs O(the call's new data): the KV rows appended, the Mamba-3 buffer rows and angles
// written; only a Mamba-3 call that seals a chunk (once per 64 tokens) or consumes Input_States also
// saves h.
class StackUndo {
 public:
  // Before a layer runs on `state` for `length` new tokens (every check already passed).
  void save(const SambaModel& model, std::int64_t layer, const SambaLayerState& state, std::int64_t length);
  // After that layer returned: its record now describes a change that happened.
  void commit() { committed_ = records_.size(); }
  // Puts every committed layer back, last first.
  void restore();

 private:
  struct Span {  // a saved run of floats
    float* at;
    std::vector<float> values;
  };
  struct Record {
    blocks::Mamba3State* mamba3 = nullptr;
    blocks::KvCache* kv = nullptr;
    std::int64_t buffered_tokens = 0;  // Mamba-3 scalars
    bool pending = false;
    std::int64_t cached_tokens = 0;  // KV: the packed stride before the call
    std::int64_t kv_blocks = 0, head_dim = 0;
    bool kv_packed = false;  // full causal and packed: the call restrided the packed region
    std::vector<Span> spans;
  };
  std::vector<Record> records_;
  std::size_t committed_ = 0;
};

}  // namespace samebits::models
