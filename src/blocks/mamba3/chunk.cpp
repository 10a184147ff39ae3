// The shared chunk arithmetic of the Mamba-3 fast path, and the reports computed from a post-call state.
#include "blocks/mamba3/chunk.hpp"

#include <algorithm>
#include <cstring>

#include "blocks/mamba3/scalar.hpp"
#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/mamba3_kernels.hpp"
#include "numerics/primitives.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::blocks {

using fp::F;

namespace mamba3_chunk {

HeadScratch& head_scratch() {
  thread_local HeadScratch scratch;
  return scratch;
}

// Appends row i (flushed adt a) to the running sums: dacs (step 12) and the column sums of Lseg's strict
// lower triangle (step 13: each column starts from +0.0 at the row below its diagonal). colacc may be null.
void extend_open_chunk(float* dacs, float* colacc, std::int64_t i, float a) {
  dacs[i] = i == 0 ? a : F(dacs[i - 1] + a);
  if (colacc == nullptr) return;
  for (std::int64_t j = 0; j + 1 < i; ++j) colacc[j] = F(colacc[j] + a);
  if (i >= 1) colacc[i - 1] = F(0.0f + a);
}

// The product runs over the real rows only: the 64 - real padded rows would add FMA(+0, +0, acc) terms, whose
// only effect is to turn a -0.0 cell into +0.0, which the `+ 0.0f` below reproduces.
void fold_rows(HeadScratch& s, const float* const* v_rows, std::int64_t real) {
  const float dl = F(s.dacs[Q - 1]);
  for (std::int64_t i = 0; i < real; ++i) s.decay_in[i] = F(dl - F(s.dacs[i]));
  vector_math::exp(s.decay_in.data(), s.decay_in.data(), static_cast<std::size_t>(real));
  for (std::int64_t i = 0; i < real; ++i)
    mamba3_kernels::scaled_copy(v_rows[i], F(s.decay_in[i]), s.vs.data() + i * P, P);
  // inc = GEMM_TN(vs, kscale) (k = real <= 64, one leaf): cell (p, n) is the chain over the rows i of
  // vs[i][p] * kscale[i][n], register-tiled by the GEMM kernels.
  if (real > 0)
    gemm::gemm_packed({s.vs.data(), 1, P}, P, gemm::PackedRhs::from_row_major(s.kscale.data(), real, N),
                      s.inc.data());
  else
    std::fill(s.inc.data(), s.inc.data() + P * N, 0.0f);
  if (real < Q)
    for (std::int64_t i = 0; i < P * N; ++i) s.inc[i] = s.inc[i] + 0.0f;
  mamba3_kernels::decay_accumulate(s.h_run.data(), F(primitives::expf(dl)), s.inc.data(), P * N);
}

}  // namespace mamba3_chunk

using namespace mamba3_chunk;
using mamba3::beta_prime_of;
using mamba3::gamma_of;

Mamba3Reports Mamba3Block::reports_of(const Mamba3State& state) const {
  const std::int64_t B = state.batch(), H = state.heads(), rows = state.buffered_tokens;
  Mamba3Reports out;
  out.h_last.assign(state.h(), state.h() + B * H * P * N);
  out.theta_last.assign(state.theta(), state.theta() + B * H * R);
  out.k_last.assign(static_cast<std::size_t>(B * H * N), 0.0f);
  out.v_last.assign(static_cast<std::size_t>(B * H * P), 0.0f);
  if (rows < 1 || rows > Q) return out;  // no call has run on this state
  parallel_for(B * H, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bh = begin; bh < end; ++bh) {
      const std::int64_t b = bh / H, h = bh % H;
      auto row = [&](std::int64_t t) { return (b * Q + t) * H + h; };
      HeadScratch& s = head_scratch();
      const float* v_rows[Q];
      for (std::int64_t i = 0; i < rows; ++i) {
        const float beta = i + 1 < rows
                               ? beta_prime_of(state.buffer_dt()[row(i + 1)], state.buffer_sig()[row(i + 1)])
                               : 0.0f;
        const float scale = F(gamma_of(state.buffer_dt()[row(i)], state.buffer_sig()[row(i)]) + beta);
        mamba3_kernels::scaled_copy(state.buffer_krot() + row(i) * N, scale, s.kscale.data() + i * N, N);
        extend_open_chunk(s.dacs, nullptr, i, F(state.buffer_adt()[row(i)]));
        v_rows[i] = state.buffer_v() + row(i) * P;
      }
      for (std::int64_t i = rows; i < Q; ++i) s.dacs[i] = s.dacs[rows - 1];
      std::memcpy(s.h_run.data(), state.h() + bh * P * N, P * N * sizeof(float));
      fold_rows(s, v_rows, rows);
      std::memcpy(out.h_last.data() + bh * P * N, s.h_run.data(), P * N * sizeof(float));
      std::memcpy(out.k_last.data() + bh * N, state.buffer_krot() + row(rows - 1) * N, N * sizeof(float));
      std::memcpy(out.v_last.data() + bh * P, v_rows[rows - 1], P * sizeof(float));
    }
  });
  return out;
}

}  // namespace samebits::blocks
