// FileBytes: a file's bytes for a reader, either mapped read-only from disk for the object's lifetime or held
// in memory (fuzzers, tests), so that each reader parses one view and opens files one way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace samebits::io {

class FileBytes {
 public:
  // Maps `path`. Refuses, with messages starting `where` (e.g. "samebits.models.safetensors: PATH"): a
  // missing path (NotFound), a directory ("is a directory, not <noun>"), anything but a regular file, a file
  // that cannot be opened or mapped, and a file shorter than `min_bytes` (the sentence `too_short(size)`
  // gives, appended to `where`).
  FileBytes(const std::string& path, const std::string& where, const std::string& noun,
            std::uint64_t min_bytes, const std::function<std::string(std::uint64_t)>& too_short);
  // Bytes already in memory; the same length refusal.
  FileBytes(std::string bytes, const std::string& where, std::uint64_t min_bytes,
            const std::function<std::string(std::uint64_t)>& too_short);
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();

  const unsigned char* data() const { return data_; }
  std::uint64_t size() const { return size_; }

 private:
  void* map_ = nullptr;
  std::string owned_;
  const unsigned char* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace samebits::io
