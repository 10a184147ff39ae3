// AVX-512 twins of the exact primitives: 16 lanes, mask registers for the branches.
#include "numerics/vector_math.hpp"

#if defined(__x86_64__) || defined(__i386__)

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as "maybe
// uninitialized" (a false positive: those lanes are fully overwritten).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/primitives.hpp"

namespace samebits::vmath::detail {
namespace {

#include "numerics/isa_avx512.hpp"

#include "numerics/vector_math_impl.hpp"

}  // namespace

const ArrayKernels& avx512_kernels() { return kIsaKernels; }

}  // namespace samebits::vmath::detail

#endif
