// Mamba-2 block (docs/blocks.md §2): the lazily evaluated report and the fast forward. The fast SSD core runs
// the chunk schedule of docs/blocks.md §2.3 step 7 but computes only the rows
// whose outputs the call returns: the open chunk's earlier rows enter through kept running sums (dacs,
// the segment-sum column frontier) and through the state's own buffer, so a decode step costs O(chunk).
#include <algorithm>
#include <bit>
#include <cstring>
#include <samebits/errors.hpp>

#include "blocks/common/block_support.hpp"
#include "blocks/common/ssm_projections.hpp"
#include "blocks/common/trust_scope.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/rmsnorm.hpp"
#include "numerics/ssd.hpp"
#include "numerics/transpose.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::blocks {

using fp::F;
using fp::MUL;

namespace {

constexpr float kNormEps = 1e-5f;
static_assert(std::bit_cast<std::uint32_t>(kNormEps) == 0x3727C5ACu,
              "Mamba RMSNorm eps differs from Appendix A");
constexpr std::int64_t Q = Mamba2Dims::kChunk;
constexpr std::int64_t P = Mamba2Dims::kHeadDim;
constexpr std::int64_t N = Mamba2Dims::kState;
// Output rows at or below this count use the single-row kernels (no operand packing); more use the
// packed GEMM. Both give the profile's cells bit for bit.
constexpr std::int64_t kFewRows = 2;

std::int64_t grain_for(std::int64_t cells_per_item, std::int64_t work = 16384) {
  return std::max<std::int64_t>(1, work / std::max<std::int64_t>(1, cells_per_item));
}

}  // namespace

// ------------------------------------------------------------------------------------ the report

Mamba2Report::Mamba2Report(std::shared_ptr<Mamba2StateData> source, std::vector<float> A,
                           std::vector<float> dt_bias, float dt_lo, float dt_hi)
    : source_(std::move(source)),
      generation_(source_->generation),
      A_(std::move(A)),
      dt_bias_(std::move(dt_bias)),
      dt_lo_(dt_lo),
      dt_hi_(dt_hi) {}

Mamba2Report::Mamba2Report(std::vector<float> h_last) : h_last_(std::move(h_last)), evaluated_(true) {}

void Mamba2Report::evaluate_locked() {
  if (evaluated_) return;
  const Mamba2StateData& data = *source_;
  h_last_.resize(static_cast<std::size_t>(data.batch * data.dims.nheads * P * N));
  mamba2_detail::h_last_from_state(data, A_.data(), dt_bias_.data(), dt_lo_, dt_hi_, h_last_.data());
  evaluated_ = true;
  source_.reset();  // the state may now change freely
}

const std::vector<float>& Mamba2Report::h_last() {
  std::lock_guard<std::mutex> lock(mutex_);
  evaluate_locked();
  return h_last_;
}

bool Mamba2Report::evaluated() {
  std::lock_guard<std::mutex> lock(mutex_);
  return evaluated_;
}

namespace {

// The chunk pass of docs/blocks.md §2.3 step 7 for one head: h_out = F(FMA(F(expf(F(dl))), F(h_prev),
// F(cstate))) with cstate = GEMM_TN(Xd, B_decay) (k = 256). It is formed as its transpose B_decay^T Xd: each
// cell is the same serial chain of FMA(F(Xd[i][p]), F(Bd[i][n]), acc) (a fused product is exact, so the
// operand order inside it cannot matter), B_decay is read in place and only Xd is packed. xd: [Q][P] with
// rows >= real zero; B row i at b_rows + i * b_stride; dacs: the chunk's running sums.
void chunk_pass_head(const float* xd, const float* b_rows, std::int64_t b_stride, std::int64_t real,
                     const float* dacs, const float* h_prev, float* h_out) {
  thread_local std::vector<float> dec, bd, ct, cstate;
  dec.resize(static_cast<std::size_t>(Q));
  bd.resize(static_cast<std::size_t>(Q * N));
  ct.resize(static_cast<std::size_t>(N * P));
  cstate.resize(static_cast<std::size_t>(P * N));
  const float dl = dacs[real - 1];  // padded rows copy the last real value
  for (std::int64_t i = 0; i < real; ++i) dec[i] = F(dl - dacs[i]);
  vector_math::exp(dec.data(), dec.data(), static_cast<std::size_t>(real));
  vector_math::flush(dec.data(), dec.data(), static_cast<std::size_t>(real));
  for (std::int64_t i = 0; i < real; ++i) ssd::scale(b_rows + i * b_stride, dec[i], bd.data() + i * N, N);
  std::fill(bd.begin() + real * N, bd.end(), 0.0f);
  gemm::gemm_packed({bd.data(), 1, N}, N, gemm::PackedRhs::from_row_major(xd, Q, P), ct.data());
  for (std::int64_t p = 0; p < P; ++p)
    for (std::int64_t n = 0; n < N; ++n) cstate[p * N + n] = ct[n * P + p];
  ssd::chunk_pass(F(primitives::expf(F(dl))), h_prev, cstate.data(), h_out, P * N);
}

}  // namespace

