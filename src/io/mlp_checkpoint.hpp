// Reader of SmallMLPTrainer checkpoint files (docs/formats.md §4): every check, in order, with upstream's
// messages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace samebits::io {

inline constexpr std::size_t kMlpFileLimit = 32768;  // bytes, final newline included
inline constexpr std::string_view kMlpFileSchema = "mojolearn.small-mlp-checkpoint.v1";
inline constexpr std::string_view kMlpStateSchema = "mojolearn.small-mlp-trainer.v1";
// The engine's neural arithmetic profile (docs/formats.md §8.3); also the default of the
// optional envelope key `arithmetic_profile`.
inline constexpr std::string_view kNeuralArithmeticProfile = "mojolearn.neural-training.fp32.v1";
// samebits serves only the identical tier, so that is the process mode a file must have been saved under.
inline constexpr std::string_view kProcessNumericMode = "identical";

// The AdamW hyperparameters as validated: each rounded to float32.
struct MlpAdamWConfig {
  float beta1 = 0.0f;
  float beta2 = 0.0f;
  float eps = 0.0f;
  float lr = 0.0f;
  float weight_decay = 0.0f;
};

// Weights (C order) plus the metadata an `info` command shows; the optimizer moments are validated and
// dropped.
struct MlpCheckpoint {
  std::array<float, 128> weight1{};  // (16, 8)
  std::array<float, 16> bias1{};
  std::array<float, 48> weight2{};  // (3, 16)
  std::array<float, 3> bias2{};
  std::int64_t optimizer_step = 0;
  MlpAdamWConfig config;
  std::string data_schedule_canonical;  // canonical JSON of the validated data_schedule
  std::string numeric_mode;
  std::string arithmetic_profile;  // kNeuralArithmeticProfile when the file omits the key
  std::string payload_sha256;      // lowercase hex, as stored (and verified)
  std::uint64_t file_bytes = 0;
};

// Reads at most kMlpFileLimit + 1 bytes of `path` and decodes them. Every failure, including a file
// that cannot be opened or read, is a samebits::Error of kind Value with mojolearn's sentence
// ("MLPInference checkpoint …" for the file checks, "SmallMLPTrainer …" for the state checks).
MlpCheckpoint read_mlp_checkpoint(const std::string& path);

// The same checks on file contents already in memory.
MlpCheckpoint decode_mlp_checkpoint(std::string_view file_bytes);

}  // namespace samebits::io
