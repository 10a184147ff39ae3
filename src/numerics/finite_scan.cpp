// Dispatch of the non-finite scan to the active SIMD target, and its literal twin.
#include "numerics/finite_scan.hpp"

#include "numerics/fp.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::finite_scan {

bool all_finite_reference(const float* data, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    if (!fp::is_finite(data[i])) return false;
  return true;
}

bool all_finite(const float* data, std::int64_t count) {
  const detail::FiniteFn kernel = simd::kernels().all_finite;
  return kernel != nullptr ? kernel(data, count) : all_finite_reference(data, count);
}

}  // namespace samebits::finite_scan
