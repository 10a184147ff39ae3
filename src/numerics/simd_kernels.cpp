// The scalar kernel table and the selection of a target's table.
#include "numerics/simd_kernels.hpp"

namespace samebits::simd {

namespace detail {

const KernelTable& scalar_table() {
  static const KernelTable table{
      .gemm = &gemm::detail::scalar_kernels(),
      .vector_math = &vector_math::detail::scalar_kernels(),
      .mamba3 = &mamba3_kernels::detail::scalar_kernels(),
      .selective_scan = nullptr,
      .ssd = nullptr,
      .block_ops = nullptr,
      .rmsnorm = {1, nullptr, nullptr},
      .attend = nullptr,
      .attend_5_to_8_rows = nullptr,
      .all_finite = nullptr,
      .transpose = nullptr,
      .probe = {1, &machine_probe::detail::mul_add_rounds_baseline,
                &machine_probe::detail::mul_add_rounds_baseline, &machine_probe::detail::or_reduce_baseline}};
  return table;
}

}  // namespace detail

const KernelTable& kernels_for(Target target) {
#if defined(SAMEBITS_HAVE_SIMD) && (defined(__x86_64__) || defined(__i386__))
  switch (target) {
    case Target::Avx512:
      return detail::avx512_table();
    case Target::Avx2:
      return detail::avx2_table();
    case Target::Scalar:
      break;
  }
#else
  (void)target;
#endif
  return detail::scalar_table();
}

}  // namespace samebits::simd