namespace mamba2_detail {

float dt_of(float raw, float bias, float lo, float hi) {
  return F(primitives::clamp(F(primitives::softplus(F(F(raw) + F(bias)))), lo, hi));
}

void h_last_from_state(const Mamba2StateData& data, const float* A, const float* dt_bias, float dt_lo,
                       float dt_hi, float* h_last) {
  const std::int64_t B = data.batch, H = data.dims.nheads, cd = data.dims.conv_dim, di = data.dims.d_inner;
  const std::int64_t r = data.buffered_tokens;
  const std::int64_t head_size = P * N;
  if (r == 0) {  // the final chunk completed: h_last is the boundary itself
    std::memcpy(h_last, data.h.data(), static_cast<std::size_t>(B * H * head_size) * sizeof(float));
    return;
  }
  parallel_for(B * H, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> xd(static_cast<std::size_t>(Q * P), 0.0f), dacs(static_cast<std::size_t>(Q));
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t b = task / H, h = task % H;
      float run = 0.0f;
      for (std::int64_t i = 0; i < r; ++i) {
        const float dtv = F(dt_of(data.buffer_dtraw[(b * Q + i) * H + h], dt_bias[h], dt_lo, dt_hi));
        const float dA = F(MUL(dtv, F(A[h])));
        run = i == 0 ? F(dA) : F(run + dA);
        dacs[i] = run;
        ssd::scale(data.buffer_xbc.data() + (b * Q + i) * cd + h * P, dtv, xd.data() + i * P, P);
      }
      std::fill(xd.begin() + r * P, xd.end(), 0.0f);
      chunk_pass_head(xd.data(), data.buffer_xbc.data() + b * Q * cd + di, cd, r, dacs.data(),
                      data.h.data() + task * head_size, h_last + task * head_size);
    }
  });
}

}  // namespace mamba2_detail

namespace {

// Makes data.open describe the buffered rows for this block: kept when it was derived from exactly the
// buffered raw dt rows by this block, rebuilt from the buffer otherwise (a foreign or edited state).
// Returns whether the rows were kept.
bool ensure_open_rows(Mamba2StateData& data, std::uint64_t owner, const float* A, const float* dt_bias,
                      float lo, float hi) {
  const std::int64_t B = data.batch, H = data.dims.nheads, q0 = data.buffered_tokens;
  Mamba2OpenChunkRows& open = data.open;
  const std::size_t per_head = static_cast<std::size_t>(B * H * Q);
  bool valid = open.owner == owner && open.rows == q0 && open.dt.size() == per_head &&
               open.dtraw.size() == static_cast<std::size_t>(B * Q * H);
  for (std::int64_t b = 0; valid && b < B; ++b)
    valid = std::memcmp(open.dtraw.data() + b * Q * H, data.buffer_dtraw.data() + b * Q * H,
                        static_cast<std::size_t>(q0 * H) * sizeof(float)) == 0;
  if (valid) return true;
  open.dt.assign(per_head, 0.0f);
  open.dA.assign(per_head, 0.0f);
  open.dacs.assign(per_head, 0.0f);
  open.frontier.assign(per_head, 0.0f);
  open.dtraw.assign(static_cast<std::size_t>(B * Q * H), 0.0f);
  for (std::int64_t b = 0; b < B; ++b) {
    std::memcpy(open.dtraw.data() + b * Q * H, data.buffer_dtraw.data() + b * Q * H,
                static_cast<std::size_t>(q0 * H) * sizeof(float));
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t base = (b * H + h) * Q;
      float* dt = open.dt.data() + base;
      float* dA = open.dA.data() + base;
      float* dacs = open.dacs.data() + base;
      float* frontier = open.frontier.data() + base;
      for (std::int64_t i = 0; i < q0; ++i) {
        dt[i] = F(mamba2_detail::dt_of(data.buffer_dtraw[(b * Q + i) * H + h], dt_bias[h], lo, hi));
        dA[i] = F(MUL(dt[i], F(A[h])));
        dacs[i] = i == 0 ? F(dA[0]) : F(dacs[i - 1] + dA[i]);
        if (i >= 1) {
          for (std::int64_t j = 0; j + 1 < i; ++j) frontier[j] = F(frontier[j] + dA[i]);
          frontier[i - 1] = F(0.0f + dA[i]);
        }
      }
    }
  }
  open.owner = owner;
  open.rows = q0;
  return false;
}

