// The transformer options of TransformerBlockInference in upstream's wording (docs/models.md §2): from the
// API record to the block's record, and the weight names they call for.
#pragma once

#include <cstdint>
#include <samebits/transformer.hpp>
#include <string>
#include <vector>

#include "blocks/transformer/options.hpp"

namespace samebits::transformer_options {

// The block record of `options`, refusing (ValueError, "<what>: ...") what upstream's constructor refuses
// before it knows head_dim: theta, rope_scaling and its keys, max_positions, norm, norm_eps, norm_bias,
// mlp, qk_norm with layernorm, attn_softcap. rope_dim is left at 0 (see check_rope_dim).
blocks::BlockOptions block_options(const TransformerOptions& options, const std::string& what);
// rope_dim against head_dim: "rope_dim must be an even integer in (0, head_dim=H], got R"; returns the
// block's encoding (0 when it equals head_dim or is not given).
std::int64_t check_rope_dim(const TransformerOptions& options, std::int64_t head_dim,
                            const std::string& what);
// Optional tensors present with their option off or missing with it on, a gate_proj.weight on an ungated
// MLP, in that order (docs/models.md §2).
void check_optional_names(const std::vector<std::string>& names, const blocks::BlockOptions& options,
                          const std::string& mlp_name, const std::string& what);
// The exact key set: the nine base names (less gate_proj.weight when ungated), then the optional names
// that are on.
std::vector<std::string> expected_names(const std::vector<std::string>& base,
                                        const blocks::BlockOptions& options);

}  // namespace samebits::transformer_options
