// Scalar definitions of the Mamba-3 array kernels and their dispatch to the active SIMD target.
#include "numerics/mamba3_kernels.hpp"

#include <bit>

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::mamba3_kernels {

using fp::F;

namespace {

constexpr float kTwoPi = std::bit_cast<float>(0x40C90FDBu);

const detail::Kernels& active() { return *simd::kernels().mamba3; }

#include "numerics/mamba3_bias_rotate_impl.hpp"

}  // namespace

void dot_chains_reference(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                          std::int64_t rows, std::int64_t len, float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * a_stride;
    const float* br = b + r * b_stride;
    float acc = 0.0f;
    for (std::int64_t p = 0; p < len; ++p) acc = F(fp::FMA(F(ar[p]), F(br[p]), acc));
    out[r] = F(acc);
  }
}

void scaled_dot_chains_reference(const float* a, const float* b, std::int64_t b_stride, const float* b_scale,
                                 std::int64_t rows, std::int64_t len, float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* br = b + r * b_stride;
    float acc = 0.0f;
    for (std::int64_t p = 0; p < len; ++p) acc = F(fp::FMA(F(a[p]), F(fp::MUL(F(br[p]), b_scale[r])), acc));
    out[r] = F(acc);
  }
}

void scaled_dot_chains_transposed_reference(const float* a, const float* b_t, std::int64_t b_t_stride,
                                            const float* b_scale, std::int64_t rows, std::int64_t len,
                                            float* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (std::int64_t p = 0; p < len; ++p)
      acc = F(fp::FMA(F(a[p]), F(fp::MUL(F(b_t[p * b_t_stride + r]), b_scale[r])), acc));
    out[r] = F(acc);
  }
}

void axpy_chains_reference(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                           std::int64_t n, float* out) {
  for (std::int64_t c = 0; c < n; ++c) {
    float acc = 0.0f;
    for (std::int64_t p = 0; p < k; ++p) acc = F(fp::FMA(F(x[p * x_stride]), F(rows[p][c]), acc));
    out[c] = F(acc);
  }
}

void angle_scan_reference(float* run, std::int64_t lanes, const float* rates, std::int64_t rate_stride,
                          const float* dt, std::int64_t dt_stride, std::int64_t steps, float* out,
                          std::int64_t out_stride) {
  for (std::int64_t s = 0; s < steps; ++s) {
    const float dts = F(dt[s * dt_stride]);
    for (std::int64_t r = 0; r < lanes; ++r) {
      const float inc = F(fp::MUL(rates[s * rate_stride + r], dts));
      const float v = F(run[r] + inc);
      run[r] = F(fp::FMA(-kTwoPi, primitives::detail::floor(fp::DIV(v, kTwoPi)), v));
      out[s * out_stride + r] = run[r];
    }
  }
}

void scaled_copy_reference(const float* src, float scale, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = F(fp::MUL(F(src[i]), scale));
}

void gate_row_reference(const float* y_state, const float* y_intra, float e, float tv, const float* v,
                        const float* silu_z, float* gate, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float ys = F(fp::MUL(F(y_state[i]), e));
    const float y0 = F(ys + y_intra[i]);
    const float skip = F(y0 + F(fp::MUL(tv, F(v[i]))));
    gate[i] = F(fp::MUL(F(skip), F(silu_z[i])));
  }
}

void bias_rotate_reference(const float* normed, const float* bias, const float* cosines, const float* sines,
                           std::int64_t pairs, std::int64_t n, float* biased, float* rotated) {
  bias_rotate_loops(normed, bias, cosines, sines, pairs, n, biased, rotated);
}

void decay_accumulate_reference(float* h, float decay, const float* inc, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) h[i] = F(fp::FMA(decay, F(h[i]), F(inc[i])));
}

namespace detail {

const Kernels& scalar_kernels() {
  static const Kernels kernels{
      &dot_chains_reference,  &scaled_dot_chains_reference, &scaled_dot_chains_transposed_reference,
      &axpy_chains_reference, &angle_scan_reference,        &scaled_copy_reference,
      &gate_row_reference,    &bias_rotate_reference,       &decay_accumulate_reference};
  return kernels;
}

}  // namespace detail

void dot_chains(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                std::int64_t rows, std::int64_t len, float* out) {
  active().dot_chains(a, a_stride, b, b_stride, rows, len, out);
}

void scaled_dot_chains(const float* a, const float* b, std::int64_t b_stride, const float* b_scale,
                       std::int64_t rows, std::int64_t len, float* out) {
  active().scaled_dot_chains(a, b, b_stride, b_scale, rows, len, out);
}

void scaled_dot_chains_transposed(const float* a, const float* b_t, std::int64_t b_t_stride,
                                  const float* b_scale, std::int64_t rows, std::int64_t len, float* out) {
  active().scaled_dot_chains_transposed(a, b_t, b_t_stride, b_scale, rows, len, out);
}

void axpy_chains(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                 std::int64_t n, float* out) {
  active().axpy_chains(x, x_stride, rows, k, n, out);
}

void axpy_chains_zero_tail(const float* x, const float* const* rows, std::int64_t nonzero, std::int64_t k,
                           std::int64_t n, float* out) {
  // Each skipped step adds F(+0.0) * v = +-0.0 (v's sign) to its chain: a nonzero chain (or a NaN or an
  // infinity) stays as it is, and a -0.0 chain turns +0.0 when some skipped v has a clear sign bit.
  bool inert = nonzero >= 0 && nonzero <= k;
  for (std::int64_t p = nonzero; inert && p < k; ++p) inert = fp::bits(x[p]) == 0;
  for (std::int64_t p = nonzero; inert && p < k; ++p) {
    if (p > nonzero && rows[p] == rows[p - 1]) continue;  // a shared padding row is checked once
    for (std::int64_t c = 0; inert && c < n; ++c) inert = (fp::bits(rows[p][c]) & 0x7F800000u) != 0x7F800000u;
  }
  if (!inert) {
    axpy_chains(x, 1, rows, k, n, out);
    return;
  }
  axpy_chains(x, 1, rows, nonzero, n, out);
  for (std::int64_t c = 0; c < n; ++c) {
    if (fp::bits(out[c]) != fp::kSignMask) continue;
    for (std::int64_t p = nonzero; p < k; ++p)
      if ((fp::bits(rows[p][c]) & fp::kSignMask) == 0) {
        out[c] = 0.0f;
        break;
      }
  }
}

void angle_scan(float* run, std::int64_t lanes, const float* rates, std::int64_t rate_stride, const float* dt,
                std::int64_t dt_stride, std::int64_t steps, float* out, std::int64_t out_stride) {
  active().angle_scan(run, lanes, rates, rate_stride, dt, dt_stride, steps, out, out_stride);
}

void scaled_copy(const float* src, float scale, float* dst, std::int64_t n) {
  active().scaled_copy(src, scale, dst, n);
}

void gate_row(const float* y_state, const float* y_intra, float e, float tv, const float* v,
              const float* silu_z, float* gate, std::int64_t n) {
  active().gate_row(y_state, y_intra, e, tv, v, silu_z, gate, n);
}

void bias_rotate(const float* normed, const float* bias, const float* cosines, const float* sines,
                 std::int64_t pairs, std::int64_t n, float* biased, float* rotated) {
  active().bias_rotate(normed, bias, cosines, sines, pairs, n, biased, rotated);
}

void decay_accumulate(float* h, float decay, const float* inc, std::int64_t n) {
  active().decay_accumulate(h, decay, inc, n);
}

}  // namespace samebits::mamba3_kernels
