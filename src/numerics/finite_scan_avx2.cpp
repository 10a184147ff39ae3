// The non-finite scan for AVX2; the body is numerics/finite_scan_impl.hpp.
#include "numerics/finite_scan.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"

namespace samebits::finite::detail {
namespace {

// clang-format off
#include "numerics/isa_avx2.hpp"
#include "numerics/finite_scan_impl.hpp"
// clang-format on

}  // namespace

FiniteFn all_finite_avx2() { return &all_finite_vector; }

}  // namespace samebits::finite::detail

#endif
