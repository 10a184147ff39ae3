// Fuzzes the strict JSON parser and the canonical encoder: canonical(parse(canonical(x))) == canonical(x).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <samebits/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<json::Value> value;
  if (!fuzz::accepted([&] { value.emplace(json::parse(text)); })) return 0;
  // The parser refuses NaN/Infinity and overflowing numbers, so everything it accepts has an encoding.
  std::string canonical;
  fuzz::require(fuzz::accepted([&] { canonical = json::canonical_json(*value); }),
                "the canonical encoder refused a parsed document");
  std::optional<json::Value> again;
  fuzz::require(fuzz::accepted([&] { again.emplace(json::parse(canonical)); }),
                "the parser refused the canonical encoding of a parsed document");
  fuzz::require(json::canonical_json(*again) == canonical, "canonical JSON is not a fixed point");
  for (unsigned char c : canonical)
    fuzz::require(c >= 0x20 && c < 0x7F, "canonical JSON is not printable ASCII");
  return 0;
}
