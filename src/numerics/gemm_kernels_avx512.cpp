// GEMM leaf kernels for AVX-512: 16 lanes, tiles of 8 rows x 32 columns (16 accumulators).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"

namespace samebits::gemm::detail {
namespace {

// The vocabulary first, then the kernels written in it.
// clang-format off
#include "numerics/isa_avx512.hpp"
#include "numerics/gemm_kernel_impl.hpp"
// clang-format on

}  // namespace

const KernelSet& avx512_kernels() {
  static const KernelSet set = [] {
    KernelSet s{};
    s.tile_rows = 8;
    fill_kernels<8>(s);
    fill_skinny_kernels<2, 4>(s);  // 1-2 rows x 128 columns: 8-16 accumulators
    return s;
  }();
  return set;
}

}  // namespace samebits::gemm::detail
