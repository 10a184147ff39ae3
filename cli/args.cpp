// Argument helpers of the command-line tool: options anywhere after the command, checked numbers.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <samebits/checkpoint_info.hpp>
#include <samebits/errors.hpp>

#include "cli.hpp"

namespace samebits::cli {

std::optional<std::string> take_option(std::vector<std::string>& args, const std::string& name) {
  const auto it = std::find(args.begin(), args.end(), name);
  if (it == args.end()) return std::nullopt;
  if (it + 1 == args.end()) throw UsageError{name + " needs a value"};
  std::string value = *(it + 1);
  args.erase(it, it + 2);
  return value;
}

bool take_flag(std::vector<std::string>& args, const std::string& name) {
  const auto it = std::find(args.begin(), args.end(), name);
  if (it == args.end()) return false;
  args.erase(it);
  return true;
}

void reject_unknown_options(const std::vector<std::string>& args, const std::string& command) {
  for (const std::string& arg : args)
    if (arg.size() > 1 && arg[0] == '-') throw UsageError{command + ": unknown option '" + arg + "'"};
}

std::int64_t parse_int(const std::string& text, const std::string& option, std::int64_t lo, std::int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno != 0 || value < lo || value > hi)
    throw UsageError{option + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + text + "'"};
  return value;
}

double parse_double(const std::string& text, const std::string& option, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno != 0 || !(value >= lo && value <= hi))
    throw UsageError{option + " must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + text + "'"};
  return value;
}

std::string default_checkpoint() {
  if (const char* forced = std::getenv("SAMEBITS_DEFAULT_MODEL")) return forced;
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path dir = exe.parent_path();
    for (const auto& candidate :
         {dir / ".." / "assets" / "samba-kjv.ckpt", dir / ".." / "share" / "samebits" / "samba-kjv.ckpt"})
      if (std::filesystem::exists(candidate, error)) return candidate.lexically_normal().string();
  }
#if defined(SAMEBITS_SOURCE_MODEL)
  if (std::filesystem::exists(SAMEBITS_SOURCE_MODEL, error)) return SAMEBITS_SOURCE_MODEL;
#endif
  throw UsageError{
      "no CHECKPOINT given and no default model found (set SAMEBITS_DEFAULT_MODEL or pass a file)"};
}

CheckpointKind sniff_checkpoint(const std::string& path) {
  // A path that is not a readable regular file gets one neutral sentence, not a guess at the format.
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw_value_error("cannot read checkpoint '" + path + "': it is a directory");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw_value_error("cannot read checkpoint '" + path + "': " + std::strerror(errno));
  std::string head(17, '\0');
  file.read(head.data(), 17);
  head.resize(static_cast<std::size_t>(file.gcount()));
  // Any file that starts like the archive magic goes to the Samba reader, which judges the magic itself.
  if (head.rfind(kSambaStreamMagic.substr(0, 15), 0) == 0) return CheckpointKind::Samba;
  // Both JSON formats end with their schema (canonical key order puts "schema" last).
  file.clear();
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  const std::streamoff tail = std::min<std::streamoff>(size, 256);
  std::string end(static_cast<std::size_t>(tail), '\0');
  file.seekg(size - tail);
  file.read(end.data(), tail);
  return end.find("samba-stack") != std::string::npos ? CheckpointKind::Samba : CheckpointKind::Mlp;
}

}  // namespace samebits::cli
