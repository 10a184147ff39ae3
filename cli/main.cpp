// The samebits command-line tool: version, checkpoint inspection and MLP prediction.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "api/samebits.hpp"
#include "io/mlp_checkpoint.hpp"

namespace {

constexpr const char* kUsage =
    "usage: samebits [--threads N] COMMAND ...\n"
    "\n"
    "commands:\n"
    "  --version                      print the version and exit\n"
    "  info CHECKPOINT                kind, config, tensor table, weight format and integrity verdict\n"
    "  mlp-predict CHECKPOINT [--input FILE]\n"
    "                                 logits of an MLP checkpoint for rows of 8 floats read from FILE\n"
    "                                 (whitespace separated; '-' is standard input); without --input a\n"
    "                                 built-in sample of 4 rows is used\n"
    "\n"
    "--threads N sets the worker threads (default: SAMEBITS_NUM_THREADS or all cores); the output bits\n"
    "never depend on it.\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "samebits: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return samebits::shape_repr(shape); }

void print_tensor_row(const char* name, const std::vector<std::int64_t>& shape, const float* data) {
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  float lo = data[0], hi = data[0];
  for (std::int64_t i = 1; i < count; ++i) {
    lo = data[i] < lo ? data[i] : lo;
    hi = data[i] > hi ? data[i] : hi;
  }
  std::printf("  %-8s %-8s %-7s %6lld  min %-+14.7g max %-+14.7g\n", name, shape_text(shape).c_str(), "<f4",
              static_cast<long long>(count), lo, hi);
}

int command_info(const std::string& path) {
  std::printf("file: %s\n", path.c_str());
  samebits::io::MlpCheckpoint ckpt;
  try {
    ckpt = samebits::io::read_mlp_checkpoint(path);
  } catch (const samebits::Error& e) {
    std::printf("kind: SmallMLPTrainer checkpoint (%s) expected\n", samebits::io::kMlpFileSchema.data());
    std::printf("integrity: REFUSED: %s\n", e.what());
    return 1;
  }
  std::printf("kind: SmallMLPTrainer checkpoint (%s, state %s)\n", samebits::io::kMlpFileSchema.data(),
              samebits::io::kMlpStateSchema.data());
  std::printf("size: %llu bytes\n", static_cast<unsigned long long>(ckpt.file_bytes));
  std::printf("architecture: [8, 16, 3] (ReLU hidden layer)\n");
  std::printf("numeric mode: %s\n", ckpt.numeric_mode.c_str());
  std::printf("arithmetic profile: %s\n", ckpt.arithmetic_profile.c_str());
  std::printf("config: AdamW lr %.9g beta1 %.9g beta2 %.9g eps %.9g weight_decay %.9g, step %lld\n",
              ckpt.config.lr, ckpt.config.beta1, ckpt.config.beta2, ckpt.config.eps, ckpt.config.weight_decay,
              static_cast<long long>(ckpt.optimizer_step));
  std::printf("data_schedule: %s\n", ckpt.data_schedule_canonical.c_str());
  std::printf("weight format: float32\n");
  std::printf("tensors:\n");
  print_tensor_row("weight1", {16, 8}, ckpt.weight1.data());
  print_tensor_row("bias1", {16}, ckpt.bias1.data());
  print_tensor_row("weight2", {3, 16}, ckpt.weight2.data());
  print_tensor_row("bias2", {3}, ckpt.bias2.data());
  std::printf("integrity: OK (payload sha256 %s verified; payload fully validated)\n", ckpt.payload_sha256.c_str());
  return 0;
}

// The built-in sample: four rows that exercise both signs and a range of magnitudes.
std::vector<float> sample_rows() {
  return {0.5f,  -1.25f, 2.0f,   0.0f,  -0.75f, 1.5f,   -2.0f, 0.25f,  //
          -1.0f, 0.125f, 0.875f, -0.5f, 1.75f,  -1.5f,  0.0f,  1.0f,   //
          2.5f,  2.5f,   -2.5f,  -2.5f, 0.3f,   0.6f,   -0.9f, 1.2f,   //
          0.0f,  0.0f,   0.0f,   0.0f,  0.0f,   0.0f,   0.0f,  0.0f};
}

bool read_rows(const std::string& source, std::vector<float>& values, std::string& error) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (source != "-") {
    file.open(source);
    if (!file) {
      error = "cannot open input file '" + source + "'";
      return false;
    }
    in = &file;
  }
  std::string token;
  while (*in >> token) {
    char* end = nullptr;
    float v = std::strtof(token.c_str(), &end);
    if (end == token.c_str() || *end != '\0') {
      error = "input value '" + token + "' is not a number";
      return false;
    }
    values.push_back(v);
  }
  if (values.empty() || values.size() % 8 != 0) {
    error = "input must hold rows of 8 values; got " + std::to_string(values.size()) + " values";
    return false;
  }
  return true;
}

int command_mlp_predict(const std::string& path, const std::string& input) {
  std::vector<float> rows = input.empty() ? sample_rows() : std::vector<float>{};
  if (!input.empty()) {
    std::string error;
    if (!read_rows(input, rows, error)) return usage_error(error);
  }
  const auto model = samebits::MLPInference::from_checkpoint(path);
  const std::int64_t count = static_cast<std::int64_t>(rows.size() / 8);
  const std::vector<float> logits = model.predict_logits({rows.data(), {count, 8}});
  std::printf("# %s: logits (rows %lld, classes 3), threads %d, weight format %s\n", path.c_str(),
              static_cast<long long>(count), samebits::num_threads(), model.weight_format().c_str());
  for (std::int64_t r = 0; r < count; ++r) {
    int best = 0;
    for (int c = 1; c < 3; ++c)
      if (logits[r * 3 + c] > logits[r * 3 + best]) best = c;
    std::printf("row %lld: % .9g % .9g % .9g  -> class %d\n", static_cast<long long>(r), logits[r * 3],
                logits[r * 3 + 1], logits[r * 3 + 2], best);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    // Global options first.
    while (!args.empty() && args[0] == "--threads") {
      if (args.size() < 2) return usage_error("--threads needs a value");
      char* end = nullptr;
      long n = std::strtol(args[1].c_str(), &end, 10);
      if (end == args[1].c_str() || *end != '\0' || n < 1 || n > 256)
        return usage_error("--threads must be an integer in [1, 256], got '" + args[1] + "'");
      samebits::set_num_threads(static_cast<int>(n));
      args.erase(args.begin(), args.begin() + 2);
    }
    if (args.empty()) return usage_error("no command given");
    const std::string command = args[0];
    if (command == "--version" || command == "version") {
      std::printf("samebits %s (numeric mode %s, profile %s)\n", samebits::version(), samebits::numeric_mode(),
                  samebits::neural_arithmetic_profile());
      return 0;
    }
    if (command == "--help" || command == "-h" || command == "help") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (command == "info") {
      if (args.size() != 2) return usage_error("info takes exactly one CHECKPOINT");
      return command_info(args[1]);
    }
    if (command == "mlp-predict") {
      if (args.size() < 2) return usage_error("mlp-predict needs a CHECKPOINT");
      std::string input;
      for (std::size_t i = 2; i < args.size(); ++i) {
        if (args[i] == "--input" && i + 1 < args.size()) {
          input = args[++i];
        } else {
          return usage_error("unknown argument '" + args[i] + "' for mlp-predict");
        }
      }
      return command_mlp_predict(args[1], input);
    }
    return usage_error("unknown command '" + command + "'");
  } catch (const samebits::Error& e) {
    std::fprintf(stderr, "samebits: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "samebits: internal error: %s\n", e.what());
    return 3;
  }
}
