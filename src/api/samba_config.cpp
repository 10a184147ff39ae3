// SambaConfig, the public handle: the engine's validated config (models/samba_config.hpp) and its JSON form
// (io/samba_checkpoint.hpp).
#include "models/samba_config.hpp"

#include <samebits/errors.hpp>
#include <samebits/samba.hpp>

#include "api/api_access.hpp"
#include "io/samba_checkpoint.hpp"

namespace samebits {

SambaConfig::SambaConfig(const models::SambaConfig& config)
    : impl_(std::make_shared<const models::SambaConfig>(config)) {}

SambaConfig SambaConfig::from_json(const json::Value& dict) {
  return SambaConfig(io::samba_config_from_json(dict));
}

json::Value SambaConfig::to_json() const { return io::samba_config_to_json(*impl_); }

std::int64_t SambaConfig::vocab() const { return impl_->vocab(); }
std::int64_t SambaConfig::d_model() const { return impl_->d_model(); }
const std::vector<std::string>& SambaConfig::layers() const { return impl_->layers(); }
std::optional<std::int64_t> SambaConfig::n_heads() const { return impl_->n_heads(); }
std::optional<std::int64_t> SambaConfig::n_kv_heads() const { return impl_->n_kv_heads(); }
std::optional<std::int64_t> SambaConfig::head_dim() const { return impl_->head_dim(); }
std::optional<std::int64_t> SambaConfig::intermediate() const { return impl_->intermediate(); }
bool SambaConfig::tie_embeddings() const { return impl_->tie_embeddings(); }
double SambaConfig::norm_eps() const { return impl_->norm_eps(); }

std::vector<SambaTensorEntry> SambaConfig::registry() const {
  const models::SambaRegistry registry = impl_->registry();
  if (!registry.exact)
    throw_value_error("samebits.SambaConfig: the registry's sizes do not fit 64-bit integers");
  std::vector<SambaTensorEntry> entries;
  entries.reserve(registry.entries.size());
  for (const models::SambaRegistryEntry& entry : registry.entries)
    entries.push_back({entry.name, entry.shape, entry.offset, entry.size});
  return entries;
}

std::vector<TensorInfo> SambaConfig::block_shapes(const std::string& kind) const {
  std::vector<TensorInfo> shapes;
  for (const models::TensorSpec& spec : impl_->block_shapes(kind)) shapes.push_back({spec.name, spec.shape});
  return shapes;
}

}  // namespace samebits
