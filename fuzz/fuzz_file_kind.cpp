// Fuzzes file-kind detection: the kind read from a file on disk equals the kind of its bytes, and a kind
// named by a magic or a header shape is the one its first bytes show.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <samebits/file_kind.hpp>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string_view tail = bytes.substr(bytes.size() > 256 ? bytes.size() - 256 : 0);
  const FileKind from_bytes = classify_file_bytes(bytes, tail);
  static const std::string path = "/tmp/samebits_fuzz_file_kind_" + std::to_string(::getpid());
  std::FILE* file = std::fopen(path.c_str(), "wb");
  fuzz::require(file != nullptr, "cannot write the scratch file");
  fuzz::require(std::fwrite(data, 1, size, file) == size, "cannot write the scratch file");
  std::fclose(file);
  fuzz::require(detect_file_kind(path) == from_bytes, "the kind read from disk differs from the bytes' kind");
  fuzz::require((size == 0) == (from_bytes == FileKind::Empty), "an empty file and the Empty kind disagree");
  if (bytes.rfind("GGUF", 0) == 0) fuzz::require(from_bytes == FileKind::Gguf, "GGUF magic not seen");
  if (bytes.rfind("MOJOLEARN-SAMBA", 0) == 0)
    fuzz::require(from_bytes == FileKind::SambaArchive, "Samba archive magic not seen");
  fuzz::require(!describe_file_kind(from_bytes).empty(), "a kind without a description");
  return 0;
}
