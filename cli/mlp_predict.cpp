// `samebits mlp-predict CHECKPOINT [--input FILE]`: logits of the 8-16-3 MLP for rows of 8 floats.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <samebits/file_kind.hpp>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace samebits::cli {
namespace {

// The built-in sample: four rows that exercise both signs and a range of magnitudes.
std::vector<float> sample_rows() {
  return {0.5f,  -1.25f, 2.0f,   0.0f,  -0.75f, 1.5f,  -2.0f, 0.25f,  //
          -1.0f, 0.125f, 0.875f, -0.5f, 1.75f,  -1.5f, 0.0f,  1.0f,   //
          2.5f,  2.5f,   -2.5f,  -2.5f, 0.3f,   0.6f,  -0.9f, 1.2f,   //
          0.0f,  0.0f,   0.0f,   0.0f,  0.0f,   0.0f,  0.0f,  0.0f};
}

std::vector<float> read_rows(const std::string& source) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (source != "-") {
    // Missing, directory or unreadable: one sentence, exit 1; a checkpoint or binary file is named.
    require_file_kind(source, "mlp-predict --input", {FileKind::Text, FileKind::Empty},
                      "a text file of numbers (8 per row)", "input file");
    file.open(source);
    if (!file) throw UsageError{"cannot open input file '" + source + "'"};
    in = &file;
  }
  std::vector<float> values;
  std::string token;
  while (*in >> token) {
    char* end = nullptr;
    const float v = std::strtof(token.c_str(), &end);
    if (end == token.c_str() || *end != '\0') throw UsageError{"input value '" + token + "' is not a number"};
    values.push_back(v);
  }
  if (values.empty() || values.size() % 8 != 0)
    throw UsageError{"input must hold rows of 8 values; got " + std::to_string(values.size()) + " values"};
  return values;
}

}  // namespace

const CommandSpec& mlp_predict_spec() {
  static const CommandSpec spec{
      "mlp-predict",
      "CHECKPOINT [--input FILE]",
      "logits of an MLP checkpoint for rows of 8 floats\n"
      "Reads whitespace-separated numbers, 8 per row (1 to 256 rows), and prints the 3 logits and the class\n"
      "of each row.",
      {{"--input", "", "FILE", "4 built-in rows", "the rows; '-' reads standard input"}},
      "samebits mlp-predict assets/mlp-demo.ckpt --input rows.txt"};
  return spec;
}

int command_mlp_predict(const Args& args) {
  const auto input = args.get("--input");
  const std::string& path = args.single("CHECKPOINT");
  require_file_kind(path, "mlp-predict", {FileKind::MlpCheckpoint}, "an MLP checkpoint",
                    "MLPInference checkpoint");
  const std::vector<float> rows = input ? read_rows(*input) : sample_rows();
  const auto model = MLPInference::from_checkpoint(path);
  const auto count = static_cast<std::int64_t>(rows.size() / 8);
  const std::vector<float> logits = model.predict_logits({rows.data(), {count, 8}});
  std::printf("# %s: logits (rows %lld, classes 3), threads %d, weight format %s\n", path.c_str(),
              static_cast<long long>(count), num_threads(), model.weight_format().c_str());
  for (std::int64_t r = 0; r < count; ++r) {
    int best = 0;
    for (int c = 1; c < 3; ++c)
      if (logits[r * 3 + c] > logits[r * 3 + best]) best = c;
    std::printf("row %lld: % .9g % .9g % .9g  -> class %d\n", static_cast<long long>(r), logits[r * 3],
                logits[r * 3 + 1], logits[r * 3 + 2], best);
  }
  return 0;
}

}  // namespace samebits::cli
