// Elementwise array versions of the exact primitives, dispatched to scalar / AVX2 / AVX-512 code.
#pragma once

#include <cstddef>

namespace samebits::vector_math {

// y[i] = primitives::<fn>(x[i]) for i < n, bit for bit on every SIMD target (NaN payloads, +-0,
// subnormals, infinities and every threshold included). y may equal x (in-place); other overlaps
// are not allowed. The target is simd::active_target() at the time of the call.
void exp(const float* x, float* y, std::size_t n);
void log(const float* x, float* y, std::size_t n);
void log1p(const float* x, float* y, std::size_t n);
void softplus(const float* x, float* y, std::size_t n);
void sigmoid(const float* x, float* y, std::size_t n);
void silu(const float* x, float* y, std::size_t n);
void tanh(const float* x, float* y, std::size_t n);
void sqrt(const float* x, float* y, std::size_t n);
void rsqrt(const float* x, float* y, std::size_t n);
void sin(const float* x, float* y, std::size_t n);
void cos(const float* x, float* y, std::size_t n);
// y[i] = F(x[i]): subnormals become the zero of their sign, everything else is copied.
void flush(const float* x, float* y, std::size_t n);

// Internal: a target's kernel table behind the dispatch (the SIMD ones: numerics/simd_kernels.hpp).
namespace detail {

using ArrayFn = void (*)(const float* x, float* y, std::size_t n);

struct ArrayKernels {
  ArrayFn exp, log, log1p, softplus, sigmoid, silu, tanh, sqrt, rsqrt, sin, cos, flush;
};

const ArrayKernels& scalar_kernels();
const ArrayKernels& avx2_kernels();
const ArrayKernels& avx512_kernels();

}  // namespace detail

}  // namespace samebits::vector_math
