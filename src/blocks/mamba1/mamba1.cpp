// Mamba-1 block forward (blocks.md 1.3): the fast path over packed GEMMs and channel-vector kernels, and
// the literal scalar twin. Both refuse non-finite data first and update the state in place.
#include "blocks/mamba1/mamba1.hpp"

#include <algorithm>
#include <bit>
#include <utility>

#include "blocks/common/block_support.hpp"
#include "core/errors.hpp"
#include "core/state_size.hpp"
#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/rmsnorm.hpp"
#include "numerics/selective_scan.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::blocks {

using fp::F;
using fp::FMA;
using fp::MUL;

namespace {

constexpr float kNormEps = 1e-5f;
static_assert(std::bit_cast<std::uint32_t>(kNormEps) == 0x3727C5ACu,
              "Mamba RMSNorm eps differs from Appendix A");

// Rows per parallel task so that a task holds at least ~`work` cells of `cells_per_row`.
std::int64_t grain_for(std::int64_t cells_per_row, std::int64_t work = 16384) {
  return std::max<std::int64_t>(1, work / std::max<std::int64_t>(1, cells_per_row));
}

}  // namespace

Mamba1Dims Mamba1Dims::for_d_model(std::int64_t d_model) {
  Mamba1Dims dims;
  dims.d_model = d_model;
  dims.d_inner = 2 * d_model;
  dims.dt_rank = (d_model + 15) / 16;
  return dims;
}

std::array<MambaTensor, kMamba1TensorCount> mamba1_tensors(const Mamba1Dims& d) {
  const std::int64_t dm = d.d_model, di = d.d_inner, r = d.dt_rank;
  return {{{"norm.weight", {dm}, {}},
           {"in_proj.weight", {2 * di, dm}, {}},
           {"conv1d.weight", {di, 1, Mamba1Dims::kConv}, {di, Mamba1Dims::kConv}},
           {"conv1d.bias", {di}, {}},
           {"x_proj.weight", {d.x_proj_rows(), di}, {}},
           {"dt_proj.weight", {di, r}, {}},
           {"dt_proj.bias", {di}, {}},
           {"A_log", {di, Mamba1Dims::kState}, {}},
           {"D", {di}, {}},
           {"out_proj.weight", {dm, di}, {}}}};
}

Mamba1State::Mamba1State(std::int64_t batch, std::int64_t d_inner) : batch_(batch), d_inner_(d_inner) {
  allocate_state_buffers("Mamba1State", {batch, d_inner, Mamba1Dims::kConv + Mamba1Dims::kState}, [&] {
    conv_window_.assign_zero(static_cast<std::size_t>(conv_window_size()));
    h_.assign_zero(static_cast<std::size_t>(h_size()));
  });
}

Mamba1State Mamba1State::clone() const {
  Mamba1State copy;
  copy.batch_ = batch_;
  copy.d_inner_ = d_inner_;
  copy.conv_window_ = conv_window_.clone();
  copy.h_ = h_.clone();
  return copy;
}

namespace {
Mamba1Dims dims_of(const Mamba1Weights& w) {
  return Mamba1Dims::for_d_model(static_cast<std::int64_t>(w[kM1NormWeight].size()));
}
}  // namespace

Mamba1Block::Mamba1Block(Mamba1Weights weights)
    : dims_(dims_of(weights)),
      weights_(std::move(weights)),
      conv_(weights_[kM1ConvWeight].data(), weights_[kM1ConvBias].data(), dims_.d_inner) {
  const auto tensors = mamba1_tensors(dims_);
  for (std::size_t i = 0; i < kMamba1TensorCount; ++i) {
    if (static_cast<std::int64_t>(weights_[i].size()) != tensors[i].elements())
      throw_value_error(std::string("Mamba1Block: ") + tensors[i].name + " has the wrong element count");
    if (!non_finite_weight_) {
      for (float v : weights_[i]) {
        if (!fp::is_finite(v)) {
          non_finite_weight_ = i;
          break;
        }
      }
    }
  }
  A_.resize(weights_[kM1ALog].size());
  for (std::size_t i = 0; i < A_.size(); ++i) A_[i] = -F(prim::expf(F(weights_[kM1ALog][i])));
  const std::int64_t dm = dims_.d_model, di = dims_.d_inner;
  in_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1InProj].data(), 2 * di, dm, Placement::kWeightPool);
  x_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1XProj].data(), dims_.x_proj_rows(), di,
                                             Placement::kWeightPool);
  dt_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1DtProjWeight].data(), di, dims_.dt_rank,
                                              Placement::kWeightPool);
  out_proj_ = gemm::PackedRhs::from_transposed(weights_[kM1OutProj].data(), dm, di, Placement::kWeightPool);
}

void Mamba1Block::refuse_non_finite_inputs(const float* x, std::int64_t count, const Mamba1State& state,
                                           const std::string& entry) const {
  refuse_if_non_finite(x, count, entry, "x");
  if (non_finite_weight_) {
    const std::size_t i = *non_finite_weight_;
    refuse_non_finite(weights_[i].data(), static_cast<std::int64_t>(weights_[i].size()), entry,
                      mamba1_tensors(dims_)[i].name);
  }
  refuse_if_any_non_finite(
      {{state.conv_window(), state.conv_window_size(), "conv_window"}, {state.h(), state.h_size(), "h"}},
      entry);
}