// Per-thread scratch of one head's chunk work.
struct HeadScratch {
  std::vector<float> mm, ydiag, ch, sc;
  void size_for(std::int64_t rows) {
    mm.resize(static_cast<std::size_t>(rows * Q));
    ydiag.resize(static_cast<std::size_t>(rows * P));
    ch.resize(static_cast<std::size_t>(rows * P));
    sc.resize(static_cast<std::size_t>(Q));
  }
};

// h^T of heads [begin, end) into h_t (an exact copy: values move, nothing is computed).
void transpose_heads(const float* h, float* h_t, std::int64_t begin, std::int64_t end) {
  for (std::int64_t task = begin; task < end; ++task)
    transpose::transpose(h + task * P * N, P, N, h_t + task * P * N);
}

// The calling thread's chunk arrays, kept between calls (decode calls reuse them). Per batch row: B rows
// [Q][N], C rows [rows][N], G [rows][real]. The workers reach them through the call's references, never
// through the thread_local.
struct ChunkArrays {
  std::vector<float> bc, cc, g;
};
ChunkArrays& chunk_arrays() {
  thread_local ChunkArrays arrays;
  return arrays;
}

// One call of the fast SSD core (docs/blocks.md §2.3 step 7) as named stages: the open chunk's derived rows,
// dt of the new rows, then per chunk the shared scores G = C B^T and each head's outputs (and the pass
// that seals a completed chunk into h), and last the open-chunk buffer.
class SsdCall {
 public:
  // The block's values the call reads: A = -exp(A_log) [H], dt_bias [H], the dt clamp and the block id.
  struct BlockValues {
    const float* A;
    const float* dt_bias;
    float dt_lo;
    float dt_hi;
    std::uint64_t owner;
  };

  SsdCall(const Mamba2Dims& dims, const BlockValues& block, Mamba2StateData& data, std::int64_t length,
          const float* xbc_new, const float* dtraw_new, std::int64_t dtraw_stride, float* y_ssd)
      : v_(block),
        data_(data),
        open_(data.open),
        B_(data.batch),
        H_(dims.nheads),
        cd_(dims.conv_dim),
        di_(dims.d_inner),
        length_(length),
        q0_(data.buffered_tokens),
        T_(q0_ + length),
        chunks_(std::max<std::int64_t>(1, (T_ + Q - 1) / Q)),
        xbc_new_(xbc_new),
        dtraw_new_(dtraw_new),
        dtraw_stride_(dtraw_stride),
        y_ssd_(y_ssd) {}

  // copies_kept: data.open.h_t and data.open_xd may be current (see Mamba2OpenChunkRows).
  void run(bool copies_kept) {
    open_chunk_stage(copies_kept);
    new_dt_stage();
    for (std::int64_t c = 0; c < chunks_; ++c) {
      const Chunk chunk = chunk_at(c);
      scores_stage(chunk);
      heads_stage(chunk);
    }
    buffer_stage();
  }

