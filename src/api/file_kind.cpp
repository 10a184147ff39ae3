// File-kind detection from a file's first and last bytes (include/samebits/file_kind.hpp).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <samebits/errors.hpp>
#include <samebits/file_kind.hpp>
#include <utility>

namespace samebits {
namespace {

constexpr std::size_t kHead = 4096;
constexpr std::size_t kTail = 256;

bool looks_like_text(std::string_view head) {
  for (unsigned char c : head)
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') return false;
  return true;
}

}  // namespace

FileKind detect_file_kind(const std::string& path, const std::string& noun) {
  const std::string where = "cannot read " + noun + " '" + path + "': ";
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found)
    throw_value_error(where + "No such file or directory");
  if (status.type() == std::filesystem::file_type::directory) throw_value_error(where + "it is a directory");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw_value_error(where + std::strerror(errno));
  std::string head(kHead, '\0');
  file.read(head.data(), static_cast<std::streamsize>(kHead));
  head.resize(static_cast<std::size_t>(file.gcount()));
  if (file.bad()) throw_value_error(where + "read error");
  std::string tail;
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') {
    // Both checkpoint formats end with their schema (canonical key order puts "schema" last).
    file.clear();
    file.seekg(0, std::ios::end);
    const std::streamoff size = file.tellg();
    const std::streamoff last = std::min<std::streamoff>(size, static_cast<std::streamoff>(kTail));
    tail.assign(static_cast<std::size_t>(last), '\0');
    file.seekg(size - last);
    file.read(tail.data(), last);
  }
  return classify_file_bytes(head, tail);
}

FileKind classify_file_bytes(std::string_view head, std::string_view tail) {
  head = head.substr(0, kHead);
  if (head.empty()) return FileKind::Empty;
  if (head.rfind("MOJOLEARN-SAMBA", 0) == 0) return FileKind::SambaArchive;
  if (head.rfind("GGUF", 0) == 0) return FileKind::Gguf;
  if (head.size() >= 9) {
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i)
      header = (header << 8) | static_cast<unsigned char>(head[static_cast<std::size_t>(i)]);
    if (head[8] == '{' && header >= 2 && header < (std::uint64_t{1} << 30)) return FileKind::Safetensors;
  }
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && head[first] == '{') {
    if (tail.find("samba-stack") != std::string_view::npos) return FileKind::SambaJson;
    if (tail.find("small-mlp-checkpoint") != std::string_view::npos ||
        head.substr(first).rfind("{\"payload\":{\"architecture\"", 0) == 0)
      return FileKind::MlpCheckpoint;
    return FileKind::Json;
  }
  return looks_like_text(head) ? FileKind::Text : FileKind::Binary;
}

std::string describe_file_kind(FileKind kind) {
  constexpr std::pair<FileKind, const char*> kDescriptions[] = {
      {FileKind::SambaArchive, "a Samba checkpoint (v2 archive)"},
      {FileKind::SambaJson, "a Samba checkpoint (legacy JSON)"},
      {FileKind::MlpCheckpoint, "an MLP checkpoint"},
      {FileKind::Safetensors, "a safetensors file"},
      {FileKind::Gguf, "a GGUF file"},
      {FileKind::Json, "a JSON document of no known checkpoint schema"},
      {FileKind::Text, "a text file"},
      {FileKind::Empty, "an empty file"},
      {FileKind::Binary, "a binary file of unknown kind"},
  };
  for (const auto& [known, description] : kDescriptions)
    if (known == kind) return description;
  return "a file of unknown kind";
}

FileKind require_file_kind(const std::string& path, const std::string& command,
                           const std::vector<FileKind>& wanted, const std::string& wanted_text,
                           const std::string& noun) {
  const FileKind kind = detect_file_kind(path, noun);
  if (std::find(wanted.begin(), wanted.end(), kind) == wanted.end())
    throw_value_error(path + " is " + describe_file_kind(kind) + "; " + command + " wants " + wanted_text);
  return kind;
}

}  // namespace samebits
