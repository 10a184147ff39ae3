// Shared pieces of the samebits command-line tool: the option tables of the commands, their parser and
// help text, and the commands (docs/cli.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace samebits::cli {

// Exit codes (docs/cli.md §2).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;
inline constexpr int kExitUsage = 2;

// A usage problem: printed as one line plus a pointer to the help, exit code 2.
struct UsageError {
  std::string message;
};

// `--help` / `-h` / `help COMMAND`: print that command's help and exit 0.
struct HelpRequest {
  std::string command;
};

// One option of a command: long name, optional short name, value placeholder (empty for a flag).
struct OptionSpec {
  std::string name;          // "--max-tokens"
  std::string short_name;    // "-n" or ""
  std::string value;         // "N", or "" for a flag
  std::string default_text;  // shown as "(default: ...)"; "" shows none
  std::string help;
  bool repeatable = false;  // may be given more than once (values collected in order)
};

// A command: its synopsis line, what it does, its options and an example.
struct CommandSpec {
  std::string name;
  std::string synopsis;  // after "samebits NAME"
  std::string summary;
  std::vector<OptionSpec> options;
  std::string example;
};

// The parsed command line of one command.
class Args {
 public:
  // The value of an option, if given (the last one for a repeatable option).
  std::optional<std::string> get(const std::string& name) const;
  // Every value of a repeatable option, in order.
  std::vector<std::string> all(const std::string& name) const;
  bool flag(const std::string& name) const { return values_.count(name) != 0; }
  // The integer value of option `name` (`fallback` when absent), in [lo, hi], else a UsageError.
  std::int64_t integer(const std::string& name, const std::string& fallback, std::int64_t lo,
                       std::int64_t hi) const;
  // The only positional argument, named `noun` ("CHECKPOINT") in the UsageError for none or several.
  const std::string& single(const std::string& noun) const;
  std::vector<std::string> positional;
  std::string command;

 private:
  friend Args parse_args(const CommandSpec&, const std::vector<std::string>&, Args);
  std::map<std::string, std::vector<std::string>> values_;
};

// The options every command takes, before or after the command name (--threads, --simd).
const std::vector<OptionSpec>& global_options();

// Parses `args` (everything after the command name) against `spec` plus the global options, on top of
// `globals` (the global options given before the command). Throws UsageError for an unknown or repeated
// option or a missing value, HelpRequest for --help / -h.
Args parse_args(const CommandSpec& spec, const std::vector<std::string>& args, Args globals);

// The help text of one command (usage, every option with its default, exit codes, an example).
std::string command_help(const CommandSpec& spec);

std::int64_t parse_int(const std::string& text, const std::string& option, std::int64_t lo, std::int64_t hi);
double parse_double(const std::string& text, const std::string& option, double lo, double hi);

// The model `generate` and `eval` use when no CHECKPOINT is given: $SAMEBITS_DEFAULT_MODEL if set, else the
// shipped model next to this executable (pip: <package>/assets, cmake install: <prefix>/share/samebits),
// else the source tree's assets/default-model/samba-kjv.ckpt this binary was built from.
std::string default_checkpoint();

// Refuses (samebits::Error, exit 1) a CHECKPOINT that is not a Samba checkpoint, naming both kinds.
void require_samba_checkpoint(const std::string& path, const std::string& command);

// Writes bytes to stdout and flushes; false once the reader has gone (a closed pipe), so the caller stops.
bool write_out(const char* data, std::size_t size);

// A JSON string literal of `text` (quotes and escapes included).
std::string json_string(const std::string& text);

const CommandSpec& info_spec();
const CommandSpec& generate_spec();
const CommandSpec& verify_spec();
const CommandSpec& eval_spec();
const CommandSpec& mlp_predict_spec();
const CommandSpec& chat_spec();

int command_info(const Args& args);
int command_mlp_predict(const Args& args);
int command_generate(const Args& args);
int command_verify(const Args& args);
int command_eval(const Args& args);
int command_chat(const Args& args);
// `serve` hands its raw arguments (and the global options given before it) to python3 -m samebits.serve.
int command_serve(const std::vector<std::string>& args, const std::vector<std::string>& global_options);

}  // namespace samebits::cli
