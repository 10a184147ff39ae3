// The body of simd_kernels_avx2.cpp and simd_kernels_avx512.cpp: every kernel family compiled over the
// vector vocabulary named by SAMEBITS_ISA_HEADER (numerics/isa_avx2.hpp or numerics/isa_avx512.hpp), and
// the template that gathers them into that target's KernelTable. Each family gets its own anonymous
// namespace inside its own namespace, with its own copy of the vocabulary, so no two families' helpers
// meet and nothing compiled for the target can leak into baseline code.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "core/aligned_buffer.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"

// The order inside each family matters: the vocabulary, then the primitives over it, then the kernels.
// clang-format off
namespace samebits::gemm::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/gemm_kernel_impl.hpp"
}  // namespace
}  // namespace samebits::gemm::detail

namespace samebits::vector_math::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/vector_math_impl.hpp"
}  // namespace
}  // namespace samebits::vector_math::detail

namespace samebits::mamba3_kernels::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/mamba3_kernels_impl.hpp"
}  // namespace
}  // namespace samebits::mamba3_kernels::detail

namespace samebits::selective_scan::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/vector_math_impl.hpp"
#include "numerics/selective_scan_impl.hpp"
}  // namespace
}  // namespace samebits::selective_scan::detail

namespace samebits::ssd::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/vector_math_impl.hpp"
#include "numerics/ssd_impl.hpp"
}  // namespace
}  // namespace samebits::ssd::detail

namespace samebits::block_ops::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/vector_math_impl.hpp"
#include "numerics/block_ops_impl.hpp"
}  // namespace
}  // namespace samebits::block_ops::detail

namespace samebits::rmsnorm::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/rmsnorm_impl.hpp"
}  // namespace
}  // namespace samebits::rmsnorm::detail

namespace samebits::attention::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/attention_impl.hpp"
}  // namespace
}  // namespace samebits::attention::detail

namespace samebits::finite_scan::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/finite_scan_impl.hpp"
}  // namespace
}  // namespace samebits::finite_scan::detail

namespace samebits::transpose::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/transpose_impl.hpp"
}  // namespace
}  // namespace samebits::transpose::detail

namespace samebits::machine_probe::detail {
namespace {
#include SAMEBITS_ISA_HEADER
#include "numerics/machine_probe_impl.hpp"
}  // namespace
}  // namespace samebits::machine_probe::detail
// clang-format on

namespace samebits::simd::detail {
namespace {

// The target's table. GEMM register tiles are TileRows x 32 columns; skinny tiles (decode-sized
// problems) are up to SkinnyRows rows x SkinnyPanels panels of 32 columns; float32 tiles are F32TileRows x
// 32 columns, computed F32PassVecs vectors of columns at a time.
template <int TileRows, int SkinnyRows, int SkinnyPanels, int F32TileRows, int F32PassVecs>
KernelTable isa_table(attention::detail::AttendFn attend_5_to_8_rows) {
  static const gemm::detail::KernelSet gemm_set = [] {
    gemm::detail::KernelSet s{};
    s.tile_rows = TileRows;
    gemm::detail::fill_kernels<TileRows>(s);
    gemm::detail::fill_skinny_kernels<SkinnyRows, SkinnyPanels>(s);
    gemm::detail::fill_f32_tiles<F32TileRows, F32PassVecs>(s);
    return s;
  }();
  const attention::detail::AttendFn attend = &attention::detail::attend_fast;
  return KernelTable{.gemm = &gemm_set,
                     .vector_math = &vector_math::detail::kIsaKernels,
                     .mamba3 = &mamba3_kernels::detail::kIsaKernels,
                     .selective_scan = &selective_scan::detail::kScanKernels,
                     .ssd = &ssd::detail::kSsdKernels,
                     .block_ops = &block_ops::detail::kBlockOpsKernels,
                     .rmsnorm = {rmsnorm::detail::Isa::kLanes, &rmsnorm::detail::rmsnorm_block,
                                 &rmsnorm::detail::rmsnorm_rows},
                     .attend = attend,
                     .attend_5_to_8_rows = attend_5_to_8_rows != nullptr ? attend_5_to_8_rows : attend,
                     .all_finite = &finite_scan::detail::all_finite_vector,
                     .transpose = &transpose::detail::transpose_blocks,
                     .probe = machine_probe::detail::kProbeLoops};
}

}  // namespace
}  // namespace samebits::simd::detail
