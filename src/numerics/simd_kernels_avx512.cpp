// The AVX-512 kernel table: 16 lanes; every family's body is its numerics/*_impl.hpp.
#if defined(__x86_64__) || defined(__i386__)

#define SAMEBITS_ISA_HEADER "numerics/isa_avx512.hpp"
#include "numerics/simd_kernels_impl.hpp"

namespace samebits::simd::detail {

const KernelTable& avx512_table() {
  // GEMM tiles of 8 rows (16 accumulators); skinny tiles of 1-2 rows x 128 columns (8-16 accumulators);
  // float32 tiles of 12 rows x 32 columns (24 accumulators).
  // Attention units of 5 to 8 query rows take the AVX2 kernel (see KernelTable::attend_5_to_8_rows).
  static const KernelTable table = isa_table<8, 2, 4, 12, 2>(avx2_table().attend);
  return table;
}

}  // namespace samebits::simd::detail

#endif
