// The row-wise ends the Mamba-2 and Mamba-3 blocks share: the block norm and in_proj before the scan,
// out_proj and the residual after it (docs/blocks.md §2.3).
#pragma once

#include <cstdint>

#include "numerics/gemm.hpp"

namespace samebits::blocks {

// normed[rows, d_model] = rmsnorm(x) with `norm_weight` and `eps`, then proj = normed · in_projᵀ (each
// row's bits those of the row alone).
void ssm_project_in(const float* x, std::int64_t rows, std::int64_t d_model, const float* norm_weight,
                    float eps, const gemm::PackedRhs& in_proj, float* normed, float* proj);

// out[rows, d_model] = gated[rows, d_inner] · out_projᵀ, then the residual y = F(F(x) + out) per element.
void ssm_project_out(const float* gated, std::int64_t rows, std::int64_t d_inner, std::int64_t d_model,
                     const gemm::PackedRhs& out_proj, const float* x, float* out, float* y);

}  // namespace samebits::blocks
