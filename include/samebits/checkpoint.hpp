// Checkpoint inspection: read a Samba or SmallMLPTrainer checkpoint with every integrity and validity check,
// and get its config, weights and metadata (what `samebits info` prints) without building a model.
#pragma once

#include <cstdint>
#include <samebits/checkpoint_info.hpp>
#include <samebits/samba.hpp>
#include <string>
#include <vector>

namespace samebits {

// A Samba checkpoint as read: the validated config, its registry (the file's (name, shape) list equals
// it), every weight in the registry's flat float32 layout, and the envelope metadata.
struct SambaCheckpointContents {
  SambaConfig config;
  std::vector<SambaTensorEntry> registry;
  std::vector<float> parameters;
  SambaCheckpointInfo info;
};

// The checks of SambaInference::from_checkpoint (docs/formats.md §2, §3), in its order, without building the
// model. Every failure, a file that cannot be opened included, is a ValueError with upstream's sentence.
SambaCheckpointContents read_samba_checkpoint(const std::string& path);

// A SmallMLPTrainer checkpoint (docs/formats.md §4), read (at most 32 KiB) and fully validated; every
// failure is a ValueError with upstream's sentence.
MlpCheckpoint read_mlp_checkpoint(const std::string& path);

}  // namespace samebits
