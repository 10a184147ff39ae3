// One table of kernels per SIMD target, and the one place that picks the table for a call.
#pragma once

#include "numerics/attention.hpp"
#include "numerics/block_ops.hpp"
#include "numerics/finite_scan.hpp"
#include "numerics/gemm_kernels.hpp"
#include "numerics/machine_probe.hpp"
#include "numerics/mamba3_kernels.hpp"
#include "numerics/rmsnorm.hpp"
#include "numerics/selective_scan.hpp"
#include "numerics/simd_target.hpp"
#include "numerics/ssd.hpp"
#include "numerics/transpose.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::simd {

// Every kernel family's entry points on one target. The fallback rule, the same for every family: a null
// entry means the target has no fast path for that family, and the family runs its scalar twin. The
// array-kernel tables (GEMM leaves, vector math, Mamba-3) are never null: the scalar target has its own.
struct KernelTable {
  const gemm::detail::KernelSet* gemm;
  const vector_math::detail::ArrayKernels* vector_math;
  const mamba3_kernels::detail::Kernels* mamba3;
  const selective_scan::detail::ScanKernels* selective_scan;
  const ssd::detail::SsdKernels* ssd;
  const block_ops::detail::Kernels* block_ops;
  rmsnorm::detail::RmsnormKernels rmsnorm;
  attention::detail::AttendFn attend;
  // For units of 5 to 8 query rows: on AVX-512 the 8-lane kernel, whose row block such a unit wastes less
  // of; `attend` on the other targets.
  attention::detail::AttendFn attend_5_to_8_rows;
  finite_scan::detail::FiniteFn all_finite;
  transpose::detail::TransposeFn transpose;
  machine_probe::detail::ProbeLoops probe;  // the benches' machine probes; never null
};

// The table of `target` (the scalar table for a target this build did not compile). Tests and benches
// that pin a target use it; set_target / SAMEBITS_SIMD choose the one kernels() returns.
const KernelTable& kernels_for(Target target);
// The selection point of every dispatch: kernels_for(active_target()).
inline const KernelTable& kernels() { return kernels_for(active_target()); }

namespace detail {
// Defined in simd_kernels.cpp, simd_kernels_avx2.cpp and simd_kernels_avx512.cpp.
const KernelTable& scalar_table();
const KernelTable& avx2_table();
const KernelTable& avx512_table();
}  // namespace detail

}  // namespace samebits::simd
