// A process-wide arena for long-lived weight panels: blocks are carved side by side out of 2 MiB-aligned
// chunks advised as huge pages, so a model's matrices share a few huge pages instead of thousands of
// small ones scattered over physical memory.
#pragma once

#include <cstddef>

#include "core/page_map.hpp"

namespace samebits::weight_pool {

inline constexpr std::size_t kHugePage = page_map::kHugePage;

// `bytes` (> 0) of 64-byte-aligned memory; throws std::bad_alloc when the system has none.
void* acquire(std::size_t bytes);

// Gives back a block from acquire. A chunk is unmapped when its last block comes back.
void release(void* block) noexcept;

// Chunks currently mapped (for tests); always 0 in sanitizer builds, where blocks come from the heap so
// that the sanitizer sees every access.
std::size_t chunk_count();

}  // namespace samebits::weight_pool
