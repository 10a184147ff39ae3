// Dispatch of the elementwise primitives to the active SIMD target, plus the scalar loops.
#include "numerics/vector_math.hpp"

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::vector_math {
namespace detail {
namespace {

template <float (*Fn)(float) noexcept>
void scalar_loop(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = Fn(x[i]);
}

float flush_one(float x) noexcept { return fp::F(x); }

}  // namespace

const ArrayKernels& scalar_kernels() {
  static const ArrayKernels kernels{
      &scalar_loop<primitives::expf>,     &scalar_loop<primitives::logf>,    &scalar_loop<primitives::log1pf>,
      &scalar_loop<primitives::softplus>, &scalar_loop<primitives::sigmoid>, &scalar_loop<primitives::silu>,
      &scalar_loop<primitives::tanhf>,    &scalar_loop<primitives::sqrtf>,   &scalar_loop<primitives::rsqrtf>,
      &scalar_loop<primitives::sinf>,     &scalar_loop<primitives::cosf>,    &scalar_loop<flush_one>,
  };
  return kernels;
}

}  // namespace detail

namespace {

const detail::ArrayKernels& active_kernels() { return *simd::kernels().vector_math; }

}  // namespace

void exp(const float* x, float* y, std::size_t n) { active_kernels().exp(x, y, n); }
void log(const float* x, float* y, std::size_t n) { active_kernels().log(x, y, n); }
void log1p(const float* x, float* y, std::size_t n) { active_kernels().log1p(x, y, n); }
void softplus(const float* x, float* y, std::size_t n) { active_kernels().softplus(x, y, n); }
void sigmoid(const float* x, float* y, std::size_t n) { active_kernels().sigmoid(x, y, n); }
void silu(const float* x, float* y, std::size_t n) { active_kernels().silu(x, y, n); }
void tanh(const float* x, float* y, std::size_t n) { active_kernels().tanh(x, y, n); }
void sqrt(const float* x, float* y, std::size_t n) { active_kernels().sqrt(x, y, n); }
void rsqrt(const float* x, float* y, std::size_t n) { active_kernels().rsqrt(x, y, n); }
void sin(const float* x, float* y, std::size_t n) { active_kernels().sin(x, y, n); }
void cos(const float* x, float* y, std::size_t n) { active_kernels().cos(x, y, n); }
void flush(const float* x, float* y, std::size_t n) { active_kernels().flush(x, y, n); }

}  // namespace samebits::vector_math
