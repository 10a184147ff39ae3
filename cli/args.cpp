// Argument handling of the command-line tool: one parser over each command's option table (options
// anywhere after the command, global ones before it too), the help text built from the same table, checked
// numbers, the default model and writes that notice a closed pipe (docs/cli.md).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <samebits/file_kind.hpp>

#include "cli.hpp"

namespace samebits::cli {

std::optional<std::string> Args::get(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::all(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::int64_t Args::integer(const std::string& name, const std::string& fallback, std::int64_t lo,
                           std::int64_t hi) const {
  return parse_int(get(name).value_or(fallback), name, lo, hi);
}

const std::string& Args::single(const std::string& noun) const {
  if (positional.size() != 1) throw UsageError{command + " takes exactly one " + noun};
  return positional[0];
}

const std::vector<OptionSpec>& global_options() {
  static const std::vector<OptionSpec> options = {
      {"--threads", "-t", "N", "SAMEBITS_NUM_THREADS, else every core", "worker threads, 1 to 256"},
      {"--simd", "", "TARGET", "SAMEBITS_SIMD, else the best the CPU has", "scalar, avx2 or avx512"},
  };
  return options;
}

namespace {

const OptionSpec* find_option(const CommandSpec& spec, const std::string& name) {
  for (const auto* table : {&spec.options, &global_options()})
    for (const OptionSpec& o : *table)
      if (o.name == name || (!o.short_name.empty() && o.short_name == name)) return &o;
  return nullptr;
}

std::string option_label(const OptionSpec& o) {
  std::string label = o.short_name.empty() ? "    " : o.short_name + ", ";
  label += o.name;
  if (!o.value.empty()) label += " " + o.value;
  return label;
}

void append_options(std::string& out, const std::vector<OptionSpec>& options) {
  for (const OptionSpec& o : options) {
    std::string line = "  " + option_label(o);
    line += std::string(line.size() < 30 ? 30 - line.size() : 1, ' ');
    line += o.help;
    if (!o.default_text.empty()) line += " (default: " + o.default_text + ")";
    if (o.repeatable) line += "; may be repeated";
    out += line + "\n";
  }
}

}  // namespace

Args parse_args(const CommandSpec& spec, const std::vector<std::string>& args, Args globals) {
  Args out = std::move(globals);
  out.command = spec.name;
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") throw HelpRequest{spec.name};
    std::optional<std::string> inline_value;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    const OptionSpec* option = find_option(spec, arg);
    if (option == nullptr) throw UsageError{spec.name + ": unknown option '" + arg + "'"};
    auto& slot = out.values_[option->name];
    if (!slot.empty() && !option->repeatable)
      throw UsageError{spec.name + ": option '" + option->name + "' given more than once"};
    if (option->value.empty()) {
      if (inline_value) throw UsageError{option->name + " takes no value"};
      slot.emplace_back();
      continue;
    }
    if (inline_value) {
      slot.push_back(*inline_value);
    } else {
      if (i + 1 == args.size()) throw UsageError{option->name + " needs a value"};
      slot.push_back(args[++i]);
    }
  }
  return out;
}

std::string command_help(const CommandSpec& spec) {
  std::string out = "usage: samebits " + spec.name + " " + spec.synopsis + "\n\n" + spec.summary + "\n";
  if (!spec.options.empty()) {
    out += "\noptions:\n";
    append_options(out, spec.options);
  }
  out += "\nglobal options (before or after the command):\n";
  append_options(out, global_options());
  out += "  -h, --help                  this help\n";
  out += "The output bits never depend on --threads or --simd.\n";
  out +=
      "\nexit status: 0 done, 1 input refused (unreadable or wrong-kind file, failed check), 2 usage error\n";
  out += "\nexample:\n  " + spec.example + "\n";
  return out;
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

void require_samba_checkpoint(const std::string& path, const std::string& command) {
  require_file_kind(path, command, {FileKind::SambaArchive, FileKind::SambaJson},
                    "a Samba checkpoint (v2 archive or legacy JSON)", "checkpoint");
}

bool write_out(const char* data, std::size_t size) {
  if (size != 0 && std::fwrite(data, 1, size, stdout) != size) return false;
  return std::fflush(stdout) == 0;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace samebits::cli
