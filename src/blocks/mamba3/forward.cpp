// Mamba-3 fast path: docs/blocks.md §3.3 with the same bits as the twin, computing only what the call emits.
//
// The literal schedule re-runs the whole last working chunk on every call. Here the rows that emit
// outputs are the only rows whose attention (S, Lseg, Yi) and state read-out are computed; buffered rows
// contribute their kept values (rotated k, v, dt, sig, adt from the state) and the open chunk's running
// sums (dacs, the Lseg column sums) from the state's decode cache, which is re-derived whenever the
// buffer's adt rows no longer match it. A decode step therefore costs O(chunk) per head, flat in the
// position, except once every 64 tokens when the full chunk is sealed into h.
#include <algorithm>
#include <cstring>
#include <samebits/errors.hpp>
#include <vector>

#include "blocks/common/block_support.hpp"
#include "blocks/common/ssm_projections.hpp"
#include "blocks/common/trust_scope.hpp"
#include "blocks/mamba3/chunk.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/mamba3/scalar.hpp"
#include "core/aligned_buffer.hpp"
#include "core/stage_clock.hpp"
#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/mamba3_kernels.hpp"
#include "numerics/primitives.hpp"
#include "numerics/rmsnorm.hpp"
#include "numerics/transpose.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::blocks {

using namespace mamba3;
using fp::F;
using fp::MUL;

namespace {

using namespace mamba3_chunk;
// Up to this many output rows in a chunk run row by row through the chain kernels (no packing); more
// rows run as packed GEMMs. Both give the GEMM profile's cells.
constexpr std::int64_t kKernelRows = 4;
// Tokens per task of the per-token stage (gates, B / C norms, angle rates).
constexpr std::int64_t kTokenRows = 64;
// Rows of biased q / k a rotation task holds at a time (2 x 32 KiB: they stay in the core's cache).
constexpr std::int64_t kBiasedRows = 64;

// Sizes a per-thread array for this call (contents are overwritten before they are read).
void sized(std::vector<float>& values, std::int64_t count) { values.resize(static_cast<std::size_t>(count)); }

// One call's arrays, kept per thread between calls so a large prefill does not fault in fresh pages.
struct CallArrays {
  std::vector<float> normed, proj, dt, sig, adt, gamma, pre_dt, pre_sig, bn, cn, rate, angle, theta_after,
      rotq, rotk, qkdot, gate, out;
};

CallArrays& call_arrays() {
  thread_local CallArrays arrays;
  return arrays;
}

// Steps 2-3's product and step 17's, over `rows` token rows: the only stages that read the projection
// weights, so a multi-sequence step runs them once for all its rows (a GEMM cell depends only on its row).
void project_in(const Mamba3Dims& d, const Mamba3Weights& w, const gemm::PackedRhs& in_proj, const float* x,
                std::int64_t rows, float* normed, float* proj) {
  ssm_project_in(x, rows, d.d_model, w.block_norm().data(), kNormEps, in_proj, normed, proj);
}
void project_out(const Mamba3Dims& d, const gemm::PackedRhs& out_proj, const float* gate, const float* x,
                 std::int64_t rows, float* out, float* y) {
  ssm_project_out(gate, rows, d.d_inner, d.d_model, out_proj, x, out, y);
}

// Where a call's in_proj rows come from and its gated rows go: its own arrays (nullptr), or a
// multi-sequence step's rows of the shared products.
struct SharedRows {
  float* proj = nullptr;  // [M, d_in_proj], already projected
  float* gate = nullptr;  // [M, d_inner], written here; out_proj is the caller's
};

// What the state's bookkeeping needs to know of a finished call.
struct CallFacts {
  bool used_h_transposed;           // h read through its transposed copy (and so both left alone)
  std::int64_t first_written_slot;  // the first buffer slot written: its own rows, or all once a chunk seals
};

// One call of the block: the per-token stages, the per-(b, h) chunk schedule, the buffer update.
class ForwardCall {
 public:
  ForwardCall(const Mamba3Block& block, const gemm::PackedRhs& in_proj, const gemm::PackedRhs& out_proj,
              const float* x, std::int64_t B, std::int64_t L, Mamba3State& state, float* y, bool h_t_reusable,
              bool krot_t_reusable, SharedRows shared = {})
      : d_(block.dims()),
        w_(block.held_weights()),
        in_proj_(in_proj),
        out_proj_(out_proj),
        x_(x),
        B_(B),
        L_(L),
        M_(B * L),
        H_(d_.heads),
        state_(state),
        y_(y),
        q0_(state.buffered_tokens),
        T_(q0_ + L),
        nc_(std::max<std::int64_t>(1, (T_ + Q - 1) / Q)),
        // A call that neither seals a chunk nor consumes Input_States leaves h alone: its decode rows read
        // h through the transposed copy when that copy is known to match h.
        use_h_t_(nc_ == 1 && !state.pending && h_t_reusable),
        // Such a call's rows read the buffered keys through their transposed copy likewise.
        use_krot_t_(nc_ == 1 && krot_t_reusable),
        proj_(shared.proj),
        gate_(shared.gate) {
    for (int p = 0; p < Mamba3State::kPieceCount; ++p) pieces_[p] = Mamba3State::EngineAccess(state).piece(p);
  }

