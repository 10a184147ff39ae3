// Fuzzes the GGUF reader on in-memory files (docs/gguf.md §8): an accepted file keeps every tensor inside
// the file, stored in info order with aligned offsets, with the byte size its type and shape need; every
// tensor either decodes to its element count or is refused for a non-finite block.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_support.hpp"
#include "io/gguf.hpp"
#include "numerics/gguf_quants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  std::optional<io::GgufFile> file;
  if (!fuzz::accepted([&] { file.emplace("fuzz", std::string(reinterpret_cast<const char*>(data), size)); }))
    return 0;
  fuzz::require(file->version() == 2 || file->version() == 3, "an accepted file has another version");
  const std::uint64_t alignment = file->alignment();
  fuzz::require(alignment != 0 && (alignment & (alignment - 1)) == 0,
                "an accepted alignment is no power of 2");
  std::uint64_t expected = 0;
  for (const io::GgufTensor& t : file->tensors()) {
    const numerics::GgmlTypeInfo info = numerics::ggml_type_info(t.type);
    fuzz::require(info.supported, "an accepted tensor has an unsupported type");
    fuzz::require(t.offset == expected && t.offset % alignment == 0, "an accepted tensor is out of place");
    fuzz::require(file->data_offset() + t.offset + t.nbytes <= size,
                  "an accepted tensor lies outside the file");
    fuzz::require(t.nbytes == t.elements / info.block_elements * info.block_bytes,
                  "an accepted tensor has the wrong byte size");
    fuzz::require(file->find_tensor(t.name) == &t, "an accepted tensor cannot be found by its name");
    expected = (t.offset + t.nbytes + alignment - 1) / alignment * alignment;
    if (t.elements > (std::uint64_t{1} << 20)) continue;  // the bytes exist, but decoding is bounded
    std::size_t count = 0;
    const bool decoded = fuzz::accepted([&] { count = file->dequantize(t.name).size(); });
    const bool finite = fuzz::accepted([&] { file->check_finite(t); });
    fuzz::require(decoded == finite, "dequantize and the finiteness scan disagree");
    if (decoded) fuzz::require(count == t.elements, "a tensor decoded to the wrong number of values");
  }
  return 0;
}
