// RMSNorm row-block kernel for AVX2 + FMA (8 rows at a time).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::norm::detail {
namespace {

// The vocabulary first, then the kernels written in it.
// clang-format off
#include "numerics/isa_avx2.hpp"
#include "numerics/rmsnorm_impl.hpp"
// clang-format on

}  // namespace

RmsnormKernels rmsnorm_avx2() { return {Isa::kLanes, &rmsnorm_block, &rmsnorm_rows}; }

}  // namespace samebits::norm::detail
