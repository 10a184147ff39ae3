// The one bound on a state's size: its float count, a product of extents, must stay addressable.
#pragma once

#include <cstdint>
#include <new>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

namespace samebits {

// "2 x 6 x 512 x 64": a state's extents as the refusals below name them.
inline std::string state_shape_text(const std::vector<std::int64_t>& extents) {
  std::string shape;
  for (std::int64_t extent : extents) shape += (shape.empty() ? "" : " x ") + std::to_string(extent);
  return shape;
}

// Refuses (ValueError) a state of extents[0] x extents[1] x ... floats above 2^61 (more bytes than a
// pointer difference can hold), before that product is formed in 64 bits, where it could wrap into a
// small allocation. Non-positive extents are the caller's own refusal and pass here.
inline void check_state_floats(const std::string& what, const std::vector<std::int64_t>& extents) {
  constexpr __int128 kLimit = __int128{1} << 61;
  __int128 floats = 1;
  for (std::int64_t extent : extents) {
    if (extent <= 0) return;
    floats *= extent;
    if (floats > kLimit) break;  // stops long before 128 bits could overflow
  }
  if (floats <= kLimit) return;
  throw_value_error(what + ": a state of " + state_shape_text(extents) +
                    " floats is too large to allocate (more than 2^61)");
}

// Allocates a state of extents[0] x extents[1] x ... floats: refuses the extents as check_state_floats
// does, then runs `allocate` (which zeroes the state's buffers). A std::bad_alloc from it becomes a
// MemoryError naming the state and its extents: the address space or the overcommit rule said no. Big
// buffers are mapped lazily (see AlignedBuffer), so a state for more tokens than the machine holds is
// refused only when even its address space cannot be had; until then only what calls write is resident.
template <typename Allocate>
void allocate_state_buffers(const std::string& what, const std::vector<std::int64_t>& extents,
                            Allocate&& allocate) {
  check_state_floats(what, extents);
  try {
    allocate();
  } catch (const std::bad_alloc&) {
    throw_memory_error(what + ": a state of " + state_shape_text(extents) +
                       " floats does not fit in this machine's memory (the system refused the allocation)");
  }
}

}  // namespace samebits
