// The Mamba-2 scalar twin: docs/blocks.md §2.3 literally. The open chunk is re-run from the buffer on every
// call (prefill resumption), every chunk computes its full segment-sum matrix, and every product goes through
// gemm_reference. This is the definition the fast path is tested against.
#include <algorithm>
#include <cstring>

#include "blocks/common/trust_scope.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::blocks {

using fp::F;
using fp::FMA;
using fp::MUL;
using gemm::Orientation;

namespace {
constexpr float kNormEps = 1e-5f;
constexpr std::int64_t Q = Mamba2Dims::kChunk;
constexpr std::int64_t P = Mamba2Dims::kHeadDim;
constexpr std::int64_t N = Mamba2Dims::kState;
}  // namespace

void Mamba2Block::forward_reference(const float* x, std::int64_t batch, std::int64_t length,
                                    Mamba2State& state, float* y, const std::string& entry,
                                    std::vector<float>* h_last_out) const {
  const std::int64_t dm = dims_.d_model, di = dims_.d_inner, cd = dims_.conv_dim, dip = dims_.d_in_proj;
  const std::int64_t H = dims_.nheads;
  const std::int64_t M = batch * length;
  refuse_inputs(x, M * dm, state, entry);
  state.settle_pending_report();
  Mamba2StateData& data = Mamba2State::EngineAccess(state).data();
  TrustScope<Mamba2State> trust(state);  // the twin does not check what it writes: the next call scans
  const Mamba2Weights& w = weights_;

  // 2. block RMSNorm and in_proj.
  std::vector<float> normed(static_cast<std::size_t>(M * dm));
  rmsnorm::rmsnorm_reference(x, w[kM2BlockNorm].data(), normed.data(), M, dm, kNormEps);
  std::vector<float> proj(static_cast<std::size_t>(M * dip));
  gemm::gemm_reference(Orientation::NT, normed.data(), w[kM2InProj].data(), proj.data(), M, dip, dm);

  // 3. A per head.
  std::vector<float> A(static_cast<std::size_t>(H));
  for (std::int64_t h = 0; h < H; ++h) A[h] = -F(primitives::expf(F(w[kM2ALog][h])));

  // 4. conv + SiLU over the xBC channels.
  std::vector<float> xbc_new(static_cast<std::size_t>(M * cd));
  conv_.run_reference(proj.data() + di, dip, batch, length, data.conv_window.data(), xbc_new.data());

  // 5. dt for the new rows.
  std::vector<float> dt_new(static_cast<std::size_t>(M * H));
  for (std::int64_t t = 0; t < M; ++t)
    for (std::int64_t h = 0; h < H; ++h)
      dt_new[t * H + h] = mamba2_detail::dt_of(proj[t * dip + di + cd + h], w[kM2DtBias][h], dt_lo_, dt_hi_);

  // 6. the working sequence: buffered rows (dt re-derived from the raw rows), then the new rows.
  const std::int64_t q0 = data.buffered_tokens;
  const std::int64_t T = q0 + length;
  std::vector<float> xbc_work(static_cast<std::size_t>(batch * T * cd));
  std::vector<float> dt_work(static_cast<std::size_t>(batch * T * H));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < q0; ++t) {
      std::memcpy(&xbc_work[(b * T + t) * cd], &data.buffer_xbc[(b * Q + t) * cd],
                  static_cast<std::size_t>(cd) * sizeof(float));
      for (std::int64_t h = 0; h < H; ++h)
        dt_work[(b * T + t) * H + h] =
            mamba2_detail::dt_of(data.buffer_dtraw[(b * Q + t) * H + h], w[kM2DtBias][h], dt_lo_, dt_hi_);
    }
    for (std::int64_t li = 0; li < length; ++li) {
      std::memcpy(&xbc_work[(b * T + q0 + li) * cd], &xbc_new[(b * length + li) * cd],
                  static_cast<std::size_t>(cd) * sizeof(float));
      for (std::int64_t h = 0; h < H; ++h)
        dt_work[(b * T + q0 + li) * H + h] = dt_new[(b * length + li) * H + h];
    }
  }

  // 7. the SSD core over nc chunks per batch row.
  const std::int64_t nc = std::max<std::int64_t>(1, (T + Q - 1) / Q);
  const std::int64_t head_size = P * N;
  std::vector<float> y_work(static_cast<std::size_t>(batch * T * di));
  std::vector<float> h_last(static_cast<std::size_t>(batch * H * head_size));
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<float> h_run(data.h.data() + b * H * head_size, data.h.data() + (b + 1) * H * head_size);
    std::vector<float> h_completed = h_run;
    bool any_completed = false;
    for (std::int64_t c = 0; c < nc; ++c) {
      const std::int64_t c0 = c * Q;
      const std::int64_t real = std::min(Q, T - c0);
      std::vector<float> xd(static_cast<std::size_t>(H * Q * P), 0.0f),
          dA(static_cast<std::size_t>(H * Q), 0.0f);
      for (std::int64_t i = 0; i < real; ++i) {
        const std::int64_t t = c0 + i;
        for (std::int64_t h = 0; h < H; ++h) {
          const float dtv = F(dt_work[(b * T + t) * H + h]);
          dA[h * Q + i] = F(MUL(dtv, F(A[h])));
          for (std::int64_t p = 0; p < P; ++p)
            xd[(h * Q + i) * P + p] = F(MUL(F(xbc_work[(b * T + t) * cd + h * P + p]), dtv));
        }
      }
      std::vector<float> dacs(static_cast<std::size_t>(H * Q));
      for (std::int64_t h = 0; h < H; ++h) {
        float run = 0.0f;
        for (std::int64_t i = 0; i < Q; ++i) {
          if (i < real) run = i == 0 ? F(dA[h * Q]) : F(run + dA[h * Q + i]);
          dacs[h * Q + i] = run;  // padded rows copy the last real value
        }
      }
      std::vector<float> bm(static_cast<std::size_t>(Q * N), 0.0f), cm(static_cast<std::size_t>(Q * N), 0.0f);
      for (std::int64_t i = 0; i < real; ++i) {
        for (std::int64_t n = 0; n < N; ++n) {
          bm[i * N + n] = xbc_work[(b * T + c0 + i) * cd + di + n];
          cm[i * N + n] = xbc_work[(b * T + c0 + i) * cd + di + N + n];
        }
      }
      std::vector<float> g_small(static_cast<std::size_t>(real * real));
      gemm::gemm_reference(Orientation::NT, cm.data(), bm.data(), g_small.data(), real, real, N);
      std::vector<float> G(static_cast<std::size_t>(Q * Q), 0.0f);
      for (std::int64_t i = 0; i < real; ++i)
        for (std::int64_t j = 0; j < real; ++j) G[i * Q + j] = g_small[i * real + j];

      for (std::int64_t h = 0; h < H; ++h) {
        // Segment sums, column-serial; the diagonal is expf(+0.0); above it +0.0. (Padded rows only
        // feed rows of M that are never read, so they are not formed.)
        std::vector<float> lseg(static_cast<std::size_t>(Q * Q), 0.0f);
        const float diagonal = F(primitives::expf(0.0f));
        for (std::int64_t j = 0; j < real; ++j) {
          lseg[j * Q + j] = diagonal;
          float acc = 0.0f;
          for (std::int64_t i = j + 1; i < real; ++i) {
            acc = F(acc + dA[h * Q + i]);
            lseg[i * Q + j] = F(primitives::expf(acc));
          }
        }
        std::vector<float> mm(static_cast<std::size_t>(real * Q), 0.0f);
        for (std::int64_t i = 0; i < real; ++i)
          for (std::int64_t j = 0; j <= i; ++j) mm[i * Q + j] = F(MUL(F(G[i * Q + j]), F(lseg[i * Q + j])));
        const float* xd_h = xd.data() + h * Q * P;
        std::vector<float> ydiag(static_cast<std::size_t>(real * P));
        gemm::gemm_reference(Orientation::NN, mm.data(), xd_h, ydiag.data(), real, P, Q);

        const float dl = dacs[h * Q + Q - 1];
        std::vector<float> bd(static_cast<std::size_t>(Q * N), 0.0f);
        for (std::int64_t i = 0; i < real; ++i) {
          const float dec = F(primitives::expf(F(dl - dacs[h * Q + i])));
          for (std::int64_t n = 0; n < N; ++n) bd[i * N + n] = F(MUL(F(bm[i * N + n]), dec));
        }
        std::vector<float> cstate(static_cast<std::size_t>(head_size));
        gemm::gemm_reference(Orientation::TN, xd_h, bd.data(), cstate.data(), P, N, Q);

        std::vector<float> h_prev(h_run.begin() + h * head_size, h_run.begin() + (h + 1) * head_size);
        const float scale = F(primitives::expf(F(dl)));
        for (std::int64_t e = 0; e < head_size; ++e)
          h_run[h * head_size + e] = F(FMA(scale, F(h_prev[e]), F(cstate[e])));

        std::vector<float> ch(static_cast<std::size_t>(real * P));
        gemm::gemm_reference(Orientation::NT, cm.data(), h_prev.data(), ch.data(), real, P, N);
        for (std::int64_t i = 0; i < real; ++i) {
          const float sc = F(primitives::expf(F(dacs[h * Q + i])));
          for (std::int64_t p = 0; p < P; ++p) {
            const float yoff = F(MUL(F(ch[i * P + p]), sc));
            y_work[(b * T + c0 + i) * di + h * P + p] = F(ydiag[i * P + p] + yoff);
          }
        }
      }
      if (real == Q) {
        h_completed = h_run;
        any_completed = true;
      }
    }
    std::copy(h_run.begin(), h_run.end(), h_last.begin() + b * H * head_size);
    if (any_completed) std::copy(h_completed.begin(), h_completed.end(), data.h.data() + b * H * head_size);
  }

  // 8. the open chunk: the last T mod 256 working rows; raw dt from the old buffer or from in_proj.
  const std::int64_t r = T % Q;
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<float> raw(static_cast<std::size_t>(r * H));
    for (std::int64_t k = 0; k < r; ++k) {
      const std::int64_t src = T - r + k;
      for (std::int64_t h = 0; h < H; ++h)
        raw[k * H + h] = src < q0 ? data.buffer_dtraw[(b * Q + src) * H + h]
                                  : proj[(b * length + src - q0) * dip + di + cd + h];
    }
    for (std::int64_t k = 0; k < r; ++k) {
      std::memcpy(&data.buffer_xbc[(b * Q + k) * cd], &xbc_work[(b * T + T - r + k) * cd],
                  static_cast<std::size_t>(cd) * sizeof(float));
      for (std::int64_t h = 0; h < H; ++h) data.buffer_dtraw[(b * Q + k) * H + h] = raw[k * H + h];
    }
  }
  data.buffered_tokens = r;

  // 9. D skip for the new tokens, 10. gate then the gated RMSNorm, 11. out_proj and the residual.
  std::vector<float> g(static_cast<std::size_t>(M * di));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t li = 0; li < length; ++li) {
      const std::int64_t t = b * length + li;
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t p = 0; p < P; ++p) {
          const std::int64_t j = h * P + p;
          const float skip =
              F(y_work[(b * T + q0 + li) * di + j] + F(MUL(F(xbc_new[t * cd + j]), F(w[kM2D][h]))));
          g[t * di + j] = F(MUL(F(skip), F(primitives::silu(F(proj[t * dip + j])))));
        }
      }
    }
  }
  std::vector<float> gn(static_cast<std::size_t>(M * di));
  rmsnorm::rmsnorm_reference(g.data(), w[kM2GatedNorm].data(), gn.data(), M, di, kNormEps);
  std::vector<float> out(static_cast<std::size_t>(M * dm));
  gemm::gemm_reference(Orientation::NT, gn.data(), w[kM2OutProj].data(), out.data(), M, dm, di);
  for (std::int64_t i = 0; i < M * dm; ++i) y[i] = F(F(x[i]) + out[i]);

  ++data.generation;
  if (h_last_out) *h_last_out = std::move(h_last);
}

}  // namespace samebits::blocks
