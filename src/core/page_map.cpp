// Zero-filled anonymous mappings on huge-page boundaries (see page_map.hpp).
#include "core/page_map.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace samebits::page_map {
namespace {

constexpr std::size_t kSmallPage = 4096;

std::size_t mapped_length(std::size_t bytes) { return (bytes + kSmallPage - 1) / kSmallPage * kSmallPage; }

}  // namespace

void* map_zeroed(std::size_t bytes) {
  if (bytes > SIZE_MAX - kHugePage - kSmallPage) throw std::bad_alloc();  // no address space is that large
  const std::size_t length = mapped_length(bytes);
  // Over-map by one huge page, then trim the head and tail so the mapping starts on a boundary.
  const std::size_t span = length + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t base = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (base > start) munmap(raw, base - start);
  if (start + span > base + length)
    munmap(reinterpret_cast<void*>(base + length), start + span - (base + length));
#if defined(MADV_HUGEPAGE)
  if (length >= kHugePage)
    madvise(reinterpret_cast<void*>(base), length / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only
#endif
  return reinterpret_cast<void*>(base);
}

void unmap(void* base, std::size_t bytes) noexcept {
  if (base != nullptr) munmap(base, mapped_length(bytes));
}

}  // namespace samebits::page_map
