// GgufValueType and GgufValue: one GGUF metadata value as the strict reader hands it out (docs/gguf.md); a
// plain declaration that the io layer fills and the public GgufFile exposes unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace samebits {

// A metadata value type code (0..12) as the format defines it.
enum class GgufValueType : std::uint32_t {
  Uint8 = 0,
  Int8 = 1,
  Uint16 = 2,
  Int16 = 3,
  Uint32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  Uint64 = 10,
  Int64 = 11,
  Float64 = 12,
};

// One metadata value: a scalar, or an array of `element` items. Items sit in the vector of their family,
// widened exactly: unsigned integers and bools in `uints`, signed integers in `ints`, FLOAT32/FLOAT64 in
// `floats`, strings in `strings`.
struct GgufValue {
  GgufValueType type = GgufValueType::Uint8;
  GgufValueType element = GgufValueType::Uint8;  // the item type; equal to `type` for a scalar
  std::vector<std::uint64_t> uints;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  // Items held (1 for a scalar).
  std::size_t count() const { return uints.size() + ints.size() + floats.size() + strings.size(); }
};

}  // namespace samebits
