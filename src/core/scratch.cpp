// Per-thread kept scratch buffers: handed out by best fit while a Scope is open, freed when it closes.
#include "core/scratch.hpp"

#include <utility>
#include <vector>

namespace samebits::scratch {
namespace {

struct Kept {
  int open_scopes = 0;
  std::vector<AlignedBuffer<float>> buffers;
};

Kept& kept() {
  thread_local Kept state;
  return state;
}

}  // namespace

Scope::Scope() { ++kept().open_scopes; }

Scope::~Scope() {
  Kept& state = kept();
  if (--state.open_scopes == 0) state.buffers.clear();
}

Buffer::Buffer(std::size_t count) {
  if (count == 0) return;
  Kept& state = kept();
  // Best fit: a layer's buffers differ in size, and the smallest that fits leaves the big ones to the
  // requests that need them.
  std::size_t best = state.buffers.size();
  for (std::size_t i = 0; i < state.buffers.size(); ++i)
    if (state.buffers[i].size() >= count &&
        (best == state.buffers.size() || state.buffers[i].size() < state.buffers[best].size()))
      best = i;
  if (best < state.buffers.size()) {
    memory_ = std::move(state.buffers[best]);
    state.buffers.erase(state.buffers.begin() + static_cast<std::ptrdiff_t>(best));
    return;
  }
  memory_.resize_uninitialized(count);
}

Buffer::~Buffer() {
  Kept& state = kept();
  if (state.open_scopes > 0 && memory_.size() > 0) state.buffers.push_back(std::move(memory_));
}

std::size_t kept_count() { return kept().buffers.size(); }

}  // namespace samebits::scratch
