// Shared fixtures of the Samba tests: configs by their fields, the upstream worked example, and
// deterministic flat parameter vectors (norm weights near one, the rest small).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/samba_config.hpp"
#include "test_support.hpp"

namespace samebits::testing {

inline models::SambaConfigArgs samba_args(std::int64_t vocab, std::int64_t d_model,
                                          std::vector<std::string> layers, std::int64_t n_heads,
                                          std::int64_t intermediate, bool tied = true,
                                          std::optional<std::int64_t> n_kv_heads = std::nullopt) {
  models::SambaConfigArgs args;
  args.vocab = vocab;
  args.d_model = d_model;
  args.layers = std::move(layers);
  args.n_heads = n_heads;
  args.n_kv_heads = n_kv_heads;
  args.intermediate = intermediate;
  args.tie_embeddings = tied;
  return args;
}

// docs/formats.md's worked example: vocab 256, d_model 32, [mamba3, attention], n_heads 2, intermediate 64,
// tied.
inline models::SambaConfigArgs upstream_example_args() {
  return samba_args(256, 32, {"mamba3", "attention"}, 2, 64);
}

// The registry-order flat vector: every other weight uniform * scale; norm weights 1, or 1 + 0.1 * uniform
// with `jitter_norms` (which then draw from the generator too).
inline std::vector<float> samba_parameters(const models::SambaConfig& config, std::uint64_t seed, float scale,
                                           bool jitter_norms = false) {
  const models::SambaRegistry registry = config.registry();
  Rng rng(seed);
  std::vector<float> flat(static_cast<std::size_t>(registry.total));
  for (const auto& entry : registry.entries) {
    const bool is_norm = entry.name.find("norm") != std::string::npos;
    for (std::int64_t i = 0; i < entry.size; ++i)
      flat[static_cast<std::size_t>(entry.offset + i)] = !is_norm       ? rng.uniform() * scale
                                                         : jitter_norms ? 1.0f + 0.1f * rng.uniform()
                                                                        : 1.0f;
  }
  return flat;
}

}  // namespace samebits::testing