  CallFacts facts() const { return {use_h_t_, std::max(q0_, (nc_ - 1) * Q) - (nc_ - 1) * Q}; }

  // The whole call: projections, the sequence's own stages, out_proj and the residual.
  void run() {
    sized(a_.proj, M_ * d_.d_in_proj);
    sized(a_.normed, M_ * d_.d_model);
    proj_ = a_.proj.data();
    project_in(d_, w_, in_proj_, x_, M_, a_.normed.data(), proj_);
    sized(a_.gate, M_ * d_.d_inner);
    gate_ = a_.gate.data();
    {
      const stage_clock::Scope timed(stage_clock::Stage::kScan);  // a profile's split
      run_sequence();
    }
    sized(a_.out, M_ * d_.d_model);
    project_out(d_, out_proj_, gate_, x_, M_, a_.out.data(), y_);
  }

  // The stages between the projections (the rows come from and go to SharedRows).
  void run_sequence() {
    token_stage();
    angle_stage();
    rotation_stage();
    prepare_open_chunk_cache();
    if (use_h_t_) h_t_ = Mamba3State::EngineAccess(state_).h_transposed();
    if (use_krot_t_) krot_t_ = Mamba3State::EngineAccess(state_).krot_transposed();
    parallel_for(B_ * H_, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t bh = begin; bh < end; ++bh) head_schedule(bh / H_, bh % H_);
    });
    if (state_.pending) {
      state_.pending = false;
      std::fill_n(piece(Mamba3State::kPendingK), state_.piece_elements(Mamba3State::kPendingK), 0.0f);
      std::fill_n(piece(Mamba3State::kPendingV), state_.piece_elements(Mamba3State::kPendingV), 0.0f);
    }
    update_buffer();
  }

 private:
  // The state's pieces, taken once through the engine's access (these reads and writes expose nothing).
  float* piece(int which) const { return pieces_[which]; }
  // Working-row accessors for (b, t, h): buffered rows t < q0 live in the state, new rows in this call.
  std::int64_t new_row(std::int64_t b, std::int64_t t) const { return b * L_ + (t - q0_); }
  std::int64_t buf_row(std::int64_t b, std::int64_t t, std::int64_t h) const { return (b * Q + t) * H_ + h; }
  float dt_at(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return t < q0_ ? piece(Mamba3State::kDt)[buf_row(b, t, h)] : dt_[new_row(b, t) * H_ + h];
  }
  float sig_at(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return t < q0_ ? piece(Mamba3State::kSig)[buf_row(b, t, h)] : sig_[new_row(b, t) * H_ + h];
  }
  float adt_at(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return t < q0_ ? piece(Mamba3State::kAdt)[buf_row(b, t, h)] : adt_[new_row(b, t) * H_ + h];
  }
  const float* rotk_at(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return t < q0_ ? piece(Mamba3State::kKrot) + buf_row(b, t, h) * N
                   : rotk_.data() + (new_row(b, t) * H_ + h) * N;
  }
  const float* v_at(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return t < q0_ ? piece(Mamba3State::kV) + buf_row(b, t, h) * P
                   : proj_ + new_row(b, t) * d_.d_in_proj + d_.col_x() + h * P;
  }
  // Step 7: scale_t = gamma_t + beta'_t, beta' from the next working row when it exists.
  float scale_at(std::int64_t b, std::int64_t t, std::int64_t h) const {
    const float gamma = gamma_of(dt_at(b, t, h), sig_at(b, t, h));
    const float beta = t + 1 < T_ ? beta_prime_of(dt_at(b, t + 1, h), sig_at(b, t + 1, h)) : 0.0f;
    return F(gamma + beta);
  }

  // Steps 4 and 6 for the new tokens (their in_proj rows are ready), vectorized over tokens and heads.
  void token_stage() {
    sized(dt_, M_ * H_);
    sized(sig_, M_ * H_);
    sized(adt_, M_ * H_);
    sized(gamma_, M_ * H_);
    sized(a_.pre_dt, M_ * H_);
    sized(a_.pre_sig, M_ * H_);
    sized(bn_, M_ * N);
    sized(cn_, M_ * N);
    sized(rate_, M_ * R);
    // Every output is its own token's: blocks of tokens run side by side (a decode step's one token
    // stays on this thread).
    parallel_for(
        M_, [&](std::int64_t begin, std::int64_t end) { token_rows(begin, end); }, kTokenRows);
  }

  // token_stage for the tokens [m0, m1).
  void token_rows(std::int64_t m0, std::int64_t m1) {
    const std::int64_t dip = d_.d_in_proj, count = m1 - m0;
    float* pre_dt = a_.pre_dt.data() + m0 * H_;
    float* pre_sig = a_.pre_sig.data() + m0 * H_;
    for (std::int64_t m = m0; m < m1; ++m)
      for (std::int64_t h = 0; h < H_; ++h) {
        const float* row = proj_ + m * dip;
        pre_dt[(m - m0) * H_ + h] = F(F(row[d_.col_dt() + h]) + F(w_.dt_bias()[h]));
        pre_sig[(m - m0) * H_ + h] = F(row[d_.col_trap() + h]);
      }
    const auto cells = static_cast<std::size_t>(count * H_);
    vector_math::softplus(pre_dt, dt_.data() + m0 * H_, cells);
    vector_math::sigmoid(pre_sig, sig_.data() + m0 * H_, cells);
    for (std::int64_t m = m0; m < m1; ++m)
      for (std::int64_t h = 0; h < H_; ++h) {
        const std::int64_t i = m * H_ + h;
        dt_[i] = F(dt_[i]);
        sig_[i] = F(sig_[i]);
        const float a = heavy_tail_a(proj_[m * dip + d_.col_a() + h]);
        adt_[i] = F(MUL(F(a), F(dt_[i])));
        gamma_[i] = gamma_of(dt_[i], sig_[i]);
      }

    // Step 4: B / C RMSNorm over the 128 columns of each token.
    for (std::int64_t m = m0; m < m1; ++m) {
      std::memcpy(bn_.data() + m * N, proj_ + m * dip + d_.col_b(), N * sizeof(float));
      std::memcpy(cn_.data() + m * N, proj_ + m * dip + d_.col_c(), N * sizeof(float));
    }
    rmsnorm::rmsnorm_serial(bn_.data() + m0 * N, w_.b_norm().data(), bn_.data() + m0 * N, count, N, kNormEps);
    rmsnorm::rmsnorm_serial(cn_.data() + m0 * N, w_.c_norm().data(), cn_.data() + m0 * N, count, N, kNormEps);

    // Step 8's per-token rate a = tanh(angle_raw) * pi, shared by every head.
    float* rate = rate_.data() + m0 * R;
    for (std::int64_t m = m0; m < m1; ++m)
      for (std::int64_t r = 0; r < R; ++r) rate[(m - m0) * R + r] = F(proj_[m * dip + d_.col_angle() + r]);
    vector_math::tanh(rate, rate, static_cast<std::size_t>(count * R));
    for (std::int64_t i = 0; i < count * R; ++i) rate[i] = F(MUL(rate[i], kPi));
  }

  // Step 8: the serial angle recurrence per (b, h), vectorized over its 32 angles.
  void angle_stage() {
    sized(angle_, M_ * H_ * R);
    sized(theta_after_, B_ * H_ * R);
    // A (b, h) task is L steps of 32 angles: a decode step's dozen tasks take a microsecond together,
    // less than handing them to another thread, so short calls run them on this one.
    const std::int64_t grain = std::max<std::int64_t>(1, 512 / L_);
    parallel_for(
        B_ * H_,
        [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t bh = begin; bh < end; ++bh) {
            const std::int64_t b = bh / H_, h = bh % H_;
            float* run = theta_after_.data() + bh * R;
            for (std::int64_t r = 0; r < R; ++r) run[r] = F(piece(Mamba3State::kTheta)[bh * R + r]);
            mamba3_kernels::angle_scan(run, R, rate_.data() + b * L_ * R, R, dt_.data() + b * L_ * H_ + h, H_,
                                       L_, angle_.data() + (b * L_ * H_ + h) * R, H_ * R);
          }
        },
        grain);
  }

  // Steps 9-10: biased q / k, the interleaved rotation of the first 32 pairs, and the diagonal q.k.
  void rotation_stage() {
    const std::int64_t rows = M_ * H_;
    sized(rotq_, rows * N);
    sized(rotk_, rows * N);
    sized(qkdot_, rows);
    // The biased q and k rows feed only the diagonal q.k, and the cosines and sines only the rotation:
    // each task keeps a block of them in small per-thread buffers (still cached when they are read)
    // instead of whole-call arrays.
    parallel_for(
        rows,
        [&](std::int64_t begin, std::int64_t end) {
          thread_local AlignedBuffer<float> qb(kBiasedRows * N), kb(kBiasedRows * N),
              cosines(kBiasedRows * R), sines(kBiasedRows * R);
          for (std::int64_t i0 = begin; i0 < end; i0 += kBiasedRows) {
            const std::int64_t count = std::min(kBiasedRows, end - i0);
            const auto angles = static_cast<std::size_t>(count * R);
            // F(angle) is the identity: angles are flushed.
            vector_math::cos(angle_.data() + i0 * R, cosines.data(), angles);
            vector_math::sin(angle_.data() + i0 * R, sines.data(), angles);
            for (std::int64_t r = 0; r < count; ++r) {
              const std::int64_t i = i0 + r, m = i / H_, h = i % H_;
              mamba3_kernels::bias_rotate(bn_.data() + m * N, w_.b_bias().data() + h * N,
                                          cosines.data() + r * R, sines.data() + r * R, R, N,
                                          kb.data() + r * N, rotk_.data() + i * N);
              mamba3_kernels::bias_rotate(cn_.data() + m * N, w_.c_bias().data() + h * N,
                                          cosines.data() + r * R, sines.data() + r * R, R, N,
                                          qb.data() + r * N, rotq_.data() + i * N);
            }
            mamba3_kernels::dot_chains(qb.data(), N, kb.data(), N, count, N, qkdot_.data() + i0);
            for (std::int64_t i = i0; i < i0 + count; ++i) qkdot_[i] = F(MUL(F(qkdot_[i]), gamma_[i]));
          }
        },
        kBiasedRows);
  }

  // The open chunk's running sums are taken from the decode cache when it still describes the buffer;
  // otherwise they are rebuilt from buffer_adt (steps 12-13 over the buffered rows).
  void prepare_open_chunk_cache() {
    auto& cache = Mamba3State::EngineAccess(state_).open_chunk_cache();
    if (q0_ == 0) return;
    bool current = cache.valid && cache.rows == q0_;
    for (std::int64_t bh = 0; current && bh < B_ * H_; ++bh)
      for (std::int64_t t = 0; t < q0_; ++t)
        if (fp::bits(cache.adt[bh * Q + t]) !=
            fp::bits(piece(Mamba3State::kAdt)[buf_row(bh / H_, t, bh % H_)])) {
          current = false;
          break;
        }
    if (current) return;
    for (std::int64_t bh = 0; bh < B_ * H_; ++bh) {
      const std::int64_t b = bh / H_, h = bh % H_;
      float* adt = cache.adt.data() + bh * Q;
      float* dacs = cache.dacs.data() + bh * Q;
      float* colacc = cache.colacc.data() + bh * Q;
      for (std::int64_t t = 0; t < q0_; ++t) {
        adt[t] = piece(Mamba3State::kAdt)[buf_row(b, t, h)];
        extend_open_chunk(dacs, colacc, t, F(adt[t]));
      }
    }
    cache.valid = true;
    cache.rows = q0_;
  }

  // Steps 11-16 for one (batch row, head), chunk by chunk. h_enter is the state entering the current chunk:
  // state.h itself for chunk 0, then the scratch copy each fold produces.
  void head_schedule(std::int64_t b, std::int64_t h) {
    HeadScratch& s = head_scratch();
    const std::int64_t bh = b * H_ + h;
    float* h_state = piece(Mamba3State::kH) + bh * P * N;
    if (state_.pending) apply_pending(b, h, h_state);
    const float* h_enter = h_state;
    auto& cache = Mamba3State::EngineAccess(state_).open_chunk_cache();
    if (q0_ > 0) {
      std::memcpy(s.dacs, cache.dacs.data() + bh * Q, q0_ * sizeof(float));
      std::memcpy(s.colacc, cache.colacc.data() + bh * Q, q0_ * sizeof(float));
    }
    for (std::int64_t c = 0; c < nc_; ++c) {
      const std::int64_t c0 = c * Q, real = std::min(Q, T_ - c0), first = c == 0 ? q0_ : 0;
      const bool fold = c + 1 < nc_;  // the last chunk is folded only for the reports (reports_of)
      const bool packed = real - first > kKernelRows;
      // The sealed boundary: the state entering the last working chunk.
      if (c > 0 && c + 1 == nc_) std::memcpy(h_state, h_enter, P * N * sizeof(float));
      // Step 7's scales of the chunk's rows; step 11's scaled k rows are stored only for the packed
      // products and the fold (row-by-row outputs scale k inside their chains).
      for (std::int64_t i = 0; i < real; ++i) s.scale[i] = scale_at(b, c0 + i, h);
      if (packed || fold) {  // (rows past `real` are read only by the packed S product)
        for (std::int64_t i = 0; i < real; ++i)
          mamba3_kernels::scaled_copy(rotk_at(b, c0 + i, h), s.scale[i], s.kscale.data() + i * N, N);
        std::memset(s.kscale.data() + real * N, 0, (Q - real) * N * sizeof(float));
      }
      // Steps 12-13 for the rows this call adds; Lseg rows only for rows that emit outputs.
      for (std::int64_t i = first; i < real; ++i) {
        extend_open_chunk(s.dacs, s.colacc, i, F(adt_at(b, c0 + i, h)));
        float* lrow = s.lseg.data() + (i - first) * Q;
        std::memcpy(lrow, s.colacc, i * sizeof(float));
        vector_math::exp(lrow, lrow, static_cast<std::size_t>(i));
      }
      for (std::int64_t i = real; i < Q; ++i) s.dacs[i] = s.dacs[real - 1];
      if (real > first) {
        if (packed)
          packed_chunk_outputs(b, h, c0, first, real, h_enter, s);
        else
          row_chunk_outputs(b, h, c0, first, real, h_enter, s);
        chunk_epilogue(b, h, c0, first, real, s);
      }
      if (fold) {
        if (h_enter != s.h_run.data()) std::memcpy(s.h_run.data(), h_enter, P * N * sizeof(float));
        fold_chunk(b, h, c0, real, s);
        h_enter = s.h_run.data();
      }
    }
    // The last working chunk is the open chunk of the next call: keep its running sums.
    const std::int64_t keep = T_ - (nc_ - 1) * Q;
    for (std::int64_t i = 0; i < keep; ++i) cache.adt[bh * Q + i] = adt_at(b, (nc_ - 1) * Q + i, h);
    std::memcpy(cache.dacs.data() + bh * Q, s.dacs, keep * sizeof(float));
    std::memcpy(cache.colacc.data() + bh * Q, s.colacc, keep * sizeof(float));
  }

  // Step 14: the pending Input_States correction (only on a fresh state, so row 0 is a new token).
  void apply_pending(std::int64_t b, std::int64_t h, float* h_state) const {
    const std::int64_t bh = b * H_ + h;
    const float csc = beta_prime_of(dt_at(b, 0, h), sig_at(b, 0, h));
    for (std::int64_t p = 0; p < P; ++p) {
      const float pv = F(piece(Mamba3State::kPendingV)[bh * P + p]);
      for (std::int64_t n = 0; n < N; ++n) {
        float& cell = h_state[p * N + n];
        cell = F(F(cell) + F(MUL(F(MUL(pv, F(piece(Mamba3State::kPendingK)[bh * N + n]))), csc)));
      }
    }
  }

  // Step 16's products for the chunk's rows [first, real) as packed GEMMs (prefill-sized row counts):
  // S = rotq kscale^T, the masked decay Mm, Yi = Mm V, and the state read-out rotq h_enter^T.
  void packed_chunk_outputs(std::int64_t b, std::int64_t h, std::int64_t c0, std::int64_t first,
                            std::int64_t real, const float* h_enter, HeadScratch& s) {
    const std::int64_t rows = real - first;
    const gemm::LhsView q_rows{rotq_.data() + (new_row(b, c0 + first) * H_ + h) * N, H_ * N, 1};
    // The products' right operands are packed from transposed copies: packing row-major runs contiguous
    // rows (the same panels as packing the originals transposed, column by column, only faster).
    transpose::transpose(s.kscale.data(), Q, N, s.kscale_t.data());
    const gemm::PackedRhs k_packed = gemm::PackedRhs::from_row_major(s.kscale_t.data(), N, Q);
    gemm::gemm_packed(q_rows, rows, k_packed, s.scores.data());
    for (std::int64_t r = 0; r < rows; ++r)
      mask_decay(first + r, s.scores.data() + r * Q, s.lseg.data() + r * Q, s.mixed.data() + r * Q);
    for (std::int64_t i = 0; i < Q; ++i) {
      float* dst = s.v_chunk.data() + i * P;
      if (i < real)
        std::memcpy(dst, v_at(b, c0 + i, h), P * sizeof(float));
      else
        std::memset(dst, 0, P * sizeof(float));
    }
    const gemm::PackedRhs v_packed = gemm::PackedRhs::from_row_major(s.v_chunk.data(), Q, P);
    gemm::gemm_packed({s.mixed.data(), Q, 1}, rows, v_packed, s.y_intra.data());
    transpose::transpose(h_enter, P, N, s.h_t.data());
    const gemm::PackedRhs h_packed = gemm::PackedRhs::from_row_major(s.h_t.data(), N, P);
    gemm::gemm_packed(q_rows, rows, h_packed, s.y_state.data());
  }

  // The same cells one row at a time (decode-sized row counts): the rows of S below the diagonal, the
  // 64-step Yi chains (padding included, as the GEMM runs them: Mm is +0.0 from the diagonal on, so the
  // steps there only settle the sign of a -0.0 chain) and the state read-out.
  void row_chunk_outputs(std::int64_t b, std::int64_t h, std::int64_t c0, std::int64_t first,
                         std::int64_t real, const float* h_enter, HeadScratch& s) {
    alignas(64) static const float zero_row[P] = {};
    const float* v_rows[Q];
    for (std::int64_t j = 0; j < Q; ++j) v_rows[j] = j < real ? v_at(b, c0 + j, h) : zero_row;
    // The read-out q h^T: from h's transposed copy when it holds h_enter (the same cells, without
    // transposing h on every row), else straight from h_enter.
    const std::int64_t bh = b * H_ + h;
    const bool from_transposed = use_h_t_ && h_enter == piece(Mamba3State::kH) + bh * P * N;
    const float* h_rows[N];
    if (from_transposed)
      for (std::int64_t n = 0; n < N; ++n) h_rows[n] = h_t_ + (bh * N + n) * P;
    for (std::int64_t r = 0; r < real - first; ++r) {
      const std::int64_t i = first + r;
      const float* q = rotq_.data() + (new_row(b, c0 + i) * H_ + h) * N;
      // S[i][j] for j < i: the buffered rows (state) and the new rows (this call) are two strided runs.
      const std::int64_t buffered = std::min(i, std::max<std::int64_t>(q0_ - c0, 0));
      if (buffered > 0 && use_krot_t_)  // c0 == 0: the buffered rows are slots [0, buffered)
        mamba3_kernels::scaled_dot_chains_transposed(q, krot_t_ + bh * N * Q, Q, s.scale, buffered, N,
                                                     s.scores.data());
      else if (buffered > 0)
        mamba3_kernels::scaled_dot_chains(q, rotk_at(b, c0, h), H_ * N, s.scale, buffered, N,
                                          s.scores.data());
      if (i > buffered)
        mamba3_kernels::scaled_dot_chains(q, rotk_at(b, c0 + buffered, h), H_ * N, s.scale + buffered,
                                          i - buffered, N, s.scores.data() + buffered);
      float* mixed = s.mixed.data() + r * Q;
      mask_decay(i, s.scores.data(), s.lseg.data() + r * Q, mixed);
      mamba3_kernels::axpy_chains_zero_tail(mixed, v_rows, i, Q, P, s.y_intra.data() + r * P);
      if (from_transposed)
        mamba3_kernels::axpy_chains(q, 1, h_rows, N, P, s.y_state.data() + r * P);
      else
        mamba3_kernels::dot_chains(q, 0, h_enter, N, P, N, s.y_state.data() + r * P);
    }
  }

  // Mm[i][j] = F(MUL(F(S[i][j]), F(Lseg[i][j]))) below the diagonal, +0.0 elsewhere.
  static void mask_decay(std::int64_t i, const float* score, const float* lrow, float* mixed) {
    for (std::int64_t j = 0; j < i; ++j) mixed[j] = F(MUL(F(score[j]), F(lrow[j])));
    std::fill(mixed + i, mixed + Q, 0.0f);
  }

  // Step 16's tail for rows [first, real): state term, D skip and the SiLU gate.
  void chunk_epilogue(std::int64_t b, std::int64_t h, std::int64_t c0, std::int64_t first, std::int64_t real,
                      HeadScratch& s) {
    const std::int64_t rows = real - first, m0 = new_row(b, c0 + first), dip = d_.d_in_proj;
    for (std::int64_t r = 0; r < rows; ++r) s.e_row[r] = F(s.dacs[first + r]);
    vector_math::exp(s.e_row.data(), s.e_row.data(), static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r)
      vector_math::flush(proj_ + (m0 + r) * dip + d_.col_z() + h * P, s.z.data() + r * P, P);
    vector_math::silu(s.z.data(), s.silu_z.data(), static_cast<std::size_t>(rows * P));
    const float d_skip = F(w_.d_skip()[h]);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t m = m0 + r;
      const float e = F(s.e_row[r]);
      const float tv = F(d_skip + qkdot_[m * H_ + h]);
      mamba3_kernels::gate_row(s.y_state.data() + r * P, s.y_intra.data() + r * P, e, tv,
                               proj_ + m * dip + d_.col_x() + h * P, s.silu_z.data() + r * P,
                               gate_ + m * d_.d_inner + h * P, P);
    }
  }

  // Step 15 for one chunk of this call's working rows.
  void fold_chunk(std::int64_t b, std::int64_t h, std::int64_t c0, std::int64_t real, HeadScratch& s) {
    const float* v_rows[Q];
    for (std::int64_t i = 0; i < real; ++i) v_rows[i] = v_at(b, c0 + i, h);
    fold_rows(s, v_rows, real);
  }

  // Step 18: theta, and the last working chunk's rows (only new rows change: when no chunk was sealed
  // the buffered rows stay where they are).
  void update_buffer() {
    std::memcpy(piece(Mamba3State::kTheta), theta_after_.data(), theta_after_.size() * sizeof(float));
    const std::int64_t start = (nc_ - 1) * Q;
    for (std::int64_t b = 0; b < B_; ++b)
      for (std::int64_t t = std::max(start, q0_); t < T_; ++t) {
        const std::int64_t m = new_row(b, t), slot = t - start;
        std::memcpy(piece(Mamba3State::kQrot) + buf_row(b, slot, 0) * N, rotq_.data() + m * H_ * N,
                    H_ * N * sizeof(float));
        std::memcpy(piece(Mamba3State::kKrot) + buf_row(b, slot, 0) * N, rotk_.data() + m * H_ * N,
                    H_ * N * sizeof(float));
        for (std::int64_t h = 0; h < H_; ++h) {
          std::memcpy(piece(Mamba3State::kV) + buf_row(b, slot, h) * P, v_at(b, t, h), P * sizeof(float));
          piece(Mamba3State::kDt)[buf_row(b, slot, h)] = dt_[m * H_ + h];
          piece(Mamba3State::kSig)[buf_row(b, slot, h)] = sig_[m * H_ + h];
          piece(Mamba3State::kAdt)[buf_row(b, slot, h)] = adt_[m * H_ + h];
        }
      }
    state_.buffered_tokens = T_ - start;
    auto& cache = Mamba3State::EngineAccess(state_).open_chunk_cache();
    cache.valid = true;
    cache.rows = state_.buffered_tokens;
  }

  const Mamba3Dims& d_;
  const Mamba3Weights& w_;
  const gemm::PackedRhs& in_proj_;
  const gemm::PackedRhs& out_proj_;
  const float* x_;
  const std::int64_t B_, L_, M_, H_;
  Mamba3State& state_;
  float* pieces_[Mamba3State::kPieceCount];
  float* h_t_ = nullptr;     // [B, H, N, P] h transposed, when use_h_t_
  float* krot_t_ = nullptr;  // [B, H, N, Q] buffer_krot transposed, when use_krot_t_
  float* y_;
  const std::int64_t q0_, T_, nc_;
  const bool use_h_t_;
  const bool use_krot_t_;
  float* proj_;  // [M, d_in_proj]
  float* gate_;  // [M, d_inner]

  CallArrays& a_ = call_arrays();
  std::vector<float>&dt_ = a_.dt, &sig_ = a_.sig, &adt_ = a_.adt, &gamma_ = a_.gamma;
  std::vector<float>&bn_ = a_.bn, &cn_ = a_.cn, &rate_ = a_.rate, &angle_ = a_.angle,
  &theta_after_ = a_.theta_after;
  std::vector<float>&rotq_ = a_.rotq, &rotk_ = a_.rotk, &qkdot_ = a_.qkdot;
};

