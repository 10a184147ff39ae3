// The Mamba-3 scalar twin: docs/blocks.md §3.3 step by step over the whole working sequence (buffered rows
// followed by the new tokens), every chunk and every row, through gemm_reference and scalar primitives.
#include <algorithm>
#include <samebits/errors.hpp>
#include <vector>

#include "blocks/common/trust_scope.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/mamba3/scalar.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/primitives.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::blocks {

using namespace mamba3;
using fp::F;
using fp::FMA;
using fp::MUL;
using gemm::gemm_reference;
using gemm::Orientation;

void Mamba3Block::forward_reference(const float* x, std::int64_t B, std::int64_t L, Mamba3State& state,
                                    float* y, Mamba3Reports* reports, const char* entry,
                                    bool state_checked) const {
  if (x == nullptr) throw_value_error(std::string(entry) + ": x has no data");
  refuse(x, B, L, state, entry, !state_checked);
  // The twin writes the pieces in place without the fast path's checks: the state is untrusted (the next
  // fast call scans it) and its derived copies are dropped.
  TrustScope<Mamba3State> trust(state);
  Mamba3State::EngineAccess engine(state);
  engine.drop_derived_copies();
  const Mamba3Dims& d = dims_;
  const std::int64_t dm = d.d_model, di = d.d_inner, dip = d.d_in_proj, H = d.heads;
  constexpr std::int64_t N = kStateDim, P = kHeadDim, Q = kChunk, R = kAngles;
  const std::int64_t M = B * L;
  const Mamba3Weights w = weights();  // in_proj and out_proj rebuilt from their panels for this call

  // Step 2: block norm and in_proj.
  std::vector<float> normed(M * dm), proj(M * dip);
  rmsnorm::rmsnorm_reference(x, w.block_norm().data(), normed.data(), M, dm, kNormEps);
  gemm_reference(Orientation::NT, normed.data(), w.in_proj().data(), proj.data(), M, dip, dm);
  auto col = [&](std::int64_t m, std::int64_t c) { return proj[m * dip + c]; };

  // Step 3: A and dt per (new token, head).
  std::vector<float> a_new(M * H), dt_new(M * H);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t h = 0; h < H; ++h) {
      a_new[m * H + h] = heavy_tail_a(col(m, d.col_a() + h));
      dt_new[m * H + h] = softplus_dt(col(m, d.col_dt() + h), w.dt_bias()[h]);
    }

  // Step 4: B / C RMSNorm per token, shared by all heads.
  std::vector<float> b_raw(M * N), c_raw(M * N), bn(M * N), cn(M * N);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      b_raw[m * N + n] = col(m, d.col_b() + n);
      c_raw[m * N + n] = col(m, d.col_c() + n);
    }
  rmsnorm::rmsnorm_reference(b_raw.data(), w.b_norm().data(), bn.data(), M, N, kNormEps);
  rmsnorm::rmsnorm_reference(c_raw.data(), w.c_norm().data(), cn.data(), M, N, kNormEps);

  // Step 5: the working sequence, buffered rows first.
  const std::int64_t q0 = state.buffered_tokens;
  const std::int64_t T = q0 + L;
  const std::int64_t nc = std::max<std::int64_t>(1, (T + Q - 1) / Q);
  std::vector<float> rotq(B * T * H * N), rotk(B * T * H * N), vw(B * T * H * P);
  std::vector<float> dtw(B * T * H), sigw(B * T * H), adtw(B * T * H);
  auto row = [&](std::int64_t b, std::int64_t t) { return (b * T + t) * H; };  // (b, t, head 0)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < q0; ++t) {
      const std::int64_t src = (b * Q + t) * H;
      std::copy_n(state.buffer_qrot() + src * N, H * N, rotq.begin() + row(b, t) * N);
      std::copy_n(state.buffer_krot() + src * N, H * N, rotk.begin() + row(b, t) * N);
      std::copy_n(state.buffer_v() + src * P, H * P, vw.begin() + row(b, t) * P);
      std::copy_n(state.buffer_dt() + src, H, dtw.begin() + row(b, t));
      std::copy_n(state.buffer_sig() + src, H, sigw.begin() + row(b, t));
      std::copy_n(state.buffer_adt() + src, H, adtw.begin() + row(b, t));
    }
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t li = 0; li < L; ++li) {
      const std::int64_t m = b * L + li, r = row(b, q0 + li);
      for (std::int64_t h = 0; h < H; ++h) {
        dtw[r + h] = dt_new[m * H + h];
        for (std::int64_t p = 0; p < P; ++p) vw[(r + h) * P + p] = col(m, d.col_x() + h * P + p);
        // Step 6.
        adtw[r + h] = F(MUL(F(a_new[m * H + h]), F(dtw[r + h])));
        sigw[r + h] = F(primitives::sigmoid(F(col(m, d.col_trap() + h))));
      }
    }

  // Step 7: gamma, beta' and scale for every working row.
  std::vector<float> gamma(B * T * H), scale(B * T * H);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t i = row(b, t) + h;
        gamma[i] = gamma_of(dtw[i], sigw[i]);
        const float beta = t + 1 < T ? beta_prime_of(dtw[row(b, t + 1) + h], sigw[row(b, t + 1) + h]) : 0.0f;
        scale[i] = F(gamma[i] + beta);
      }

  // Step 8: the serial angle recurrence per (b, h, r).
  std::vector<float> angle(M * H * R);
  std::vector<float> theta_after(B * H * R);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t r = 0; r < R; ++r) {
        float run = F(state.theta()[(b * H + h) * R + r]);
        for (std::int64_t li = 0; li < L; ++li) {
          const std::int64_t m = b * L + li;
          run = angle_step(run, angle_rate(col(m, d.col_angle() + r)), dtw[row(b, q0 + li) + h]);
          angle[(m * H + h) * R + r] = run;
        }
        theta_after[(b * H + h) * R + r] = run;
      }

  // Steps 9-10: biased q / k, the interleaved rotation, and the unrotated diagonal q.k.
  std::vector<float> qkdot(M * H);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t li = 0; li < L; ++li) {
      const std::int64_t m = b * L + li;
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t base = (row(b, q0 + li) + h) * N;
        float qv[N], kv[N];
        for (std::int64_t n = 0; n < N; ++n) {
          kv[n] = F(F(bn[m * N + n]) + F(w.b_bias()[h * N + n]));
          qv[n] = F(F(cn[m * N + n]) + F(w.c_bias()[h * N + n]));
        }
        for (std::int64_t j = 0; j < N / 2; ++j) {
          const std::int64_t e0 = 2 * j, e1 = 2 * j + 1;
          if (j < R) {
            const float th = F(angle[(m * H + h) * R + j]);
            const float c = F(primitives::cosf(th)), s = F(primitives::sinf(th));
            rotq[base + e0] = F(F(MUL(qv[e0], c)) - F(MUL(qv[e1], s)));
            rotq[base + e1] = F(F(MUL(qv[e0], s)) + F(MUL(qv[e1], c)));
            rotk[base + e0] = F(F(MUL(kv[e0], c)) - F(MUL(kv[e1], s)));
            rotk[base + e1] = F(F(MUL(kv[e0], s)) + F(MUL(kv[e1], c)));
          } else {
            rotq[base + e0] = qv[e0];
            rotq[base + e1] = qv[e1];
            rotk[base + e0] = kv[e0];
            rotk[base + e1] = kv[e1];
          }
        }
        float acc = 0.0f;
        for (std::int64_t n = 0; n < N; ++n) acc = F(FMA(qv[n], kv[n], acc));
        qkdot[m * H + h] = F(MUL(F(acc), gamma[row(b, q0 + li) + h]));
      }
    }

  // Step 11: scaled k for every working row.
  std::vector<float> kscale(B * T * H * N);
  for (std::int64_t i = 0; i < B * T * H; ++i)
    for (std::int64_t n = 0; n < N; ++n) kscale[i * N + n] = F(MUL(F(rotk[i * N + n]), scale[i]));

  // Steps 12-13: per-chunk running sums of adt and the strict lower-triangular decay.
  auto real_rows = [&](std::int64_t c) { return std::min(Q, T - c * Q); };
  std::vector<float> dacs(B * H * nc * Q), lseg(B * nc * H * Q * Q, 0.0f);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t c = 0; c < nc; ++c) {
        const std::int64_t real = real_rows(c);
        float run = 0.0f;
        for (std::int64_t i = 0; i < Q; ++i) {
          if (i < real) {
            const float v = F(adtw[row(b, c * Q + i) + h]);
            run = i == 0 ? v : F(run + v);
          }
          dacs[((b * H + h) * nc + c) * Q + i] = run;
        }
        float* L_ = lseg.data() + ((b * nc + c) * H + h) * Q * Q;
        for (std::int64_t j = 0; j < Q; ++j) {
          float acc = 0.0f;
          for (std::int64_t i = j + 1; i < Q; ++i) {
            if (i < real) acc = F(acc + F(adtw[row(b, c * Q + i) + h]));
            L_[i * Q + j] = F(primitives::expf(acc));
          }
        }
      }

  // Step 14: the pending Input_States correction of h.
  if (state.pending) {
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h) {
        const float csc = F(MUL(F(dtw[row(b, 0) + h]), F(1.0f - F(sigw[row(b, 0) + h]))));
        for (std::int64_t p = 0; p < P; ++p)
          for (std::int64_t n = 0; n < N; ++n) {
            float& cell = engine.piece(Mamba3State::kH)[((b * H + h) * P + p) * N + n];
            const float pv = state.pending_v()[(b * H + h) * P + p],
                        pk = state.pending_k()[(b * H + h) * N + n];
            cell = F(F(cell) + F(MUL(F(MUL(F(pv), F(pk))), csc)));
          }
      }
    state.pending = false;
    std::fill_n(engine.piece(Mamba3State::kPendingK), state.piece_elements(8), 0.0f);
    std::fill_n(engine.piece(Mamba3State::kPendingV), state.piece_elements(9), 0.0f);
  }

  // Step 15: the inter-chunk pass; h_enter[c] is the state entering chunk c.
  std::vector<float> h_enter(B * nc * H * P * N), h_last(B * H * P * N);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      float* h_state = engine.piece(Mamba3State::kH) + (b * H + h) * P * N;
      std::vector<float> h_run(h_state, h_state + P * N), h_sealed;
      for (std::int64_t c = 0; c < nc; ++c) {
        std::copy(h_run.begin(), h_run.end(), h_enter.begin() + ((b * nc + c) * H + h) * P * N);
        if (c == nc - 1) h_sealed = h_run;
        const std::int64_t real = real_rows(c);
        const float* dc = dacs.data() + ((b * H + h) * nc + c) * Q;
        const float dl = F(dc[Q - 1]);
        std::vector<float> vs(Q * P, 0.0f), ks(Q * N, 0.0f), inc(P * N);
        for (std::int64_t i = 0; i < real; ++i) {
          const float e = F(primitives::expf(F(dl - F(dc[i]))));
          const std::int64_t r = row(b, c * Q + i) + h;
          for (std::int64_t p = 0; p < P; ++p) vs[i * P + p] = F(MUL(F(vw[r * P + p]), e));
          for (std::int64_t n = 0; n < N; ++n) ks[i * N + n] = kscale[r * N + n];
        }
        gemm_reference(Orientation::TN, vs.data(), ks.data(), inc.data(), P, N, Q);
        const float decay = F(primitives::expf(dl));
        for (std::int64_t i = 0; i < P * N; ++i) h_run[i] = F(FMA(decay, F(h_run[i]), F(inc[i])));
      }
      std::copy(h_run.begin(), h_run.end(), h_last.begin() + (b * H + h) * P * N);
      std::copy(h_sealed.begin(), h_sealed.end(), h_state);
    }

  // Step 16: intra-chunk attention, state read-out, D skip and the gate, for the new rows.
  std::vector<float> gate(M * di);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t c = 0; c < nc; ++c)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t real = real_rows(c);
        std::vector<float> qm(Q * N, 0.0f), km(Q * N, 0.0f), vm(Q * P, 0.0f);
        for (std::int64_t i = 0; i < real; ++i) {
          const std::int64_t r = row(b, c * Q + i) + h;
          std::copy_n(rotq.begin() + r * N, N, qm.begin() + i * N);
          std::copy_n(kscale.begin() + r * N, N, km.begin() + i * N);
          std::copy_n(vw.begin() + r * P, P, vm.begin() + i * P);
        }
        std::vector<float> S(real * Q), Mm(real * Q, 0.0f), Yi(real * P), ch(real * P);
        gemm_reference(Orientation::NT, qm.data(), km.data(), S.data(), real, Q, N);
        const float* L_ = lseg.data() + ((b * nc + c) * H + h) * Q * Q;
        for (std::int64_t i = 0; i < real; ++i)
          for (std::int64_t j = 0; j < i; ++j) Mm[i * Q + j] = F(MUL(F(S[i * Q + j]), F(L_[i * Q + j])));
        gemm_reference(Orientation::NN, Mm.data(), vm.data(), Yi.data(), real, P, Q);
        gemm_reference(Orientation::NT, qm.data(), h_enter.data() + ((b * nc + c) * H + h) * P * N, ch.data(),
                       real, P, N);
        const float* dc = dacs.data() + ((b * H + h) * nc + c) * Q;
        for (std::int64_t i = 0; i < real; ++i) {
          const std::int64_t t = c * Q + i;
          if (t < q0) continue;  // buffered rows emit no outputs
          const std::int64_t m = b * L + (t - q0);
          const float e = F(primitives::expf(F(dc[i])));
          const float tv = F(F(w.d_skip()[h]) + qkdot[m * H + h]);
          for (std::int64_t p = 0; p < P; ++p) {
            const float ys = F(MUL(F(ch[i * P + p]), e));
            const float y0 = F(ys + Yi[i * P + p]);
            const float skip = F(y0 + F(MUL(tv, F(vw[(row(b, t) + h) * P + p]))));
            const float z = F(col(m, d.col_z() + h * P + p));
            gate[m * di + h * P + p] = F(MUL(F(skip), F(primitives::silu(z))));
          }
        }
      }

  // Step 17: out_proj and the residual.
  std::vector<float> out(M * dm);
  gemm_reference(Orientation::NT, gate.data(), w.out_proj().data(), out.data(), M, dm, di);
  for (std::int64_t i = 0; i < M * dm; ++i) y[i] = F(F(x[i]) + out[i]);

  // Reports, then step 18: keep the last working chunk's rows.
  if (reports != nullptr) {
    reports->h_last = h_last;
    reports->theta_last = theta_after;
    reports->k_last.assign(B * H * N, 0.0f);
    reports->v_last.assign(B * H * P, 0.0f);
    for (std::int64_t b = 0; b < B; ++b) {
      std::copy_n(rotk.begin() + row(b, T - 1) * N, H * N, reports->k_last.begin() + b * H * N);
      std::copy_n(vw.begin() + row(b, T - 1) * P, H * P, reports->v_last.begin() + b * H * P);
    }
  }
  std::copy(theta_after.begin(), theta_after.end(), engine.piece(Mamba3State::kTheta));
  const std::int64_t keep = T - (nc - 1) * Q;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < keep; ++t) {
      const std::int64_t src = row(b, (nc - 1) * Q + t), dst = (b * Q + t) * H;
      std::copy_n(rotq.begin() + src * N, H * N, engine.piece(Mamba3State::kQrot) + dst * N);
      std::copy_n(rotk.begin() + src * N, H * N, engine.piece(Mamba3State::kKrot) + dst * N);
      std::copy_n(vw.begin() + src * P, H * P, engine.piece(Mamba3State::kV) + dst * P);
      std::copy_n(dtw.begin() + src, H, engine.piece(Mamba3State::kDt) + dst);
      std::copy_n(sigw.begin() + src, H, engine.piece(Mamba3State::kSig) + dst);
      std::copy_n(adtw.begin() + src, H, engine.piece(Mamba3State::kAdt) + dst);
    }
  state.buffered_tokens = keep;
}

}  // namespace samebits::blocks
