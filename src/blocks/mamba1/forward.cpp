// Mamba-1 block forward (docs/blocks.md §1.3), the fast path: packed GEMMs and channel-vector kernels over
// the thread pool. It refuses non-finite data first and updates the state in place.
#include <algorithm>

#include "blocks/mamba1/mamba1.hpp"
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

// Rows per parallel task so that a task holds at least ~`work` cells of `cells_per_row`.
std::int64_t grain_for(std::int64_t cells_per_row, std::int64_t work = 16384) {
  return std::max<std::int64_t>(1, work / std::max<std::int64_t>(1, cells_per_row));
}

}  // namespace

void Mamba1Block::forward(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state,
                          float* y, const std::string& entry) const {
  refuse_non_finite_inputs(x, batch * length * dims_.d_model, state, entry);
  run(x, batch, length, state, y);
}

void Mamba1Block::step_many(const float* x, std::int64_t count, Mamba1State* const* states, float* y,
                            const std::string& entry, bool states_checked) const {
  const std::int64_t dm = dims_.d_model, di = dims_.d_inner;
  for (std::int64_t i = 0; i < count; ++i) {
    if (states_checked)
      refuse_non_finite_rows(x + i * dm, dm, entry);
    else
      refuse_non_finite_inputs(x + i * dm, dm, *states[i], entry);
  }
  // A Mamba-1 state holds no position count and is small next to the weights (d_inner x 20 floats per
  // row): the rows are gathered into one batched state, run as one call (whose rows never mix) and put back.
  Mamba1State batched(count, di);
  const std::int64_t conv = di * Mamba1Dims::kConv, h = di * Mamba1Dims::kState;
  for (std::int64_t i = 0; i < count; ++i) {
    std::copy_n(states[i]->conv_window(), conv, batched.conv_window() + i * conv);
    std::copy_n(states[i]->h(), h, batched.h() + i * h);
  }
  run(x, count, 1, batched, y);
  for (std::int64_t i = 0; i < count; ++i) {
    std::copy_n(batched.conv_window() + i * conv, conv, states[i]->conv_window());
    std::copy_n(batched.h() + i * h, h, states[i]->h());
  }
}

void Mamba1Block::run(const float* x, std::int64_t batch, std::int64_t length, Mamba1State& state,
                      float* y) const {
  const std::int64_t dm = dims_.d_model, di = dims_.d_inner, xr = dims_.x_proj_rows(), R = dims_.dt_rank;
  const std::int64_t M = batch * length;

  std::vector<float> normed(static_cast<std::size_t>(M * dm));
  rmsnorm::rmsnorm(x, weights_[kM1NormWeight].data(), normed.data(), M, dm, kMamba1NormEps);
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
            vector_math::softplus(row, row, width);
            vector_math::flush(row, row, width);
          }
          // 9. the scan.
          const selective_scan::ScanArgs args{u.data() + row0 * di,
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
          selective_scan::selective_scan(args, c0, c1);
          // 10-11. skip = F(y + F(MUL(F(u), F(D)))); gate = F(MUL(skip, F(silu(F(z))))), over scan_y.
          for (std::int64_t t = row0; t < row0 + length; ++t) {
            vector_math::flush(P.data() + t * 2 * di + di + c0, gate, width);
            vector_math::silu(gate, gate, width);
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
}  // namespace samebits::blocks
