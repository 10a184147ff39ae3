// The transpose for AVX-512; the body is numerics/transpose_impl.hpp.
#include "numerics/transpose.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>

namespace samebits::transpose::detail {
namespace {

// clang-format off
#include "numerics/isa_avx512.hpp"
#include "numerics/transpose_impl.hpp"
// clang-format on

}  // namespace

TransposeFn transpose_avx512() { return &transpose_blocks; }

}  // namespace samebits::transpose::detail

#endif
