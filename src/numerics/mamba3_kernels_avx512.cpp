// Mamba-3 array kernels for AVX-512 (16 lanes).
#include "numerics/mamba3_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)

// GCC 12 reports its own _mm512_undefined_* placeholders inside the gather intrinsics as "maybe
// uninitialized" (a false positive: those lanes are fully overwritten).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/primitives.hpp"

namespace samebits::mamba3_kernels::detail {
namespace {

#include "numerics/isa_avx512.hpp"
#include "numerics/mamba3_kernels_impl.hpp"

}  // namespace

const Kernels& avx512_kernels() { return kIsaKernels; }

}  // namespace samebits::mamba3_kernels::detail

#endif