 private:
  // Chunk c's working rows [c0, c0 + real); the output rows are [first, real) (earlier rows' outputs
  // belong to earlier calls).
  struct Chunk {
    std::int64_t c0, real, first, rows;
  };
  Chunk chunk_at(std::int64_t c) const {
    const std::int64_t c0 = c * Q;
    const std::int64_t real = std::min(Q, T_ - c0);
    const std::int64_t first = c == 0 ? q0_ : 0;
    return {c0, real, first, real - first};
  }

  // Working row t of batch row b: the buffered rows first, then the new ones.
  const float* row_of(std::int64_t b, std::int64_t t) const {
    return t < q0_ ? data_.buffer_xbc.data() + (b * Q + t) * cd_ : xbc_new_ + (b * length_ + t - q0_) * cd_;
  }

  // The rows derived from the open chunk (dt, dA, dacs, the segment-sum frontier), kept or rebuilt, and
  // the copies a decode row reads: each head's h transposed and its discretized rows Xd.
  void open_chunk_stage(bool copies_kept) {
    const std::int64_t B = B_, H = H_, cd = cd_, q0 = q0_;
    Mamba2StateData& data = data_;
    Mamba2OpenChunkRows& open = open_;
    const bool rows_kept = ensure_open_rows(data, v_.owner, v_.A, v_.dt_bias, v_.dt_lo, v_.dt_hi);
    if (!copies_kept || open.h_t.size() != data.h.size()) {
      open.h_t.resize(data.h.size());
      parallel_for(B * H, [&](std::int64_t begin, std::int64_t end) {
        transpose_heads(data.h.data(), open.h_t.data(), begin, end);
      });
    }
    const std::size_t xd_size = static_cast<std::size_t>(B * H * Q * P);
    if (!copies_kept || !rows_kept || data.open_xd.size() != xd_size) {
      if (data.open_xd.size() != xd_size) data.open_xd.resize_uninitialized(xd_size);
      parallel_for(B * H, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t task = begin; task < end; ++task) {
          const std::int64_t b = task / H, h = task % H;
          for (std::int64_t i = 0; i < q0; ++i)
            ssd::scale(data.buffer_xbc.data() + (b * Q + i) * cd + h * P, open.dt[task * Q + i],
                       data.open_xd.data() + (task * Q + i) * P, P);
        }
      });
    }
  }

  // dt of the new rows, dt_of's steps over the whole array (softplus in SIMD lanes, same bits).
  void new_dt_stage() {
    const std::int64_t H = H_;
    dt_new_.resize(static_cast<std::size_t>(B_ * length_ * H));
    for (std::int64_t t = 0; t < B_ * length_; ++t)
      for (std::int64_t h = 0; h < H; ++h)
        dt_new_[t * H + h] = F(F(dtraw_new_[t * dtraw_stride_ + h]) + F(v_.dt_bias[h]));
    vector_math::softplus(dt_new_.data(), dt_new_.data(), dt_new_.size());
    for (float& v : dt_new_) v = F(primitives::clamp(F(v), v_.dt_lo, v_.dt_hi));
  }

  // G = C B^T (k = 128, one leaf per cell) for the chunk's output rows, shared by every head.
  void scores_stage(const Chunk& k) {
    const std::int64_t real = k.real, first = k.first, rows = k.rows, di = di_;
    bc_.resize(static_cast<std::size_t>(B_ * Q * N));
    cc_.resize(static_cast<std::size_t>(B_ * rows * N));
    g_.resize(static_cast<std::size_t>(B_ * rows * real));
    parallel_for(B_, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        float* bb = bc_.data() + b * Q * N;
        float* cb = cc_.data() + b * rows * N;
        float* gb = g_.data() + b * rows * real;
        for (std::int64_t i = 0; i < real; ++i) {
          const float* row = row_of(b, k.c0 + i);
          std::memcpy(bb + i * N, row + di, N * sizeof(float));
          if (i >= first) std::memcpy(cb + (i - first) * N, row + di + N, N * sizeof(float));
        }
        if (rows <= kFewRows) {
          for (std::int64_t r = 0; r < rows; ++r)
            ssd::row_gemm_nt(cb + r * N, bb, N, first + r + 1, N, gb + r * real);
        } else {
          gemm::gemm_packed({cb, N, 1}, rows, gemm::PackedRhs::from_transposed(bb, real, N), gb);
        }
      }
    });
  }

  // Every (batch row, head) of the chunk on the pool: head_outputs, then the pass of a completed chunk.
  void heads_stage(const Chunk& k) {
    parallel_for(
        B_ * H_,
        [&](std::int64_t begin, std::int64_t end) {
          thread_local HeadScratch scratch;
          HeadScratch& s = scratch;
          s.size_for(k.rows);
          for (std::int64_t task = begin; task < end; ++task) head_outputs(k, task, s);
        },
        grain_for(k.rows * Q * P + Q * P, 65536));
  }

  // One head's output rows of the chunk: its new rows' dt, dA, dacs and Xd, the segment sums, Ydiag and
  // the state read-out, y; and when the chunk is complete, the boundary h moves.
  void head_outputs(const Chunk& k, std::int64_t task, HeadScratch& s) const {
    const std::int64_t H = H_, c0 = k.c0, real = k.real, first = k.first, rows = k.rows;
    const std::int64_t b = task / H, h = task % H;
    const std::int64_t base = task * Q;
    Mamba2OpenChunkRows& open = open_;
    float* dt = open.dt.data() + base;
    float* dA = open.dA.data() + base;
    float* dacs = open.dacs.data() + base;
    float* frontier = open.frontier.data() + base;
    const float Ah = F(v_.A[h]);
    // New rows' dt, dA and running dacs (the earlier rows' are kept).
    for (std::int64_t i = first; i < real; ++i) {
      const float dtv = F(dt_new_[(b * length_ + c0 + i - q0_) * H + h]);
      dt[i] = dtv;
      dA[i] = F(MUL(dtv, Ah));
      dacs[i] = i == 0 ? F(dA[0]) : F(dacs[i - 1] + dA[i]);
    }
    // Xd of the new rows joins the kept rows. The packed GEMMs and a completed chunk's pass read
    // all Q rows, so for them the rows past `real` are set to +0.0.
    const bool few = rows <= kFewRows;
    float* xd = data_.open_xd.data() + task * Q * P;
    for (std::int64_t i = first; i < real; ++i) ssd::scale(row_of(b, c0 + i) + h * P, dt[i], xd + i * P, P);
    if (!few) std::fill(xd + real * P, xd + Q * P, 0.0f);
    // Segment sums and M = G o L for the output rows, extending the kept column frontier.
    const float* gb = g_.data() + b * rows * real;
    for (std::int64_t r = 0; r < rows; ++r)
      ssd::segsum_row(frontier, first + r, dA[first + r], gb + r * real, s.mm.data() + r * Q, Q);
    // Ydiag = M Xd (k = 256) and ch = C h_prev^T (k = 128).
    float* h_prev = data_.h.data() + task * P * N;
    float* h_prev_t = open.h_t.data() + task * P * N;
    const float* cb = cc_.data() + b * rows * N;
    if (few) {
      for (std::int64_t r = 0; r < rows; ++r) {
        ssd::row_gemm_nn_rows(s.mm.data() + r * Q, xd, P, real, P, Q, s.ydiag.data() + r * P);
        ssd::row_gemm_nn(cb + r * N, h_prev_t, P, P, N, s.ch.data() + r * P);
      }
    } else {
      gemm::gemm_packed({s.mm.data(), Q, 1}, rows, gemm::PackedRhs::from_row_major(xd, Q, P), s.ydiag.data());
      gemm::gemm_packed({cb, N, 1}, rows, gemm::PackedRhs::from_transposed(h_prev, P, N), s.ch.data());
    }
    // y = Ydiag + F(MUL(ch, F(expf(dacs)))) for the output rows.
    for (std::int64_t r = 0; r < rows; ++r) s.sc[r] = F(dacs[first + r]);
    vector_math::exp(s.sc.data(), s.sc.data(), static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = first + r;
      const float sc = F(s.sc[r]);
      float* y = y_ssd_ + (b * length_ + c0 + i - q0_) * di_ + h * P;
      for (std::int64_t p = 0; p < P; ++p) y[p] = F(s.ydiag[r * P + p] + F(MUL(F(s.ch[r * P + p]), sc)));
    }
    // A completed chunk moves the boundary: h = F(FMA(F(expf(dl)), h, B_decay^T Xd)).
    if (real == Q) {
      chunk_pass_head(xd, bc_.data() + b * Q * N, N, Q, dacs, h_prev, h_prev);
      transpose_heads(data_.h.data(), open.h_t.data(), task, task + 1);
    }
  }

  // The open chunk after the call: the last T mod 256 working rows (all new once a chunk completed).
  void buffer_stage() {
    const std::int64_t B = B_, H = H_, cd = cd_, T = T_, q0 = q0_, length = length_;
    Mamba2StateData& data = data_;
    const std::int64_t r = T % Q;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t dst0 = T < Q ? q0 : 0;
      const std::int64_t src0 = T < Q ? 0 : T - r - q0;  // index among the new rows
      const std::int64_t count = T < Q ? length : r;
      for (std::int64_t k = 0; k < count; ++k) {
        std::memcpy(data.buffer_xbc.data() + (b * Q + dst0 + k) * cd, xbc_new_ + (b * length + src0 + k) * cd,
                    static_cast<std::size_t>(cd) * sizeof(float));
        for (std::int64_t h = 0; h < H; ++h)
          data.buffer_dtraw[(b * Q + dst0 + k) * H + h] =
              dtraw_new_[(b * length + src0 + k) * dtraw_stride_ + h];
      }
      std::memcpy(open_.dtraw.data() + b * Q * H, data.buffer_dtraw.data() + b * Q * H,
                  static_cast<std::size_t>(r * H) * sizeof(float));
    }
    open_.rows = r;
    data.buffered_tokens = r;
  }

  const BlockValues v_;
  Mamba2StateData& data_;
  Mamba2OpenChunkRows& open_;
  const std::int64_t B_, H_, cd_, di_, length_;
  const std::int64_t q0_;      // buffered rows before the call
  const std::int64_t T_;       // working rows: q0 + length
  const std::int64_t chunks_;  // working chunks, at least one
  const float* xbc_new_;
  const float* dtraw_new_;
  const std::int64_t dtraw_stride_;
  float* y_ssd_;
  std::vector<float> dt_new_;  // [B * length][H]
  ChunkArrays& arrays_ = chunk_arrays();
  std::vector<float>&bc_ = arrays_.bc, &cc_ = arrays_.cc, &g_ = arrays_.g;
};

}  // namespace

