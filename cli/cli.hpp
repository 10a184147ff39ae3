// Shared pieces of the samebits command-line tool: the commands and their argument helpers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace samebits::cli {

// A usage problem: printed as one line plus the usage text, exit code 2.
struct UsageError {
  std::string message;
};

// Pops "--name VALUE" pairs from args (anywhere after the command); returns the value if present.
std::optional<std::string> take_option(std::vector<std::string>& args, const std::string& name);
bool take_flag(std::vector<std::string>& args, const std::string& name);
// After a command took its options: anything left that looks like an option ("-x", "--x") is a usage error,
// so a misspelt flag is never read as a file name.
void reject_unknown_options(const std::vector<std::string>& args, const std::string& command);
std::int64_t parse_int(const std::string& text, const std::string& option, std::int64_t lo, std::int64_t hi);
double parse_double(const std::string& text, const std::string& option, double lo, double hi);

// The model `generate` and `eval` use when no CHECKPOINT is given: $SAMEBITS_DEFAULT_MODEL if set, else the
// shipped model next to this executable (pip: <package>/assets, cmake install: <prefix>/share/samebits),
// else the source tree's assets/default-model/samba-kjv.ckpt this binary was built from.
std::string default_checkpoint();

// What kind of checkpoint a file is, judged from its first and last bytes (no full parse).
enum class CheckpointKind { Mlp, Samba };
CheckpointKind sniff_checkpoint(const std::string& path);

int command_info(const std::string& path);
int command_mlp_predict(std::vector<std::string> args);
int command_generate(std::vector<std::string> args);
int command_verify(std::vector<std::string> args);
int command_eval(std::vector<std::string> args);

}  // namespace samebits::cli
