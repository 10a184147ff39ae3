// AVX-512 kernels of the SSD decode pieces (16 output cells per vector).
#include "numerics/ssd.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/primitives.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::ssd::detail {
namespace {

// The order matters: Isa, then the primitives over it, then these kernels.
// clang-format off
#include "numerics/isa_avx512.hpp"
#include "numerics/vector_math_impl.hpp"
// clang-format on

#include "numerics/ssd_impl.hpp"

}  // namespace

const SsdKernels* ssd_kernels_avx512() { return &kSsdKernels; }

}  // namespace samebits::ssd::detail

#endif
