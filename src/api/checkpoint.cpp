// Checkpoint inspection (samebits/checkpoint.hpp): the io readers' results in public form.
#include <samebits/checkpoint.hpp>
#include <utility>

#include "io/mlp_checkpoint.hpp"
#include "io/samba_checkpoint.hpp"

namespace samebits {

SambaCheckpointContents read_samba_checkpoint(const std::string& path) {
  io::SambaCheckpoint checkpoint = io::read_samba_checkpoint(path);
  SambaConfig config(checkpoint.config);
  std::vector<SambaTensorEntry> registry = config.registry();
  return {std::move(config), std::move(registry), std::move(checkpoint.parameters),
          std::move(checkpoint.info)};
}

MlpCheckpoint read_mlp_checkpoint(const std::string& path) { return io::read_mlp_checkpoint(path); }

}  // namespace samebits
