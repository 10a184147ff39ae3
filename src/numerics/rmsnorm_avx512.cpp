// RMSNorm row-block kernel for AVX-512 (16 rows at a time).
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::norm::detail {
namespace {

// The vocabulary first, then the kernels written in it.
// clang-format off
#include "numerics/isa_avx512.hpp"
#include "numerics/rmsnorm_impl.hpp"
// clang-format on

}  // namespace

RmsnormKernels rmsnorm_avx512() { return {Isa::kLanes, &rmsnorm_block, &rmsnorm_rows}; }

}  // namespace samebits::norm::detail
