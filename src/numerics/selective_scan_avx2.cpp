// AVX2 kernels of the causal conv and the Mamba-1 scan (8 channels per vector).
#include "numerics/selective_scan.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::sscan::detail {
namespace {

// The order matters: Isa, then the primitives over it, then these kernels.
// clang-format off
#include "numerics/isa_avx2.hpp"
#include "numerics/vector_math_impl.hpp"
#include "numerics/selective_scan_impl.hpp"
// clang-format on

}  // namespace

const ScanKernels* scan_kernels_avx2() { return &kScanKernels; }

}  // namespace samebits::sscan::detail

#endif
