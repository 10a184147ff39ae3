// AVX-512 twins of the exact primitives: 16 lanes, mask registers for the branches.
#include "numerics/vector_math.hpp"

#if defined(__x86_64__) || defined(__i386__)

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
