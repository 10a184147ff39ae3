// Samba checkpoints (docs/formats.md §3): SambaConfig <-> JSON, and the readers of the streamed v2 archive
// and the legacy JSON file, with every upstream check in upstream's order and upstream's sentences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <samebits/checkpoint_info.hpp>
#include <samebits/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/samba_config.hpp"

namespace samebits::io {

using samebits::kSambaStreamMagic;
inline constexpr std::string_view kSambaStreamSchema = "mojolearn.samba-stream.v2";
inline constexpr std::string_view kSambaStateSchema = "mojolearn.samba-stack-state.v1";
inline constexpr std::string_view kSambaStackProfile = "mojolearn.samba-stack.fp32.v1";
inline constexpr std::string_view kSambaLegacySchema = "mojolearn.samba-stack-json-checkpoint.v1";
inline constexpr std::uint64_t kSambaHeaderLimit = 1024 * 1024;        // header bytes, v2
inline constexpr std::uint64_t kSambaLegacyLimit = 256 * 1024 * 1024;  // whole file, legacy JSON
inline constexpr std::size_t kSambaStreamChunk = 1024 * 1024;          // read and hash granularity
inline constexpr std::string_view kSambaNumericProfile = "fp32_v1";  // the only profile this engine computes

// SambaConfig.to_dict(): the ten keys in upstream's order (canonical_json sorts them).
json::Value samba_config_to_json(const models::SambaConfig& config);

// SambaConfig.from_dict(d): the ten keys are read by name (extras ignored), then the constructor's rules
// run. Stricter than Python's int()/bool()/float() (docs/formats.md §3.13, §8.4): integer fields take
// JSON integers (or null where the field is optional), layers a list of strings, tie_embeddings a bool,
// norm_eps/dropout a JSON number. Every refusal is a samebits::Error of kind Value.
models::SambaConfig samba_config_from_json(const json::Value& dict);

// The metadata structs are public (samebits/checkpoint_info.hpp).
using samebits::SambaArrayRecord;
using samebits::SambaCheckpointFormat;
using samebits::SambaCheckpointInfo;

struct SambaCheckpoint {
  models::SambaConfig config;
  models::SambaRegistry registry;  // config.registry(); the file's (name, shape) list equals it
  // Every weight, float32, in the registry's layout: tensor i is C-order at
  // [registry.entries[i].offset, + size). Legacy files sliced by their own offsets are repacked here.
  std::vector<float> parameters;
  SambaCheckpointInfo info;

  std::span<const float> weight(std::size_t index) const;
  // Throws samebits::Error (kind Value) for a name outside the registry.
  std::span<const float> weight(std::string_view name) const;
};

// The same weights with one buffer per registry tensor, in registry order: what SambaInference takes
// over without a copy (SambaInference::from_checkpoint reads this form).
struct SambaCheckpointTensors {
  models::SambaConfig config;
  models::SambaRegistry registry;
  std::vector<std::vector<float>> tensors;  // tensors[i] holds registry.entries[i].size floats
  SambaCheckpointInfo info;
};

// SambaInference.from_checkpoint's reading half: dispatches on the first 17 bytes (the v2 magic selects
// the streamed reader, anything else the legacy JSON reader), verifies the whole container, then the
// inference checks: schema/profile, config, registry (name, shape) == the config's, numeric profile
// absent or fp32_v1 (Open point 8.6), and every weight finite. Optimizer, schedule and RNG state are
// checked only as far as the container reader checks them, and dropped. Every failure, including a file
// that cannot be opened, is samebits::Error of kind Value with upstream's sentence.
SambaCheckpoint read_samba_checkpoint(const std::string& path);
// The same checks, in the same order, with the weights in per-tensor buffers.
SambaCheckpointTensors read_samba_checkpoint_tensors(const std::string& path);

// The two readers on their own (the stream readers check the magic themselves). Memory: the v2 reader
// holds the header (at most 1 MiB), one 1 MiB chunk and the N parameters (read straight into their
// final buffers), allocated only after the file size matched the verified header, so N is bounded by
// the file's real size; the legacy reader holds the file (at most 256 MiB) until its integrity is
// proven, its parse, and the decoded arrays.
SambaCheckpoint read_samba_stream_checkpoint(const std::string& path);
SambaCheckpoint read_samba_legacy_checkpoint(const std::string& path);
SambaCheckpointTensors read_samba_stream_checkpoint_tensors(const std::string& path);
SambaCheckpointTensors read_samba_legacy_checkpoint_tensors(const std::string& path);

}  // namespace samebits::io
