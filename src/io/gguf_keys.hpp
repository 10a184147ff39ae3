// Typed reads of GGUF metadata for the model and tokenizer mappings (docs/gguf.md §10, §12): an absent key
// reads as nullopt, a key of another type is a ValueError naming the file, the key and both types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.hpp"

namespace samebits::io {

// "samebits gguf: PATH: " — the start of every mapping refusal.
std::string gguf_where(const GgufFile& file);

// A scalar string.
std::optional<std::string> gguf_string(const GgufFile& file, std::string_view key);
// A scalar integer of any width and signedness, refused when negative; an array (a per-layer value) is
// refused by name.
std::optional<std::uint64_t> gguf_uint(const GgufFile& file, std::string_view key);
// A scalar FLOAT32 or FLOAT64, widened exactly.
std::optional<double> gguf_float(const GgufFile& file, std::string_view key);
// A scalar BOOL.
std::optional<bool> gguf_bool(const GgufFile& file, std::string_view key);
// An array of `element`-family items (nullptr when absent): the value itself, its items in the vector of
// their family (GgufValue).
const GgufValue* gguf_array(const GgufFile& file, std::string_view key, GgufValueType element);

}  // namespace samebits::io
