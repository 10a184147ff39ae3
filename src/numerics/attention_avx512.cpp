// Attention fast kernel for AVX-512 (16 query rows per vector); the shared body is
// numerics/attention_impl.hpp.
#include "numerics/attention.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/aligned_buffer.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::attention::detail {
namespace {

// clang-format off
#include "numerics/isa_avx512.hpp"
#include "numerics/attention_impl.hpp"
// clang-format on

}  // namespace

AttendFn attend_avx512() { return &attend_fast; }

}  // namespace samebits::attention::detail

#endif
