// Mamba-1 block, the scalar twin (docs/blocks.md §1.3 literally): gemm_reference, primitives::, one cell at a
// time. Same refusals and same bits as the fast path (forward.cpp).
#include "blocks/mamba1/mamba1.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::blocks {

using fp::F;
using fp::FMA;
using fp::MUL;

void Mamba1Block::forward_reference(const float* x, std::int64_t batch, std::int64_t length,
                                    Mamba1State& state, float* y, const std::string& entry) const {
  using gemm::Orientation;
  const std::int64_t dm = dims_.d_model, di = dims_.d_inner, xr = dims_.x_proj_rows(), R = dims_.dt_rank;
  constexpr std::int64_t N = Mamba1Dims::kState;
  const std::int64_t M = batch * length;
  refuse_non_finite_inputs(x, M * dm, state, entry);
  const Mamba1Weights& w = weights_;

  // 2. RMSNorm, 3. in_proj.
  std::vector<float> normed(static_cast<std::size_t>(M * dm));
  rmsnorm::rmsnorm_reference(x, w[kM1NormWeight].data(), normed.data(), M, dm, kMamba1NormEps);
  std::vector<float> P(static_cast<std::size_t>(M * 2 * di));
  gemm::gemm_reference(Orientation::NT, normed.data(), w[kM1InProj].data(), P.data(), M, 2 * di, dm);

  // 4. A = -F(expf(F(A_log))).
  std::vector<float> A(static_cast<std::size_t>(di * N));
  for (std::int64_t i = 0; i < di * N; ++i) A[i] = -F(primitives::expf(F(w[kM1ALog][i])));

  // 5. causal conv + SiLU, window update.
  std::vector<float> u(static_cast<std::size_t>(M * di));
  conv_.run_reference(P.data(), 2 * di, batch, length, state.conv_window(), u.data());

  // 6. x_proj, 7. dt_proj (k = R), 8. delta.
  std::vector<float> xp(static_cast<std::size_t>(M * xr));
  gemm::gemm_reference(Orientation::NT, u.data(), w[kM1XProj].data(), xp.data(), M, xr, di);
  std::vector<float> dt_low(static_cast<std::size_t>(M * R));
  for (std::int64_t t = 0; t < M; ++t)
    for (std::int64_t j = 0; j < R; ++j) dt_low[t * R + j] = xp[t * xr + j];
  std::vector<float> dtp(static_cast<std::size_t>(M * di));
  gemm::gemm_reference(Orientation::NT, dt_low.data(), w[kM1DtProjWeight].data(), dtp.data(), M, di, R);
  std::vector<float> delta(static_cast<std::size_t>(M * di));
  for (std::int64_t t = 0; t < M; ++t)
    for (std::int64_t d = 0; d < di; ++d)
      delta[t * di + d] = F(primitives::softplus(F(dtp[t * di + d] + F(w[kM1DtProjBias][d]))));

  // 9. the selective scan, each (b, d) independent.
  std::vector<float> scan_y(static_cast<std::size_t>(M * di));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t d = 0; d < di; ++d) {
      float* hs = state.h() + (b * di + d) * N;
      float h[N];
      for (std::int64_t s = 0; s < N; ++s) h[s] = F(hs[s]);
      for (std::int64_t li = 0; li < length; ++li) {
        const std::int64_t t = b * length + li;
        const float uv = F(u[t * di + d]);
        const float dl = F(delta[t * di + d]);
        for (std::int64_t s = 0; s < N; ++s) {
          const float dA = F(primitives::expf(F(MUL(dl, F(A[d * N + s])))));
          const float dB = F(MUL(dl, F(xp[t * xr + R + s])));
          const float dBu = F(MUL(dB, uv));
          h[s] = F(FMA(dA, h[s], dBu));
        }
        float acc = 0.0f;
        for (std::int64_t s = 0; s < N; ++s) acc = F(FMA(F(xp[t * xr + R + N + s]), h[s], acc));
        scan_y[t * di + d] = acc;
      }
      for (std::int64_t s = 0; s < N; ++s) hs[s] = h[s];
    }
  }

  // 10. D skip, 11. gate.
  std::vector<float> gate(static_cast<std::size_t>(M * di));
  for (std::int64_t t = 0; t < M; ++t) {
    for (std::int64_t d = 0; d < di; ++d) {
      const float skip = F(scan_y[t * di + d] + F(MUL(F(u[t * di + d]), F(w[kM1D][d]))));
      gate[t * di + d] = F(MUL(skip, F(primitives::silu(F(P[t * 2 * di + di + d])))));
    }
  }

  // 12. out_proj and the residual.
  std::vector<float> out(static_cast<std::size_t>(M * dm));
  gemm::gemm_reference(Orientation::NT, gate.data(), w[kM1OutProj].data(), out.data(), M, dm, di);
  for (std::int64_t i = 0; i < M * dm; ++i) y[i] = F(F(x[i]) + out[i]);
}

}  // namespace samebits::blocks
