// Reader of SmallMLPTrainer checkpoint files (docs/formats.md §4): every check, in order, with upstream's
// messages.
#pragma once

#include <cstddef>
#include <samebits/checkpoint_info.hpp>
#include <string>
#include <string_view>

namespace samebits::io {

inline constexpr std::size_t kMlpFileLimit = 32768;  // bytes, final newline included
using samebits::kMlpFileSchema;
using samebits::kMlpStateSchema;
// The engine's neural arithmetic profile (docs/formats.md §8.3); also the default of the
// optional envelope key `arithmetic_profile`.
inline constexpr std::string_view kNeuralArithmeticProfile = "mojolearn.neural-training.fp32.v1";
// samebits serves only the identical tier, so that is the process mode a file must have been saved under.
inline constexpr std::string_view kProcessNumericMode = "identical";

// The decoded file is public (samebits/checkpoint_info.hpp).
using samebits::MlpAdamWConfig;
using samebits::MlpCheckpoint;

// Reads at most kMlpFileLimit + 1 bytes of `path` and decodes them. Every failure, including a file
// that cannot be opened or read, is a samebits::Error of kind Value with mojolearn's sentence
// ("MLPInference checkpoint …" for the file checks, "SmallMLPTrainer …" for the state checks).
MlpCheckpoint read_mlp_checkpoint(const std::string& path);

// The same checks on file contents already in memory.
MlpCheckpoint decode_mlp_checkpoint(std::string_view file_bytes);

}  // namespace samebits::io
