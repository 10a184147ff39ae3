// A buffer aligned for 64-byte vector loads, from the heap or the weight pool; owns its memory, copies
// are explicit.
#pragma once

#include <sys/mman.h>  // madvise

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "core/page_map.hpp"
#include "core/weight_pool.hpp"

namespace samebits {

// Where a buffer's memory comes from: the heap, or the weight pool for memory that lives as long as a
// model and is read on every call (packed weight panels).
enum class Placement { kHeap, kWeightPool };

template <typename T>
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kHugePage = weight_pool::kHugePage;

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t count) { resize_uninitialized(count); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
        placement_(other.placement_) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      deallocate();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
      placement_ = other.placement_;
    }
    return *this;
  }
  ~AlignedBuffer() { deallocate(); }

  // Contents are unspecified after a resize; callers write before they read.
  void resize_uninitialized(std::size_t count, Placement placement = Placement::kHeap) {
    if (count == size_ && placement == placement_) return;
    deallocate();
    placement_ = placement;
    if (count == 0) return;
    if (placement == Placement::kWeightPool) {
      data_ = static_cast<T*>(weight_pool::acquire(count * sizeof(T)));
      size_ = count;
      return;
    }
    const std::size_t bytes = heap_bytes(count);
    // A big heap buffer (a KV cache, a state) starts on a huge-page boundary and asks for huge pages over
    // its whole 2 MiB extents: a decode step streams it once, and with 4 KiB pages the TLB misses of a
    // 10 MB buffer cost ~20% of a one-thread step. The tail stays on small pages (no waste).
    const bool huge = bytes >= kHugePage;
    // posix_memalign: aligned_alloc wants the size to be a multiple of the alignment.
    void* memory = nullptr;
    if (posix_memalign(&memory, huge ? kHugePage : kAlignment, bytes) != 0) throw std::bad_alloc();
    data_ = static_cast<T*>(memory);
#if defined(MADV_HUGEPAGE)
    if (huge) madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: ignore failure
#endif
    size_ = count;
  }
  // A big zeroed heap buffer (a state, a KV cache) is instead its own anonymous mapping, laid out the same
  // way, whose zeros cost nothing until written: a cache allocated for far more tokens than it will hold
  // takes only what is used (as calloc'd numpy zeros do), instead of every page at once (which, past the
  // machine's memory, got the process killed). Scratch buffers stay on the allocator, which reuses them.
  void assign_zero(std::size_t count, Placement placement = Placement::kHeap) {
    const std::size_t bytes = placement == Placement::kHeap && count > 0 ? heap_bytes(count) : 0;
    if (page_map::kAvailable && bytes >= kHugePage) {
      deallocate();
      placement_ = placement;
      data_ = static_cast<T*>(page_map::map_zeroed(bytes));
      mapped_bytes_ = bytes;
      size_ = count;
      return;
    }
    resize_uninitialized(count, placement);
    if (count) std::memset(static_cast<void*>(data_), 0, count * sizeof(T));
  }
  // A copy in the same placement.
  AlignedBuffer clone() const {
    AlignedBuffer copy;
    copy.resize_uninitialized(size_, placement_);
    if (size_) std::memcpy(static_cast<void*>(copy.data_), data_, size_ * sizeof(T));
    return copy;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  Placement placement() const noexcept { return placement_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  static std::size_t heap_bytes(std::size_t count) {
    if (count > (SIZE_MAX - kAlignment) / sizeof(T)) throw std::bad_alloc();
    return (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
  }

  void deallocate() noexcept {
    if (placement_ == Placement::kWeightPool)
      weight_pool::release(data_);
    else if (mapped_bytes_ != 0)
      page_map::unmap(data_, mapped_bytes_);
    else
      std::free(data_);
    data_ = nullptr;
    size_ = 0;
    mapped_bytes_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_bytes_ = 0;  // nonzero: data_ is a page_map mapping of this many bytes
  Placement placement_ = Placement::kHeap;
};

}  // namespace samebits
