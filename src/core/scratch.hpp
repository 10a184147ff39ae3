// Per-thread reuse of big scratch buffers across the layers of one model call (a scratch::Scope).
#pragma once

#include <cstddef>

#include "core/aligned_buffer.hpp"

namespace samebits::scratch {

// While a Scope is open on a thread, the scratch Buffers that thread releases are kept and handed out
// again, so a model call's layers reuse the same memory: its pages are faulted and zeroed by the kernel once
// per call instead of once per layer (a 512-token SmolLM2 layer asks for ~16 MB). When the outermost Scope
// of the thread closes, everything kept is freed. Scopes nest; without one a Buffer is a plain allocation.
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

// At least `count` floats of uninitialized, 64-byte-aligned memory: a kept buffer of the thread (the
// smallest one big enough) when a Scope is open, a new one otherwise. Released to the thread's kept
// buffers, or freed when no Scope is open then. Create and destroy it on the same thread.
class Buffer {
 public:
  explicit Buffer(std::size_t count);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  float* data() noexcept { return memory_.data(); }
  const float* data() const noexcept { return memory_.data(); }

 private:
  AlignedBuffer<float> memory_;
};

// Buffers currently kept by the calling thread (for tests).
std::size_t kept_count();

}  // namespace samebits::scratch
