// GEMM leaf kernels for AVX2 + FMA: 8 lanes, tiles of 3 rows x 32 columns (12 accumulators).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"

namespace samebits::gemm::detail {
namespace {

// The vocabulary first, then the kernels written in it.
// clang-format off
#include "numerics/isa_avx2.hpp"
#include "numerics/gemm_kernel_impl.hpp"
// clang-format on

}  // namespace

const KernelSet& avx2_kernels() {
  static const KernelSet set = [] {
    KernelSet s{};
    s.tile_rows = 3;
    fill_kernels<3>(s);
    fill_skinny_kernels<1, 2>(s);  // 1 row x 64 columns: 8 accumulators
    return s;
  }();
  return set;
}

}  // namespace samebits::gemm::detail
