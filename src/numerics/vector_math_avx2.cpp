// AVX2 + FMA twins of the exact primitives: 8 lanes, vector compares and blends for the branches.
#include "numerics/vector_math.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/primitives.hpp"

namespace samebits::vmath::detail {
namespace {

#include "numerics/isa_avx2.hpp"

#include "numerics/vector_math_impl.hpp"

}  // namespace

const ArrayKernels& avx2_kernels() { return kIsaKernels; }

}  // namespace samebits::vmath::detail

#endif
