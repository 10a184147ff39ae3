// GGUF files (docs/gguf.md §2-§4): a strict reader over a read-only memory map. Opening checks the header,
// every metadata record and every tensor-info record against the bytes that remain before anything is
// allocated from a declared count; every refusal is a ValueError naming the file, the field and the value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <samebits/gguf_value.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace samebits::io {

class FileBytes;

// "UINT32", "ARRAY", ... as the format names them.
const char* gguf_type_name(GgufValueType type);

// One tensor-info record: `ne` as stored (ne[0] innermost), the ggml type id, and its byte range.
struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> ne;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;  // relative to the data section
  std::uint64_t nbytes = 0;
  std::uint64_t elements = 0;
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  // The same checks on a file's bytes already in memory (`name` stands for the path in messages).
  GgufFile(std::string name, std::string bytes);
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t file_bytes() const { return file_bytes_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }
  // Metadata keys in file order, and the value of each.
  const std::vector<std::string>& keys() const { return keys_; }
  const GgufValue* find(std::string_view key) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  // The stored bytes of a tensor (nbytes of them, inside the map).
  const unsigned char* tensor_bytes(const GgufTensor& tensor) const { return data_ + tensor.offset; }

  // The exact float32 values of a tensor (docs/gguf.md §6); a non-finite value or scale is a ValueError
  // naming the tensor and the block (docs/gguf.md §7.2), an unknown name a KeyError.
  std::vector<float> dequantize(std::string_view name) const;
  // Throws that same ValueError if any block of the tensor is non-finite, without decoding it.
  void check_finite(const GgufTensor& tensor) const;

 private:
  void parse(const unsigned char* bytes, std::uint64_t size);

  std::string path_;
  std::unique_ptr<FileBytes> bytes_;
  const unsigned char* data_ = nullptr;
  std::uint32_t version_ = 0;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  std::map<std::string, GgufValue, std::less<>> values_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace samebits::io
