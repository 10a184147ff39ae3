// A heap buffer aligned for 64-byte vector loads; owns its memory, copies are explicit.
#pragma once

#include <sys/mman.h>  // madvise

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace samebits {

template <typename T>
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t count) { resize_uninitialized(count); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  // Contents are unspecified after a resize; callers write before they read.
  void resize_uninitialized(std::size_t count) {
    if (count == size_) return;
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    if (count == 0) return;
    const std::size_t bytes = (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    // A big buffer (weights, a KV cache) starts on a huge-page boundary and asks for huge pages over its
    // whole 2 MiB extents: a decode step streams every weight matrix once, and with 4 KiB pages the TLB
    // misses of a 10 MB matrix cost ~20% of a one-thread step. The tail stays on small pages (no waste).
    const bool huge = bytes >= kHugePage;
    data_ = static_cast<T*>(std::aligned_alloc(huge ? kHugePage : kAlignment, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    if (huge) madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: ignore failure
#endif
    size_ = count;
  }
  void assign_zero(std::size_t count) {
    resize_uninitialized(count);
    if (count) std::memset(static_cast<void*>(data_), 0, count * sizeof(T));
  }
  AlignedBuffer clone() const {
    AlignedBuffer copy(size_);
    if (size_) std::memcpy(static_cast<void*>(copy.data_), data_, size_ * sizeof(T));
    return copy;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace samebits
