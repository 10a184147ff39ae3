// Fuzzes the safetensors reader on in-memory files: an accepted header keeps every tensor inside the data
// section with the size its dtype and shape need, and every tensor reads back (or is refused) by its dtype.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_support.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  std::optional<io::SafetensorsFile> file;
  if (!fuzz::accepted([&] { file.emplace("fuzz", std::string(reinterpret_cast<const char*>(data), size)); }))
    return 0;
  const std::uint64_t data_bytes = size - 8 - [&] {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    return n;
  }();
  for (const io::SafetensorsEntry& e : file->entries()) {
    fuzz::require(e.begin <= e.end && e.end <= data_bytes,
                  "an accepted tensor lies outside the data section");
    fuzz::require(file->find(e.name) != nullptr, "an accepted tensor cannot be found by its name");
    const bool floating = e.kind == io::SafetensorsDtype::F32 || e.kind == io::SafetensorsDtype::BF16 ||
                          e.kind == io::SafetensorsDtype::F16;
    const bool integer = e.kind == io::SafetensorsDtype::I32 || e.kind == io::SafetensorsDtype::I64;
    std::size_t floats = 0, integers = 0;
    const bool read_float = fuzz::accepted([&] { floats = file->read_float32(e.name).size(); });
    const bool read_integer = fuzz::accepted([&] { integers = file->read_integers(e.name).size(); });
    fuzz::require(read_float == floating && read_integer == integer, "a tensor read against its dtype");
    if (floating || integer) {
      const auto count = static_cast<std::size_t>(e.elements());
      fuzz::require((floating ? floats : integers) == count, "a tensor read the wrong number of values");
    }
  }
  return 0;
}