// One call's bookkeeping on its state around `run_call` (which builds the call with the two reuse flags,
// runs it and returns its facts). Every piece is finite here (trusted, or just scanned). The call's own
// writes are checked afterwards, so a state only this engine has written is trusted again and its next
// call skips the scan; until then (an exception mid-call included) it is not.
template <typename RunCall>
void tracked_call(Mamba3State& state, std::int64_t L, const RunCall& run_call) {
  Mamba3State::EngineAccess engine(state);
  // h's transposed copy may be reused only if nobody outside the engine can have written h since it was
  // made: the state must be trusted now.
  const bool h_t_reusable = state.trusted() && engine.h_transposed_current();
  const bool krot_t_reusable = state.trusted() && engine.krot_transposed_current() &&
                               state.buffered_tokens <= engine.krot_transposed_rows();
  TrustScope<Mamba3State> trust(state, L);
  engine.drop_derived_copies();  // until the call has run
  const CallFacts call = run_call(h_t_reusable, krot_t_reusable);
  trust.commit();
  // A trusted state keeps h's transposed copy current for its next decode rows: made anew after a call
  // that changed h (a sealed chunk, Input_States) or that could not rely on the old copy.
  if (state.trusted()) {
    if (!call.used_h_transposed) engine.transpose_h();
    engine.set_h_transposed_current(true);
    // The keys' copy takes the rows this call wrote, or every buffered row when it could not be relied on.
    engine.mirror_krot(krot_t_reusable ? call.first_written_slot : 0, state.buffered_tokens);
    engine.set_krot_transposed_current(true);
  }
}

}  // namespace

