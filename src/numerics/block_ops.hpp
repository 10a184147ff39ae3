// The arithmetic the transformer block's options add (docs/models.md §6, §7, §9, §10): the Cephes erff and
// the two GELU forms, the plain bias add after a finished product, the attention softcap and LayerNorm.
// Each has a literal scalar twin (*_reference) and a dispatched fast path with the same bits on every SIMD
// target.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numerics/checked_literal.hpp"

namespace samebits::block_ops {

// The literals of docs/models.md §12, each rounded once to float32 and checked on its bits.
namespace lit {
SAMEBITS_FLOAT_LITERAL(kTwoPi, 6.283185307179586f, 0x40C90FDBu);
SAMEBITS_FLOAT_LITERAL(kSqrt2, 1.4142135623730951f, 0x3FB504F3u);
SAMEBITS_FLOAT_LITERAL(kSqrt2OverPi, 0.7978845608028654f, 0x3F4C422Au);
SAMEBITS_FLOAT_LITERAL(kGeluCubic, 0.044715f, 0x3D372713u);
SAMEBITS_FLOAT_LITERAL(kErfcUnderflow, -88.72284f, 0xC2B17218u);
SAMEBITS_FLOAT_LITERAL(kErfT0, 7.853861353153693e-5f, 0x38A4B519u);
SAMEBITS_FLOAT_LITERAL(kErfT1, -8.010193625184903e-4f, 0xBA51FB80u);
SAMEBITS_FLOAT_LITERAL(kErfT2, 5.188327685732524e-3f, 0x3BAA02D9u);
SAMEBITS_FLOAT_LITERAL(kErfT3, -2.685381193529856e-2f, 0xBCDBFC87u);
SAMEBITS_FLOAT_LITERAL(kErfT4, 1.128358514861418e-1f, 0x3DE7167Cu);
SAMEBITS_FLOAT_LITERAL(kErfT5, -3.761262582423300e-1f, 0xBEC0939Fu);
SAMEBITS_FLOAT_LITERAL(kErfT6, 1.128379165726710f, 0x3F906EBAu);
SAMEBITS_FLOAT_LITERAL(kErfcP0, 2.326819970068386e-2f, 0x3CBE9CF4u);
SAMEBITS_FLOAT_LITERAL(kErfcP1, -1.387039388740657e-1f, 0xBE0E0868u);
SAMEBITS_FLOAT_LITERAL(kErfcP2, 3.687424674597105e-1f, 0x3EBCCBD0u);
SAMEBITS_FLOAT_LITERAL(kErfcP3, -5.824733027278666e-1f, 0xBF151CF8u);
SAMEBITS_FLOAT_LITERAL(kErfcP4, 6.210004621745983e-1f, 0x3F1EF9E3u);
SAMEBITS_FLOAT_LITERAL(kErfcP5, -4.944515323274145e-1f, 0xBEFD28C0u);
SAMEBITS_FLOAT_LITERAL(kErfcP6, 3.404879937665872e-1f, 0x3EAE5471u);
SAMEBITS_FLOAT_LITERAL(kErfcP7, -2.741127028184656e-1f, 0xBE8C5880u);
SAMEBITS_FLOAT_LITERAL(kErfcP8, 5.638259427386472e-1f, 0x3F1056E6u);
SAMEBITS_FLOAT_LITERAL(kErfcR0, -10.47766399936249f, 0xC127A483u);
SAMEBITS_FLOAT_LITERAL(kErfcR1, 12.97719955372516f, 0x414FA29Cu);
SAMEBITS_FLOAT_LITERAL(kErfcR2, -7.495518717768503f, 0xC0EFDB4Au);
SAMEBITS_FLOAT_LITERAL(kErfcR3, 2.921019019210786f, 0x403AF1FAu);
SAMEBITS_FLOAT_LITERAL(kErfcR4, -1.015265279202700f, 0xBF81F436u);
SAMEBITS_FLOAT_LITERAL(kErfcR5, 4.218463358204948e-1f, 0x3ED7FC3Eu);
SAMEBITS_FLOAT_LITERAL(kErfcR6, -2.820767439740514e-1f, 0xBE906C5Du);
SAMEBITS_FLOAT_LITERAL(kErfcR7, 5.641895067754075e-1f, 0x3F106EB9u);
}  // namespace lit

// Scalar primitives, step by step (docs/models.md §10), compiled once in a baseline TU like primitives::.
float erff(float x) noexcept;       // Cephes ndtrf: a polynomial for |x| <= 1, 1 - erfc beyond
float erfc_ge1(float a) noexcept;   // erfc for |a| >= 1 (used by erff)
float gelu_erf(float x) noexcept;   // F((F(x) * 0.5) * (1 + erff(DIV(x, sqrt 2))))
float gelu_tanh(float x) noexcept;  // the tanh form with 0.044715 and sqrt(2/pi)

// y[i] = gelu_erf(x[i]) / gelu_tanh(x[i]) for i < n; y may equal x.
void gelu_erf_reference(const float* x, float* y, std::size_t n);
void gelu_erf(const float* x, float* y, std::size_t n);
void gelu_tanh_reference(const float* x, float* y, std::size_t n);
void gelu_tanh(const float* x, float* y, std::size_t n);

// y[j] = F(F(y[j]) + F(b[j])) for j < n: a bias added to a finished product (docs/models.md §7).
void bias_add_reference(float* y, const float* b, std::size_t n);
void bias_add(float* y, const float* b, std::size_t n);

// The residual add of a block's tail (docs/blocks.md §4.3): out[j] = F(F(residual[j]) + F(x[j])) for j < n;
// out may alias either input.
void residual_add_reference(const float* residual, const float* x, float* out, std::size_t n);
void residual_add(const float* residual, const float* x, float* out, std::size_t n);

// The gated MLP's product (docs/models.md §10): out[j] = F(MUL(F(gate[j]), F(up[j]))) for j < n; out may
// alias either input.
void gated_product_reference(const float* gate, const float* up, float* out, std::size_t n);
void gated_product(const float* gate, const float* up, float* out, std::size_t n);

// SwiGLU's hidden values in one pass (docs/models.md §10): out[j] = F(MUL(F(silu(F(gate[j]))), F(up[j]))),
// the activation's flushes and the gated product of the three separate passes; out may alias either input.
void swiglu_reference(const float* gate, const float* up, float* out, std::size_t n);
void swiglu(const float* gate, const float* up, float* out, std::size_t n);

// The attention softcap on scaled scores (docs/models.md §9): s[j] = F(MUL(F(tanhf(F(DIV(s[j], cap)))), cap))
// with cap = F(cap) > 0, finite.
void softcap_reference(float* s, std::size_t n, float cap);
void softcap(float* s, std::size_t n, float cap);

// LayerNorm over rows of width d (docs/models.md §6): two serial passes from +0.0 (plain adds for the mean,
// FMAs for the biased variance), rstd = F(rsqrtf(F(var + eps))), y_j = F(MUL(F(w_j), F(MUL(dev_j, rstd))))
// and, with a bias (b not null), y_j = F(F(y_j) + F(b_j)). y may alias x.
void layernorm_reference(const float* x, const float* w, const float* b, float* y, std::int64_t rows,
                         std::int64_t d, float eps);
// The same bits: SIMD lanes run rows side by side (each its own serial chains); rows split over threads.
void layernorm(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t d,
               float eps);

namespace detail {
using ArrayFn = void (*)(const float* x, float* y, std::size_t n);
using BiasFn = void (*)(float* y, const float* b, std::size_t n);
using SoftcapFn = void (*)(float* s, std::size_t n, float cap);
using BinaryFn = void (*)(const float* a, const float* b, float* out, std::size_t n);
// `lanes` rows of width d, stride d, side by side.
using LayernormBlockFn = void (*)(const float* x, const float* w, const float* b, float* y, std::int64_t d,
                                  float eps);
struct Kernels {
  ArrayFn gelu_erf;
  ArrayFn gelu_tanh;
  BiasFn bias_add;
  SoftcapFn softcap;
  int layernorm_lanes;
  LayernormBlockFn layernorm_block;
  BinaryFn residual_add;
  BinaryFn gated_product;
  BinaryFn swiglu;
};
// One row of LayerNorm, the scalar steps (the twin, and the fast path's tail rows).
void layernorm_row(const float* x, const float* w, const float* b, float* y, std::int64_t d, float eps);
// The per-row tail shared with the SIMD block: var -> rstd.
float layernorm_rstd(float sum_of_squared_deviations, std::int64_t d, float eps);
}  // namespace detail

}  // namespace samebits::block_ops
