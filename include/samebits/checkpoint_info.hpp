// What a checkpoint file holds besides the weights a model runs on: the metadata `samebits info` shows,
// for both Samba formats and the SmallMLPTrainer file (docs/formats.md §2-§4). Plain data, no behaviour.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace samebits {

// The first 17 bytes of a streamed Samba v2 archive.
inline constexpr std::string_view kSambaStreamMagic{"MOJOLEARN-SAMBA\x02\n", 17};
// The SmallMLPTrainer file's envelope schema and the trainer state's schema.
inline constexpr std::string_view kMlpFileSchema = "mojolearn.small-mlp-checkpoint.v1";
inline constexpr std::string_view kMlpStateSchema = "mojolearn.small-mlp-trainer.v1";

enum class SambaCheckpointFormat { StreamV2, LegacyJson };

// One of the four arrays a Samba checkpoint stores.
struct SambaArrayRecord {
  std::string name;   // parameters, exp_avg, exp_avg_sq, buf_initialized
  std::string dtype;  // <f4 or <i4
  std::int64_t elements = 0;
  std::string sha256;  // lowercase hex of the array's bytes (v2: the verified descriptor digest)
};

// A Samba checkpoint's envelope and training metadata; nothing here is needed to run the model.
struct SambaCheckpointInfo {
  SambaCheckpointFormat format = SambaCheckpointFormat::StreamV2;
  std::string schema;  // the envelope schema (streamed v2 or legacy JSON)
  std::uint64_t file_bytes = 0;
  std::uint64_t header_bytes = 0;        // v2: the header length; legacy: 0
  std::string integrity_sha256;          // v2: the header digest; legacy: payload_sha256 (both verified)
  std::vector<SambaArrayRecord> arrays;  // the four arrays in file order
  std::string numeric_mode;              // as stored ("" when absent; canonical JSON when not a string)
  std::string numeric_profile;           // "fp32_v1" when the state has no field
  // Canonical JSON of the stored values ("" when the key is absent); read and dropped by inference.
  std::string step_json;             // `t`, the completed optimizer steps
  std::string optimizer_json;        // {"kind": "adamw", "lr": ..., ...}
  std::string schedule_json;         // "null" when no schedule
  std::string rng_json;              // {"counter": ..., "seed": ...}
  std::int64_t parameter_count = 0;  // N
  std::int64_t tensor_count = 0;     // T
};

// The AdamW hyperparameters of a SmallMLPTrainer file as validated: each rounded to float32.
struct MlpAdamWConfig {
  float beta1 = 0.0f;
  float beta2 = 0.0f;
  float eps = 0.0f;
  float lr = 0.0f;
  float weight_decay = 0.0f;
};

// A SmallMLPTrainer file: the weights (C order) and the metadata; the optimizer moments are validated and
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
  std::string arithmetic_profile;  // the neural arithmetic profile when the file omits the key
  std::string payload_sha256;      // lowercase hex, as stored (and verified)
  std::uint64_t file_bytes = 0;
};

}  // namespace samebits