void Mamba2Block::ssd_fast(Mamba2StateData& data, bool copies_kept, std::int64_t length, const float* xbc_new,
                           const float* dtraw_new, std::int64_t dtraw_stride, float* y_ssd) const {
  const SsdCall::BlockValues values{A_.data(), weights_[kM2DtBias].data(), dt_lo_, dt_hi_, id_};
  SsdCall(dims_, values, data, length, xbc_new, dtraw_new, dtraw_stride, y_ssd).run(copies_kept);
}

std::shared_ptr<Mamba2Report> Mamba2Block::forward(const float* x, std::int64_t batch, std::int64_t length,
                                                   Mamba2State& state, float* y, const std::string& entry,
                                                   const Mamba2Report* superseded) const {
  const std::int64_t M = batch * length;
  refuse_inputs(x, M * dims_.d_model, state, entry);
  CallRows rows(dims_, M);
  project_in(x, M, rows);
  std::shared_ptr<Mamba2Report> report =
      advance(rows.proj.data(), batch, length, state, rows.gated.data(), superseded);
  project_out(x, M, rows, y);
  return report;
}

void Mamba2Block::step_many(const float* x, std::int64_t count, Mamba2State* const* states, float* y,
                            const std::string& entry, bool states_checked) const {
  const std::int64_t dm = dims_.d_model;
  for (std::int64_t i = 0; i < count; ++i) {
    if (states_checked)
      refuse_rows(x + i * dm, dm, entry);
    else
      refuse_inputs(x + i * dm, dm, *states[i], entry);
  }
  CallRows rows(dims_, count);
  project_in(x, count, rows);
  // The sequences side by side on the pool (each one's own parallel regions then run serially).
  parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      advance(rows.proj.data() + i * dims_.d_in_proj, 1, 1, *states[i], rows.gated.data() + i * dims_.d_inner,
              nullptr);
  });
  project_out(x, count, rows, y);
}

