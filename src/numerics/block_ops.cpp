// The transformer options' arithmetic: scalar primitives and twins, written step by step from
// docs/models.md §6, §7, §9 and §10, and the dispatch of their fast paths.
#include "numerics/block_ops.hpp"

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::block_ops {

using fp::DIV;
using fp::F;
using fp::FMA;
using fp::MUL;

namespace {
float abs_value(float x) { return fp::from_bits(fp::bits(x) & fp::kAbsMask); }
}  // namespace

float erfc_ge1(float a) noexcept {
  const float x = abs_value(a);
  const float z = -(x * x);  // a plain product, then an exact negation
  if (z < lit::kErfcUnderflow) return a < 0.0f ? 2.0f : 0.0f;
  const float ez = primitives::expf(z);
  const float q = DIV(1.0f, x);
  const float y = q * q;
  float p;
  if (x < 2.0f) {
    p = lit::kErfcP0;
    for (float c : {lit::kErfcP1, lit::kErfcP2, lit::kErfcP3, lit::kErfcP4, lit::kErfcP5, lit::kErfcP6,
                    lit::kErfcP7, lit::kErfcP8})
      p = FMA(p, y, c);
  } else {
    p = lit::kErfcR0;
    for (float c :
         {lit::kErfcR1, lit::kErfcR2, lit::kErfcR3, lit::kErfcR4, lit::kErfcR5, lit::kErfcR6, lit::kErfcR7})
      p = FMA(p, y, c);
  }
  const float t = F(ez * q);
  float r = F(t * p);
  if (a < 0.0f) r = 2.0f - r;
  return r;
}

float erff(float x_in) noexcept {
  const float x = F(x_in);
  if (fp::is_nan(x)) return x;
  if (abs_value(x) > 1.0f) return 1.0f - erfc_ge1(x);
  const float z = x * x;
  float p = lit::kErfT0;
  for (float c : {lit::kErfT1, lit::kErfT2, lit::kErfT3, lit::kErfT4, lit::kErfT5, lit::kErfT6})
    p = FMA(p, z, c);
  return MUL(x, p);
}

float gelu_erf(float x_in) noexcept {
  const float x = F(x_in);
  if (fp::is_nan(x)) return x;
  const float e = erff(DIV(x, lit::kSqrt2));
  const float s = 1.0f + e;
  const float h = F(x * 0.5f);
  return F(h * s);
}

float gelu_tanh(float x_in) noexcept {
  const float x = F(x_in);
  if (fp::is_nan(x)) return x;
  const float x2 = F(x * x);
  const float x3 = F(x2 * x);
  const float cx = F(lit::kGeluCubic * x3);
  const float inner = F(x + cx);
  const float arg = F(lit::kSqrt2OverPi * inner);
  const float t = primitives::tanhf(arg);
  const float s = 1.0f + t;
  const float h = F(x * 0.5f);
  return F(h * s);
}

void gelu_erf_reference(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = gelu_erf(x[i]);
}
void gelu_tanh_reference(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = gelu_tanh(x[i]);
}
void bias_add_reference(float* y, const float* b, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) y[j] = F(F(y[j]) + F(b[j]));
}
void residual_add_reference(const float* residual, const float* x, float* out, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) out[j] = F(F(residual[j]) + F(x[j]));
}
void gated_product_reference(const float* gate, const float* up, float* out, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) out[j] = F(MUL(F(gate[j]), F(up[j])));
}
void swiglu_reference(const float* gate, const float* up, float* out, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) out[j] = F(MUL(F(primitives::silu(F(gate[j]))), F(up[j])));
}
void softcap_reference(float* s, std::size_t n, float cap) {
  const float c = F(cap);
  for (std::size_t j = 0; j < n; ++j) {
    const float th = F(primitives::tanhf(F(DIV(s[j], c))));
    s[j] = F(MUL(th, c));
  }
}

