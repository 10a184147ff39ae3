// The Mamba-2 / Mamba-3 block norm, in_proj, out_proj and residual over whole rows.
#include "blocks/common/ssm_projections.hpp"

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::blocks {

void ssm_project_in(const float* x, std::int64_t rows, std::int64_t d_model, const float* norm_weight,
                    float eps, const gemm::PackedRhs& in_proj, float* normed, float* proj) {
  rmsnorm::rmsnorm(x, norm_weight, normed, rows, d_model, eps);
  gemm::gemm_packed({normed, d_model, 1}, rows, in_proj, proj);
}

void ssm_project_out(const float* gated, std::int64_t rows, std::int64_t d_inner, std::int64_t d_model,
                     const gemm::PackedRhs& out_proj, const float* x, float* out, float* y) {
  using fp::F;
  gemm::gemm_packed({gated, d_inner, 1}, rows, out_proj, out);
  // The residual, rows side by side (a decode step's row or two stay on this thread).
  parallel_for(
      rows,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin * d_model; i < end * d_model; ++i) y[i] = F(F(x[i]) + out[i]);
      },
      grain_for_work(rows, 3 * d_model * static_cast<std::int64_t>(sizeof(float))));
}

}  // namespace samebits::blocks