void Mamba1Block::forward(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state,
                          float* y, const std::string& entry) const {
  const std::int64_t dm = dims_.d_model, di = dims_.d_inner, xr = dims_.x_proj_rows(), R = dims_.dt_rank;
  const std::int64_t M = batch * length;
  refuse_non_finite_inputs(x, M * dm, state, entry);

  std::vector<float> normed(static_cast<std::size_t>(M * dm));
  norm::rmsnorm(x, weights_[kM1NormWeight].data(), normed.data(), M, dm, kNormEps);
  std::vector<float> P(static_cast<std::size_t>(M * 2 * di));  // xh | z
  gemm::gemm_packed({normed.data(), dm, 1}, M, in_proj_, P.data());

  std::vector<float> u(static_cast<std::size_t>(M * di));
  conv_.run(P.data(), 2 * di, batch, length, state.conv_window(), u.data());

  std::vector<float> xp(static_cast<std::size_t>(M * xr));  // dt_low | B | C
  gemm::gemm_packed({u.data(), di, 1}, M, x_proj_, xp.data());
  // From dt_proj to the gate every channel is independent, so one task carries a batch row's group of
  // channels through all of it: dt_proj's columns, delta, the scan, the D skip and the gate, in one
  // parallel region.
  std::vector<float> delta(static_cast<std::size_t>(M * di));   // [B, L, d_inner]
  std::vector<float> scan_y(static_cast<std::size_t>(M * di));  // [B, L, d_inner]: y, then the gated y
  const float* dt_bias = weights_[kM1DtProjBias].data();
  const float* D = weights_[kM1D].data();
  constexpr std::int64_t kChannelGroup = 64;
  static_assert(kChannelGroup % gemm::kPanelWidth == 0, "a group owns whole dt_proj panels");
  const std::int64_t groups = (di + kChannelGroup - 1) / kChannelGroup;
  parallel_for(
      batch * groups,
      [&](std::int64_t begin, std::int64_t end) {
        float gate[kChannelGroup];
        for (std::int64_t task = begin; task < end; ++task) {
          const std::int64_t b = task / groups;
          const std::int64_t c0 = (task % groups) * kChannelGroup;
          const std::int64_t c1 = std::min(di, c0 + kChannelGroup);
          const auto width = static_cast<std::size_t>(c1 - c0);
          const std::int64_t row0 = b * length;
          // 7-8. delta = F(softplus(F(dt_proj + F(bias)))), flushed.
          gemm::gemm_packed_panels({xp.data() + row0 * xr, xr, 1}, length, dt_proj_, c0 / gemm::kPanelWidth,
                                   kChannelGroup / gemm::kPanelWidth, delta.data() + row0 * di);
          for (std::int64_t t = row0; t < row0 + length; ++t) {
            float* row = delta.data() + t * di + c0;
            for (std::int64_t d = 0; d < c1 - c0; ++d) row[d] = F(row[d] + F(dt_bias[c0 + d]));
            vmath::softplus(row, row, width);
            vmath::flush(row, row, width);
          }
          // 9. the scan.
          const sscan::ScanArgs args{u.data() + row0 * di,
                                     di,
                                     delta.data() + row0 * di,
                                     di,
                                     xp.data() + row0 * xr + R,
                                     xp.data() + row0 * xr + R + Mamba1Dims::kState,
                                     xr,
                                     A_.data(),
                                     state.h() + b * di * Mamba1Dims::kState,
                                     scan_y.data() + row0 * di,
                                     di,
                                     length};
          sscan::selective_scan(args, c0, c1);
          // 10-11. skip = F(y + F(MUL(F(u), F(D)))); gate = F(MUL(skip, F(silu(F(z))))), over scan_y.
          for (std::int64_t t = row0; t < row0 + length; ++t) {
            vmath::flush(P.data() + t * 2 * di + di + c0, gate, width);
            vmath::silu(gate, gate, width);
            float* row = scan_y.data() + t * di;
            const float* urow = u.data() + t * di;
            for (std::int64_t d = c0; d < c1; ++d) {
              const float skip = F(row[d] + F(MUL(F(urow[d]), F(D[d]))));
              row[d] = F(MUL(skip, F(gate[d - c0])));
            }
          }
        }
      },
      grain_for(kChannelGroup * Mamba1Dims::kState * length, 4096));

  std::vector<float> out(static_cast<std::size_t>(M * dm));
  gemm::gemm_packed({scan_y.data(), di, 1}, M, out_proj_, out.data());
  for (std::int64_t i = 0; i < M * dm; ++i) y[i] = F(F(x[i]) + out[i]);
}

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
  norm::rmsnorm_reference(x, w[kM1NormWeight].data(), normed.data(), M, dm, kNormEps);
  std::vector<float> P(static_cast<std::size_t>(M * 2 * di));
  gemm::gemm_reference(Orientation::NT, normed.data(), w[kM1InProj].data(), P.data(), M, 2 * di, dm);

  // 4. A = -F(expf(F(A_log))).
  std::vector<float> A(static_cast<std::size_t>(di * N));
  for (std::int64_t i = 0; i < di * N; ++i) A[i] = -F(prim::expf(F(w[kM1ALog][i])));

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
      delta[t * di + d] = F(prim::softplus(F(dtp[t * di + d] + F(w[kM1DtProjBias][d]))));

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
          const float dA = F(prim::expf(F(MUL(dl, F(A[d * N + s])))));
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
      gate[t * di + d] = F(MUL(skip, F(prim::silu(F(P[t * 2 * di + di + d])))));
    }
  }

  // 12. out_proj and the residual.
  std::vector<float> out(static_cast<std::size_t>(M * dm));
  gemm::gemm_reference(Orientation::NT, gate.data(), w[kM1OutProj].data(), out.data(), M, dm, di);
  for (std::int64_t i = 0; i < M * dm; ++i) y[i] = F(F(x[i]) + out[i]);
}

}  // namespace samebits::blocks
