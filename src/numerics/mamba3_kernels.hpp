// Array kernels of the Mamba-3 block (docs/blocks.md §3.3): each is dispatched to the active SIMD target and
// has a scalar `_reference` twin that is its definition; the two agree bit for bit on every input.
#pragma once

#include <cstdint>

namespace samebits::mamba3_kernels {

// out[r] = the GEMM profile's single-leaf cell for r < rows: acc = +0.0; for p < len ascending:
// acc = F(FMA(F(a_r[p]), F(b_r[p]), acc)); out[r] = F(acc), with a_r = a + r * a_stride (a_stride may be
// 0: one shared vector) and b_r = b + r * b_stride. len <= 128, so the cell is one leaf
// (docs/numerics.md §3.2).
void dot_chains(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                std::int64_t rows, std::int64_t len, float* out);
void dot_chains_reference(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                          std::int64_t rows, std::int64_t len, float* out);

// The same cells with a shared left operand a and each right row scaled first: b_r[p] is replaced by
// F(MUL(F(b_r[p]), b_scale[r])) (docs/blocks.md §3.3 steps 11 and 16: S = q . (k * scale) without storing k *
// scale).
void scaled_dot_chains(const float* a, const float* b, std::int64_t b_stride, const float* b_scale,
                       std::int64_t rows, std::int64_t len, float* out);
void scaled_dot_chains_reference(const float* a, const float* b, std::int64_t b_stride, const float* b_scale,
                                 std::int64_t rows, std::int64_t len, float* out);
// The same cells with the right rows stored transposed: b_r[p] = b_t[p * b_t_stride + r] (a decode row's
// keys kept as columns, so that a vector of rows is one load per step).
void scaled_dot_chains_transposed(const float* a, const float* b_t, std::int64_t b_t_stride,
                                  const float* b_scale, std::int64_t rows, std::int64_t len, float* out);
void scaled_dot_chains_transposed_reference(const float* a, const float* b_t, std::int64_t b_t_stride,
                                            const float* b_scale, std::int64_t rows, std::int64_t len,
                                            float* out);

// out[c] = the GEMM profile's single-leaf cell for c < n with a broadcast left operand: acc = +0.0; for
// p < k ascending: acc = F(FMA(F(x[p * x_stride]), F(rows[p][c]), acc)); out[c] = F(acc). rows[p] points at
// row p of the right operand (any layout, e.g. buffered and new rows mixed, or a shared zero row for
// padding). k <= 128 (one leaf). This is row i of GEMM_NN(X, B) (x_stride 1) or of GEMM_TN(X, B) (x_stride =
// the row length of X) with B_eff[p, c] = rows[p][c].
void axpy_chains(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                 std::int64_t n, float* out);
void axpy_chains_reference(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                           std::int64_t n, float* out);
// axpy_chains with x_stride 1 when x[p] may be +0.0 for every p >= nonzero (a masked row with the GEMM's
// padding): the same cells, running only the first `nonzero` steps of each chain when the rest is provably
// inert (every later x exactly +0.0 and every later row value finite), all k steps otherwise.
void axpy_chains_zero_tail(const float* x, const float* const* rows, std::int64_t nonzero, std::int64_t k,
                           std::int64_t n, float* out);

// The Mamba-3 angle recurrence (docs/blocks.md §3.3 step 8) for `lanes` independent angles over `steps`
// tokens: run[r] <- F(FMA(-2pi, floor(DIV(v, 2pi)), v)) with v = F(run[r] + F(MUL(rate_s[r], F(dt_s)))),
// where rate_s = rates + s * rate_stride and dt_s = dt[s * dt_stride]; after step s, out[s * out_stride + r]
// = run[r]. run[] holds the flushed starting angles on entry and the final ones on exit.
void angle_scan(float* run, std::int64_t lanes, const float* rates, std::int64_t rate_stride, const float* dt,
                std::int64_t dt_stride, std::int64_t steps, float* out, std::int64_t out_stride);
void angle_scan_reference(float* run, std::int64_t lanes, const float* rates, std::int64_t rate_stride,
                          const float* dt, std::int64_t dt_stride, std::int64_t steps, float* out,
                          std::int64_t out_stride);

// dst[i] = F(MUL(F(src[i]), scale)), i < n: the scaled k rows (step 11) and the decayed v rows (step 15).
void scaled_copy(const float* src, float scale, float* dst, std::int64_t n);
void scaled_copy_reference(const float* src, float scale, float* dst, std::int64_t n);

// Step 16's tail for one row of one head, i < n: ys = F(MUL(F(y_state[i]), e)); y0 = F(ys + y_intra[i]);
// skip = F(y0 + F(MUL(tv, F(v[i])))); gate[i] = F(MUL(F(skip), F(silu_z[i]))).
void gate_row(const float* y_state, const float* y_intra, float e, float tv, const float* v,
              const float* silu_z, float* gate, std::int64_t n);
void gate_row_reference(const float* y_state, const float* y_intra, float e, float tv, const float* v,
                        const float* silu_z, float* gate, std::int64_t n);

// Steps 9's bias and rotation for one (token, head) row of width n (even), the first 2 * pairs entries
// rotated: biased[i] = F(F(normed[i]) + F(bias[i])); for j < pairs, with c = F(cosines[j]), s = F(sines[j]),
// v0 = biased[2j], v1 = biased[2j + 1]: rotated[2j] = F(F(MUL(v0, c)) - F(MUL(v1, s))),
// rotated[2j + 1] = F(F(MUL(v0, s)) + F(MUL(v1, c))); rotated[i] = biased[i] for i >= 2 * pairs.
void bias_rotate(const float* normed, const float* bias, const float* cosines, const float* sines,
                 std::int64_t pairs, std::int64_t n, float* biased, float* rotated);
void bias_rotate_reference(const float* normed, const float* bias, const float* cosines, const float* sines,
                           std::int64_t pairs, std::int64_t n, float* biased, float* rotated);

// The inter-chunk state update (docs/blocks.md §3.3 step 15): h[i] = F(FMA(decay, F(h[i]), F(inc[i]))), i <
// n.
void decay_accumulate(float* h, float decay, const float* inc, std::int64_t n);
void decay_accumulate_reference(float* h, float decay, const float* inc, std::int64_t n);

namespace detail {

// A target's kernel table behind the dispatch (the SIMD ones: numerics/simd_kernels.hpp).
struct Kernels {
  void (*dot_chains)(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                     std::int64_t rows, std::int64_t len, float* out);
  void (*scaled_dot_chains)(const float* a, const float* b, std::int64_t b_stride, const float* b_scale,
                            std::int64_t rows, std::int64_t len, float* out);
  void (*scaled_dot_chains_transposed)(const float* a, const float* b_t, std::int64_t b_t_stride,
                                       const float* b_scale, std::int64_t rows, std::int64_t len, float* out);
  void (*axpy_chains)(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                      std::int64_t n, float* out);
  void (*angle_scan)(float* run, std::int64_t lanes, const float* rates, std::int64_t rate_stride,
                     const float* dt, std::int64_t dt_stride, std::int64_t steps, float* out,
                     std::int64_t out_stride);
  void (*scaled_copy)(const float* src, float scale, float* dst, std::int64_t n);
  void (*gate_row)(const float* y_state, const float* y_intra, float e, float tv, const float* v,
                   const float* silu_z, float* gate, std::int64_t n);
  void (*bias_rotate)(const float* normed, const float* bias, const float* cosines, const float* sines,
                      std::int64_t pairs, std::int64_t n, float* biased, float* rotated);
  void (*decay_accumulate)(float* h, float decay, const float* inc, std::int64_t n);
};

const Kernels& scalar_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

}  // namespace detail

}  // namespace samebits::mamba3_kernels
