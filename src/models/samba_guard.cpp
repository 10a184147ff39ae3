// Samba call safety: the up-front state checks of every layer and the undo records of a call.
#include "models/samba_guard.hpp"

#include <algorithm>
#include <cstring>
#include <samebits/errors.hpp>

namespace samebits::models {
namespace {

void save_span(std::vector<float>& out, const float* at, std::int64_t count) {
  out.assign(at, at + std::max<std::int64_t>(count, 0));
}

}  // namespace

void check_layer_states(const SambaModel& model, std::int64_t batch, std::int64_t length,
                        const std::vector<SambaLayerState>& states, const std::string& what,
                        blocks::StateScan kv_scan) {
  if (static_cast<std::int64_t>(states.size()) != model.layer_count())
    throw_value_error(what + ": the state has " + std::to_string(states.size()) +
                      " layers but the stack has " + std::to_string(model.layer_count()));
  for (std::int64_t i = 0; i < model.layer_count(); ++i) {
    const SambaLayerState& state = states[static_cast<std::size_t>(i)];
    if (model.layer_kind(i) == SambaLayerKind::Mamba3) {
      if (state.mamba3 == nullptr)
        throw_value_error(what + ": layer " + std::to_string(i) + " needs a Mamba3State");
      model.mamba3(i).refuse(nullptr, batch, length, *state.mamba3, what.c_str(), true);
    } else {
      if (state.kv == nullptr)
        throw_value_error(what + ": layer " + std::to_string(i) + " needs a TransformerState");
      model.attention(i).check_call(nullptr, batch, length, *state.kv, what, kv_scan);
    }
  }
}

void StackUndo::save(const SambaModel& model, std::int64_t layer, const SambaLayerState& state,
                     std::int64_t length) {
  records_.resize(committed_);  // a record saved for a layer that then refused is dropped
  Record& record = records_.emplace_back();
  if (blocks::Mamba3State* s = state.mamba3) {
    record.mamba3 = s;
    record.buffered_tokens = s->buffered_tokens;
    record.pending = s->pending;
    for (const blocks::Mamba3State::Span& span :
         blocks::Mamba3State::EngineAccess(*s).spans_written_by(length)) {
      record.spans.push_back({span.at, {}});
      save_span(record.spans.back().values, span.at, span.count);
    }
    return;
  }
  blocks::KvCache& kv = *state.kv;
  const blocks::TransformerDims& dims = model.attention(layer).dims();
  record.kv = &kv;
  record.cached_tokens = kv.cached_tokens;
  record.kv_blocks = kv.batch * dims.n_kv_heads;
  record.head_dim = dims.head_dim;
  record.kv_packed = dims.window == 0 && !kv.spread;
  if (dims.window == 0 && kv.spread) {
    // A spread cache only gains rows, each block at its own place: those rows are saved.
    const std::int64_t hd = dims.head_dim;
    for (float* buffer : {kv.k, kv.v})
      for (std::int64_t block = 0; block < record.kv_blocks; ++block) {
        float* at = buffer + (block * kv.max_tokens + kv.cached_tokens) * hd;
        record.spans.push_back({at, {}});
        save_span(record.spans.back().values, at, length * hd);
      }
  } else if (record.kv_packed) {
    // Growth moves each block to the new stride and writes the region past the old packed end; the moved
    // blocks are still there to move back, so only that tail is saved.
    const std::int64_t old_end = record.kv_blocks * kv.cached_tokens * dims.head_dim;
    const std::int64_t new_end = record.kv_blocks * (kv.cached_tokens + length) * dims.head_dim;
    for (float* buffer : {kv.k, kv.v}) {
      record.spans.push_back({buffer + old_end, {}});
      save_span(record.spans.back().values, buffer + old_end, new_end - old_end);
    }
  } else {  // a ring: every slot may be written
    for (float* buffer : {kv.k, kv.v}) {
      record.spans.push_back({buffer, {}});
      save_span(record.spans.back().values, buffer, kv.floats(dims));
    }
  }
}

void StackUndo::restore() {
  for (std::size_t i = committed_; i-- > 0;) {
    Record& record = records_[i];
    if (record.kv != nullptr && record.kv_packed) {
      // Back to the old stride, first block first (each destination lies below its source).
      const std::int64_t old_len = record.cached_tokens, new_len = record.kv->cached_tokens;
      const std::int64_t hd = record.head_dim;
      for (float* buffer : {record.kv->k, record.kv->v})
        for (std::int64_t block = 1; block < record.kv_blocks && old_len > 0; ++block)
          std::memmove(buffer + block * old_len * hd, buffer + block * new_len * hd,
                       static_cast<std::size_t>(old_len * hd) * sizeof(float));
    }
    for (const Span& span : record.spans)
      if (!span.values.empty()) std::memcpy(span.at, span.values.data(), span.values.size() * sizeof(float));
    if (record.kv != nullptr) record.kv->cached_tokens = record.cached_tokens;
    if (record.mamba3 != nullptr) {
      record.mamba3->buffered_tokens = record.buffered_tokens;
      record.mamba3->pending = record.pending;
      blocks::Mamba3State::EngineAccess engine(*record.mamba3);
      engine.open_chunk_cache().valid = false;  // re-derived from the restored buffer
      // The transposed copies may hold what the undone call wrote (a sealed h, new keys).
      engine.drop_derived_copies();
    }
  }
  records_.clear();
  committed_ = 0;
}

}  // namespace samebits::models