void Mamba3Block::forward(const float* x, std::int64_t B, std::int64_t L, Mamba3State& state, float* y,
                          Mamba3Reports* reports, const char* entry, bool state_checked) const {
  if (x == nullptr) throw_value_error(std::string(entry) + ": x has no data");
  refuse(x, B, L, state, entry, !state_checked);
  tracked_call(state, L, [&](bool h_t_reusable, bool krot_t_reusable) {
    ForwardCall call(*this, packed_in_proj_, packed_out_proj_, x, B, L, state, y, h_t_reusable,
                     krot_t_reusable);
    call.run();
    return call.facts();
  });
  if (reports != nullptr) *reports = reports_of(state);
}

void Mamba3Block::step_many(const float* x, std::int64_t count, Mamba3State* const* states, float* y,
                            const char* entry, bool states_checked) const {
  if (x == nullptr) throw_value_error(std::string(entry) + ": x has no data");
  const std::int64_t dm = dims_.d_model;
  for (std::int64_t i = 0; i < count; ++i) refuse(x + i * dm, 1, 1, *states[i], entry, !states_checked);
  AlignedBuffer<float> normed(static_cast<std::size_t>(count * dm));
  AlignedBuffer<float> proj(static_cast<std::size_t>(count * dims_.d_in_proj));
  AlignedBuffer<float> gate(static_cast<std::size_t>(count * dims_.d_inner));
  project_in(dims_, weights_, packed_in_proj_, x, count, normed.data(), proj.data());
  // The sequences side by side on the pool (each call's own parallel regions then run serially on its
  // thread, with that thread's arrays; no bit depends on the thread).
  parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      tracked_call(*states[i], 1, [&](bool h_t_reusable, bool krot_t_reusable) {
        const SharedRows rows{proj.data() + i * dims_.d_in_proj, gate.data() + i * dims_.d_inner};
        ForwardCall call(*this, packed_in_proj_, packed_out_proj_, x + i * dm, 1, 1, *states[i], nullptr,
                         h_t_reusable, krot_t_reusable, rows);
        call.run_sequence();
        return call.facts();
      });
    }
  });
  AlignedBuffer<float> out(static_cast<std::size_t>(count * dm));
  project_out(dims_, packed_out_proj_, gate.data(), x, count, out.data(), y);
}

}  // namespace samebits::blocks