namespace detail {

float layernorm_rstd(float sum_of_squared_deviations, std::int64_t d, float eps) {
  const float var = F(DIV(sum_of_squared_deviations, static_cast<float>(d)));
  return F(primitives::rsqrtf(F(var + eps)));
}

void layernorm_row(const float* x, const float* w, const float* b, float* y, std::int64_t d, float eps) {
  float acc = 0.0f;
  for (std::int64_t j = 0; j < d; ++j) acc = F(F(acc) + F(x[j]));
  const float mean = F(DIV(acc, static_cast<float>(d)));
  float acc2 = 0.0f;
  for (std::int64_t j = 0; j < d; ++j) {
    const float dev = F(F(x[j]) - mean);
    acc2 = F(FMA(dev, dev, acc2));
  }
  const float rstd = layernorm_rstd(acc2, d, eps);
  for (std::int64_t j = 0; j < d; ++j) {
    const float dev = F(F(x[j]) - mean);
    float out = F(MUL(F(w[j]), F(MUL(dev, rstd))));
    if (b != nullptr) out = F(F(out) + F(b[j]));
    y[j] = out;
  }
}

}  // namespace detail

void layernorm_reference(const float* x, const float* w, const float* b, float* y, std::int64_t rows,
                         std::int64_t d, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) detail::layernorm_row(x + r * d, w, b, y + r * d, d, eps);
}

namespace {
const detail::Kernels* active() { return simd::kernels().block_ops; }
}  // namespace

void gelu_erf(const float* x, float* y, std::size_t n) {
  const detail::Kernels* k = active();
  if (k != nullptr) return k->gelu_erf(x, y, n);
  gelu_erf_reference(x, y, n);
}

void gelu_tanh(const float* x, float* y, std::size_t n) {
  const detail::Kernels* k = active();
  if (k != nullptr) return k->gelu_tanh(x, y, n);
  gelu_tanh_reference(x, y, n);
}

void bias_add(float* y, const float* b, std::size_t n) {
  const detail::Kernels* k = active();
  if (k != nullptr) return k->bias_add(y, b, n);
  bias_add_reference(y, b, n);
}

void residual_add(const float* residual, const float* x, float* out, std::size_t n) {
  const detail::Kernels* k = active();
  if (k != nullptr) return k->residual_add(residual, x, out, n);
  residual_add_reference(residual, x, out, n);
}

void gated_product(const float* gate, const float* up, float* out, std::size_t n) {
  const detail::Kernels* k = active();
  if (k != nullptr) return k->gated_product(gate, up, out, n);
  gated_product_reference(gate, up, out, n);
}

void swiglu(const float* gate, const float* up, float* out, std::size_t n) {
  const detail::Kernels* k = active();
  if (k != nullptr) return k->swiglu(gate, up, out, n);
  swiglu_reference(gate, up, out, n);
}

void softcap(float* s, std::size_t n, float cap) {
  const detail::Kernels* k = active();
  if (k != nullptr) return k->softcap(s, n, cap);
  softcap_reference(s, n, cap);
}

void layernorm(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t d,
               float eps) {
  const detail::Kernels* k = active();
  const std::int64_t lanes = k != nullptr ? k->layernorm_lanes : 1;
  const std::int64_t blocks = (rows + lanes - 1) / lanes;
  parallel_for(blocks, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t blk = begin; blk < end; ++blk) {
      const std::int64_t row0 = blk * lanes;
      const std::int64_t count = rows - row0 < lanes ? rows - row0 : lanes;
      // Lane offsets are int32 (row * d), so very wide rows take the row path.
      if (k != nullptr && count == lanes && d <= (std::int64_t{1} << 26)) {
        k->layernorm_block(x + row0 * d, w, b, y + row0 * d, d, eps);
      } else {
        for (std::int64_t r = row0; r < row0 + count; ++r)
          detail::layernorm_row(x + r * d, w, b, y + r * d, d, eps);
      }
    }
  });
}

}  // namespace samebits::block_ops
