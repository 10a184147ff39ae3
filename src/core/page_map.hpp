// Zero-filled anonymous mappings on huge-page boundaries: memory the kernel backs only where it is touched.
#pragma once

#include <cstddef>

namespace samebits::page_map {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Sanitizer builds keep every buffer on the heap, so that the sanitizer sees each access.
#if defined(SAMEBITS_SANITIZER_BUILD) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kAvailable = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kAvailable = false;
#else
inline constexpr bool kAvailable = true;
#endif
#else
inline constexpr bool kAvailable = true;
#endif

// `bytes` (> 0) of zeros starting on a huge-page boundary, its whole 2 MiB extents advised as huge pages.
// Nothing is resident until touched, so a cache allocated for far more tokens than it will hold costs only
// what is written. Throws std::bad_alloc when the address space or the system's overcommit rule refuses.
void* map_zeroed(std::size_t bytes);

// Gives back a mapping from map_zeroed with the same `bytes`.
void unmap(void* base, std::size_t bytes) noexcept;

}  // namespace samebits::page_map
