// Mamba-3 array kernels for AVX2 + FMA (8 lanes).
#include "numerics/mamba3_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/primitives.hpp"

namespace samebits::mamba3_kernels::detail {
namespace {

#include "numerics/isa_avx2.hpp"
#include "numerics/mamba3_kernels_impl.hpp"

}  // namespace

const Kernels& avx2_kernels() { return kIsaKernels; }

}  // namespace samebits::mamba3_kernels::detail

#endif
