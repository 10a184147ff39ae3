// The samebits command-line tool: dispatch, global options and the one error line of every failure.
#include <cstdio>
#include <exception>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace {

constexpr const char* kUsage =
    "usage: samebits [--threads N] COMMAND ...\n"
    "\n"
    "commands:\n"
    "  --version                        print the version and exit\n"
    "  info CHECKPOINT                  format, config, tensors, weight format and integrity verdict\n"
    "  generate [CHECKPOINT] --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K]\n"
    "           [--top-p P] [--seed S]  stream text from a byte-level (vocab 256) Samba model\n"
    "  verify CHECKPOINT [--batch B] [--length L] [--seed S] [--sabotage]\n"
    "                                   step-by-step decode vs one-shot forward, bit for bit\n"
    "  eval [CHECKPOINT] FILE [--context W] [--batch B]\n"
    "                                   mean cross-entropy and bits per byte of FILE (stateless windows\n"
    "                                   of W bytes, default 512, each from a fresh state)\n"
    "  mlp-predict CHECKPOINT [--input FILE]\n"
    "                                   logits of an MLP checkpoint for rows of 8 floats (FILE or '-';\n"
    "                                   without --input a built-in sample of 4 rows)\n"
    "\n"
    "--threads N sets the worker threads (default: SAMEBITS_NUM_THREADS or all cores); the output bits\n"
    "never depend on it.\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "samebits: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace samebits::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    while (!args.empty() && args[0] == "--threads") {
      if (args.size() < 2) return usage_error("--threads needs a value");
      samebits::set_num_threads(static_cast<int>(parse_int(args[1], "--threads", 1, 256)));
      args.erase(args.begin(), args.begin() + 2);
    }
    if (args.empty()) return usage_error("no command given");
    const std::string command = args[0];
    args.erase(args.begin());
    if (command == "--version" || command == "version") {
      std::printf("samebits %s (numeric mode %s, profile %s)\n", samebits::version(),
                  samebits::numeric_mode(), samebits::neural_arithmetic_profile());
      return 0;
    }
    if (command == "--help" || command == "-h" || command == "help") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (command == "info") {
      reject_unknown_options(args, "info");
      if (args.size() != 1) return usage_error("info takes exactly one CHECKPOINT");
      return command_info(args[0]);
    }
    if (command == "mlp-predict") return command_mlp_predict(args);
    if (command == "generate") return command_generate(args);
    if (command == "verify") return command_verify(args);
    if (command == "eval") return command_eval(args);
    return usage_error("unknown command '" + command + "'");
  } catch (const UsageError& e) {
    return usage_error(e.message);
  } catch (const samebits::Error& e) {
    std::fprintf(stderr, "samebits: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "samebits: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "samebits: internal error: %s\n", e.what());
    return 3;
  }
}
