// SAMEBITS_FLOAT_LITERAL: a named decimal literal rounded once to float32, checked at compile time against
// the bits its documentation gives (docs/numerics.md §A, docs/models.md §12).
#pragma once

#include <bit>
#include <cstdint>

// Defines `inline constexpr float name = value;` and refuses to compile when its bits differ.
#define SAMEBITS_FLOAT_LITERAL(name, value, expected_bits)             \
  inline constexpr float name = value;                                 \
  static_assert(std::bit_cast<std::uint32_t>(name) == (expected_bits), \
                #name " differs from its documented bits")
