// Safetensors files and checkpoint directories (docs/models.md §14): a strict header reader over a read-only
// memory map, exact widening of F16 and BF16, and the sharded index of Hugging Face checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <samebits/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace samebits::io {

class FileBytes;

// The largest header this reader maps into a JSON value (upstream's bound): 100 MiB.
inline constexpr std::uint64_t kSafetensorsHeaderLimit = 104857600;

// The storage types the reader widens or returns; every other dtype string is Other, refused when read.
enum class SafetensorsDtype { F32, BF16, F16, I32, I64, Other };

// One tensor of a header: its dtype as written, shape, and byte range within the data section.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  SafetensorsDtype kind = SafetensorsDtype::Other;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::int64_t elements() const;
};

// One .safetensors file, mapped read-only for its lifetime. Opening checks the whole header (every refusal a
// ValueError naming the file and the tensor); reading copies one tensor out of the map.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  // The same checks on a file's bytes already in memory (`name` stands for the path in messages).
  SafetensorsFile(std::string name, std::string bytes);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Tensors in header order; `__metadata__` is not one of them.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The entry named `name`, or nullptr.
  const SafetensorsEntry* find(std::string_view name) const;
  // `__metadata__` as written (any JSON value), null when absent.
  const json::Value& metadata() const { return metadata_; }

  // The values as float32: F32 as stored, BF16 and F16 widened exactly (not flushed). An integer tensor is
  // a TypeError (a weight must be a float), any other dtype a TypeError naming it; an unknown name a
  // KeyError.
  std::vector<float> read_float32(std::string_view name) const;
  // A BF16 tensor's bits as stored (TypeError for another dtype).
  std::vector<std::uint16_t> read_bf16_bits(std::string_view name) const;
  // An I32 or I64 tensor as int64 values (TypeError for another dtype).
  std::vector<std::int64_t> read_integers(std::string_view name) const;

 private:
  void parse(const unsigned char* bytes, std::uint64_t file_bytes);
  const SafetensorsEntry& entry(std::string_view name) const;
  const unsigned char* bytes_of(const SafetensorsEntry& entry) const;
  [[noreturn]] void refuse_dtype(const SafetensorsEntry& entry, const char* wanted) const;

  std::string path_;
  std::unique_ptr<FileBytes> bytes_;     // the whole file, mapped or in memory
  const unsigned char* data_ = nullptr;  // the data section
  std::uint64_t data_bytes_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
  json::Value metadata_;
};

// A checkpoint: a .safetensors file, or a directory holding model.safetensors.index.json (the shards it
// names), model.safetensors, or exactly one other .safetensors file. The name index is the union of the
// shards' headers; a name in two shards is refused.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& path);

  const std::string& path() const { return path_; }
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  bool contains(std::string_view name) const { return where_.find(name) != where_.end(); }
  // The entry and the file of a name (KeyError when absent).
  const SafetensorsEntry& entry(std::string_view name) const;
  const SafetensorsFile& file_of(std::string_view name) const;
  // The shard files, in the order they were opened (sorted).
  std::vector<std::string> files() const;

  std::vector<float> read_float32(std::string_view name) const { return file_of(name).read_float32(name); }

 private:
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::size_t, std::less<>> where_;  // name -> index in files_
};

}  // namespace samebits::io
