// The one bound on a state's size: its float count, a product of extents, must stay addressable.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/errors.hpp"

namespace samebits {

// Refuses (ValueError) a state of extents[0] x extents[1] x ... floats above 2^61 (more bytes than a
// pointer difference can hold), before that product is formed in 64 bits, where it could wrap into a
// small allocation. Non-positive extents are the caller's own refusal and pass here.
inline void check_state_floats(const std::string& what, std::initializer_list<std::int64_t> extents) {
  constexpr __int128 kLimit = __int128{1} << 61;
  __int128 floats = 1;
  for (std::int64_t extent : extents) {
    if (extent <= 0) return;
    floats *= extent;
    if (floats > kLimit) break;  // stops long before 128 bits could overflow
  }
  if (floats <= kLimit) return;
  std::string shape;
  for (std::int64_t extent : extents) shape += (shape.empty() ? "" : " x ") + std::to_string(extent);
  throw_value_error(what + ": a state of " + shape + " floats is too large to allocate (more than 2^61)");
}

}  // namespace samebits