Mamba2Block::CallRows::CallRows(const Mamba2Dims& dims, std::int64_t rows)
    : normed(static_cast<std::size_t>(rows * dims.d_model)),
      proj(static_cast<std::size_t>(rows * dims.d_in_proj)),
      gated(static_cast<std::size_t>(rows * dims.d_inner)),
      out(static_cast<std::size_t>(rows * dims.d_model)) {}

void Mamba2Block::project_in(const float* x, std::int64_t rows, CallRows& call) const {
  ssm_project_in(x, rows, dims_.d_model, weights_[kM2BlockNorm].data(), kNormEps, in_proj_,
                 call.normed.data(), call.proj.data());
}

void Mamba2Block::project_out(const float* x, std::int64_t rows, CallRows& call, float* y) const {
  ssm_project_out(call.gated.data(), rows, dims_.d_inner, dims_.d_model, out_proj_, x, call.out.data(), y);
}

std::shared_ptr<Mamba2Report> Mamba2Block::advance(const float* proj, std::int64_t batch, std::int64_t length,
                                                   Mamba2State& state, float* gated,
                                                   const Mamba2Report* superseded) const {
  const std::int64_t di = dims_.d_inner, cd = dims_.conv_dim, dip = dims_.d_in_proj;
  const std::int64_t H = dims_.nheads;
  const std::int64_t M = batch * length;
  state.settle_pending_report(superseded);
  Mamba2StateData& data = Mamba2State::EngineAccess(state).data();
  // Every array is finite here (trusted, or just scanned); the call's own writes are checked at its end,
  // and until then (an exception mid-call included) the state is not trusted.
  const bool copies_kept = state.trusted() && data.open.kept_generation == data.generation;
  TrustScope<Mamba2State> trust(state, length);

  std::vector<float> xbc(static_cast<std::size_t>(M * cd));
  conv_.run(proj + di, dip, batch, length, data.conv_window.data(), xbc.data());

  // The SSD output y, then the gate, then the norm.
  ssd_fast(data, copies_kept, length, xbc.data(), proj + di + cd, dip, gated);

  // skip = F(y + F(MUL(F(x), F(D[h])))); g = F(MUL(F(skip), F(silu(F(z))))).
  const float* D = weights_[kM2D].data();
  parallel_for(
      M,
      [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> gate(static_cast<std::size_t>(di));
        for (std::int64_t t = begin; t < end; ++t) {
          vector_math::flush(proj + t * dip, gate.data(), static_cast<std::size_t>(di));
          vector_math::silu(gate.data(), gate.data(), static_cast<std::size_t>(di));
          float* row = gated + t * di;
          const float* xrow = xbc.data() + t * cd;
          for (std::int64_t h = 0; h < H; ++h) {
            const float Dh = F(D[h]);
            for (std::int64_t p = 0; p < P; ++p) {
              const std::int64_t j = h * P + p;
              const float skip = F(row[j] + F(MUL(F(xrow[j]), Dh)));
              row[j] = F(MUL(F(skip), F(gate[j])));
            }
          }
        }
      },
      grain_for(di));
  rmsnorm::rmsnorm(gated, weights_[kM2GatedNorm].data(), gated, M, di, kNormEps);

  trust.commit();
  ++data.generation;
  data.open.kept_generation = data.generation;  // ssd_fast kept h_t and xd equal to what they copy
  auto report = std::make_shared<Mamba2Report>(Mamba2State::EngineAccess(state).shared(), A_,
                                               weights_[kM2DtBias], dt_lo_, dt_hi_);
  data.pending_report = report;
  return report;
}

}  // namespace samebits::blocks
