// The AVX2 + FMA kernel table: 8 lanes; every family's body is its numerics/*_impl.hpp.
#if defined(__x86_64__) || defined(__i386__)

#define SAMEBITS_ISA_HEADER "numerics/isa_avx2.hpp"
#include "numerics/simd_kernels_impl.hpp"

namespace samebits::simd::detail {

const KernelTable& avx2_table() {
  // GEMM tiles of 3 rows (12 accumulators); skinny tiles of 1 row x 64 columns (8 accumulators); float32
  // tiles of 6 rows x 32 columns, 16 columns at a time (12 accumulators).
  static const KernelTable table = isa_table<3, 1, 2, 6, 2>(nullptr);
  return table;
}

}  // namespace samebits::simd::detail

#endif
