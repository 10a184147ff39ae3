// BufferPin: a writable view of one state buffer that counts itself on its state while it lives, so the
// state knows it is exposed (kept in its documented layout, scanned by every call) until the last pin goes.
#pragma once

#include <cstdint>

namespace samebits {

class BufferPin {
 public:
  // `pins` is the owning state's counter; it must outlive the pin (the state owns both).
  BufferPin(std::int64_t& pins, float* data, std::int64_t size) : pins_(&pins), data_(data), size_(size) {
    ++pins;
  }
  BufferPin(BufferPin&& other) noexcept : pins_(other.pins_), data_(other.data_), size_(other.size_) {
    other.pins_ = nullptr;
  }
  BufferPin& operator=(BufferPin&&) = delete;
  ~BufferPin() {
    if (pins_ != nullptr) --*pins_;
  }

  float* data() const { return data_; }
  std::int64_t size() const { return size_; }

 private:
  std::int64_t* pins_;
  float* data_;
  std::int64_t size_;
};

}  // namespace samebits
