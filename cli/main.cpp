// The samebits command-line tool: dispatch, global options, help, and the one error line and exit code of
// every failure (docs/cli.md).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace {

using samebits::cli::CommandSpec;

struct Command {
  const CommandSpec& (*spec)();
  int (*run)(const samebits::cli::Args&);
};

const std::vector<Command>& commands() {
  using namespace samebits::cli;
  static const std::vector<Command> table = {
      {&info_spec, &command_info}, {&generate_spec, &command_generate},
      {&chat_spec, &command_chat}, {&verify_spec, &command_verify},
      {&eval_spec, &command_eval}, {&mlp_predict_spec, &command_mlp_predict}};
  return table;
}

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (c.spec().name == name) return &c;
  return nullptr;
}

std::string overview() {
  std::string out =
      "usage: samebits [GLOBAL OPTIONS] COMMAND [ARGS] [OPTIONS]\n"
      "\n"
      "commands:\n";
  for (const Command& c : commands()) {
    std::string line = "  " + c.spec().name;
    line += std::string(line.size() < 18 ? 18 - line.size() : 1, ' ');
    out += line + c.spec().summary.substr(0, c.spec().summary.find('\n')) + "\n";
  }
  out +=
      "  help [COMMAND]  this overview, or one command's usage, options, defaults and an example\n"
      "  version         the version, numeric mode and profile (also --version)\n"
      "\n"
      "global options (before or after the command):\n"
      "  -t, --threads N     worker threads, 1 to 256 (default: SAMEBITS_NUM_THREADS, else every core)\n"
      "      --simd TARGET   scalar, avx2 or avx512 (default: SAMEBITS_SIMD, else the best the CPU has)\n"
      "The output bits never depend on either.\n"
      "\n"
      "exit status: 0 done, 1 input refused (unreadable or wrong-kind file, failed check), 2 usage error,\n"
      "3 internal error (a bug: please report it)\n"
      "\n"
      "example:\n"
      "  samebits generate -p \"In the beginning\" -n 60 --seed 1\n";
  return out;
}

int usage_error(const std::string& message, const std::string& command) {
  std::fprintf(stderr, "samebits: %s\n(run 'samebits %s' for usage)\n", message.c_str(),
               command.empty() ? "help" : (command + " --help").c_str());
  return samebits::cli::kExitUsage;
}

// SAMEBITS_NUM_THREADS and SAMEBITS_SIMD are checked before anything runs: a value the engine would ignore
// is refused by name instead.
void check_environment() {
  using samebits::cli::UsageError;
  if (const char* text = std::getenv("SAMEBITS_NUM_THREADS")) {
    try {
      samebits::cli::parse_int(text, "SAMEBITS_NUM_THREADS", 1, 256);
    } catch (const UsageError&) {
      throw UsageError{"environment variable SAMEBITS_NUM_THREADS must be an integer in [1, 256], got '" +
                       std::string(text) + "'"};
    }
  }
  if (const char* text = std::getenv("SAMEBITS_SIMD")) {
    const std::string value = text;
    if (value != "scalar" && value != "avx2" && value != "avx512")
      throw UsageError{"environment variable SAMEBITS_SIMD must be scalar, avx2 or avx512, got '" + value +
                       "'"};
  }
}

void apply_globals(const samebits::cli::Args& args) {
  using namespace samebits::cli;
  if (const auto threads = args.get("--threads"))
    samebits::set_num_threads(static_cast<int>(parse_int(*threads, "--threads", 1, 256)));
  if (const auto simd = args.get("--simd")) {
    if (*simd != "scalar" && *simd != "avx2" && *simd != "avx512")
      throw UsageError{"--simd must be scalar, avx2 or avx512, got '" + *simd + "'"};
    samebits::set_simd_target(*simd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace samebits::cli;
  // A closed pipe is an EPIPE write error that stops the output quietly, never a signal.
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command;
  try {
    check_environment();
    // Global options before the command.
    static const CommandSpec kGlobal{"", "", "", {}, ""};
    std::vector<std::string> lead;
    while (!args.empty() && args[0].size() > 1 && args[0][0] == '-') {
      const std::string name = args[0].substr(0, args[0].find('='));
      if (name != "--threads" && name != "-t" && name != "--simd") break;
      const bool inline_value = name.size() != args[0].size();
      const std::size_t take = inline_value ? 1 : std::min<std::size_t>(2, args.size());
      lead.insert(lead.end(), args.begin(), args.begin() + static_cast<std::ptrdiff_t>(take));
      args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(take));
    }
    Args globals = parse_args(kGlobal, lead, {});
    if (args.empty()) {
      apply_globals(globals);
      return usage_error("no command given", "");
    }
    command = args[0];
    args.erase(args.begin());
    if (command == "serve") return command_serve(args, lead);  // cli/serve.cpp: the Python server
    if (command == "--version" || command == "version") {
      apply_globals(parse_args(CommandSpec{command, "", "", {}, ""}, args, globals));
      std::printf("samebits %s (numeric mode %s, profile %s)\n", samebits::version(),
                  samebits::numeric_mode(), samebits::neural_arithmetic_profile());
      return kExitOk;
    }
    if (command == "--help" || command == "-h" || command == "help") {
      if (args.empty()) {
        std::printf("%s", overview().c_str());
        return kExitOk;
      }
      const Command* target = find_command(args[0]);
      if (target == nullptr || args.size() > 1) {
        command.clear();
        return usage_error("help: unknown command '" + args[0] + "'", "");
      }
      std::printf("%s", command_help(target->spec()).c_str());
      return kExitOk;
    }
    const Command* target = find_command(command);
    if (target == nullptr) {
      const std::string unknown = command;
      command.clear();
      return usage_error("unknown command '" + unknown + "'", "");
    }
    const Args parsed = parse_args(target->spec(), args, globals);
    apply_globals(parsed);
    return target->run(parsed);
  } catch (const HelpRequest& help) {
    const Command* target = find_command(help.command);
    std::printf("%s", target != nullptr ? command_help(target->spec()).c_str() : overview().c_str());
    return kExitOk;
  } catch (const UsageError& e) {
    return usage_error(e.message, find_command(command) != nullptr ? command : "");
  } catch (const samebits::Error& e) {
    std::fprintf(stderr, "samebits: %s\n", e.what());
    return kExitRefused;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "samebits: out of memory\n");
    return kExitRefused;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "samebits: internal error: %s\n", e.what());
    return 3;
  }
}
