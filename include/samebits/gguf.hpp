// GGUF files (llama.cpp's model format) as samebits reads them: a strict, memory-mapped reader of the
// container, its typed metadata and its tensor table, and the exact float32 value of every supported tensor
// type (docs/gguf.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <samebits/gguf_value.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace samebits {

// "UINT32", "STRING", "ARRAY", ...
std::string gguf_value_type_name(GgufValueType type);

// One metadata record, in file order.
struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

// One tensor of the table: `ne` as stored (ne[0] innermost; the row-major shape is its reverse), the ggml
// type id and name, the byte range relative to the data section, and the element count.
struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> ne;
  std::uint32_t type = 0;
  std::string type_name;
  std::uint64_t offset = 0;
  std::uint64_t nbytes = 0;
  std::uint64_t elements = 0;
};

// An open GGUF file (mapped read-only while any copy of this handle lives). Opening runs every container
// check of docs/gguf.md §3; a refusal is a samebits::Error (ValueError; FileNotFoundError for a missing
// path) naming the file, the field and the value.
class GgufFile {
 public:
  static GgufFile open(const std::string& path);
  // The same checks on a file's bytes in memory; `name` stands for the path in messages.
  static GgufFile from_bytes(const std::string& name, std::string bytes);

  const std::string& path() const;
  std::uint32_t version() const;
  std::uint64_t file_bytes() const;
  std::uint64_t alignment() const;
  // Absolute offset of the data section.
  std::uint64_t data_offset() const;
  const std::vector<GgufKeyValue>& metadata() const;
  // The value of `key`, or nullptr.
  const GgufValue* find(std::string_view key) const;
  const std::vector<GgufTensorInfo>& tensors() const;
  // The tensor named `name`, or nullptr.
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // The tensor's exact float32 values in stored order (docs/gguf.md §6); a non-finite value or scale is a
  // ValueError naming tensor and block, an unknown name a KeyError.
  std::vector<float> dequantize(std::string_view name) const;
  // Throws the dequantize refusal if any tensor holds a non-finite value or scale (a scan, no decoding).
  void check_finite() const;

  struct Impl;

 private:
  explicit GgufFile(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Name of a ggml tensor type id ("Q4_K", "IQ2_XXS", "removed", "unknown").
std::string gguf_tensor_type_name(std::uint32_t type);
// Whether samebits decodes that type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K).
bool gguf_tensor_type_supported(std::uint32_t type);
// Elements and bytes of one block of a supported type (0, 0 for any other).
std::pair<std::uint32_t, std::uint32_t> gguf_tensor_type_block(std::uint32_t type);

// The exact float32 values of `count` elements stored as ggml type `type` in `bytes` (docs/gguf.md §6):
// `count` must be a multiple of the block and `size` exactly the bytes of count / block blocks. Another
// type is a ValueError naming it; a non-finite value or scale a ValueError naming the block.
std::vector<float> gguf_dequantize(std::uint32_t type, const void* bytes, std::size_t size,
                                   std::uint64_t count);

}  // namespace samebits
