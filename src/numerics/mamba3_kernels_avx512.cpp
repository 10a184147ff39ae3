// Mamba-3 array kernels for AVX-512 (16 lanes).
#include "numerics/mamba3_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)

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
