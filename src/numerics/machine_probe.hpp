// Machine probes for benchmarks: the single-thread FMA peak of a SIMD target and the streaming read
// bandwidth, measured on the running machine so GEMM numbers can be read against real ceilings.
#pragma once

#include <cstddef>

#include "numerics/simd_target.hpp"

namespace samebits::probe {

// Single-thread floating-point peak in flop/s for `target`: many independent register-resident FMA
// chains (enough to hide the FMA latency), each FMA counted as 2 flops per lane. Scalar measures the
// scalar FMA instruction (vfmadd231ss) when the CPU has FMA, else a mul + add pair (still 2 flops).
// A target the CPU or build lacks falls back to the best available one below it. Runs for about
// `seconds` and reports the best of its timed blocks.
double measure_fma_peak_flops(simd::Target target, double seconds);

// Single-thread streaming read bandwidth in bytes/s: an OR-reduction over a buffer of `bytes` bytes
// (choose it much larger than the last-level cache to measure DRAM). The buffer is written before
// timing so every page is resident; reports the best full pass within about `seconds`.
double measure_read_bandwidth(std::size_t bytes, double seconds);

// The same pass split over `threads` pool threads (contiguous parts, one per thread), passes back to
// back over the same buffer: the rate at which that many cores re-read a footprint of `bytes`, as a
// decode loop re-reads its weights and state each step. The pool's thread count is left as it was.
double measure_read_bandwidth(std::size_t bytes, double seconds, int threads);

namespace detail {
// Per-ISA loops. Each runs `rounds` rounds of kFmaChains independent FMAs (or one full pass over
// `words` 64-bit words) and returns a value that depends on every operation, so nothing is elided.
inline constexpr int kFmaChains = 12;
float fma_rounds_scalar_fma(long long rounds);  // AVX2 TU: vfmadd231ss, 1 lane
float fma_rounds_avx2(long long rounds);        // 8 lanes
float fma_rounds_avx512(long long rounds);      // 16 lanes
unsigned long long or_reduce_avx2(const unsigned long long* data, std::size_t words);
unsigned long long or_reduce_avx512(const unsigned long long* data, std::size_t words);
}  // namespace detail

}  // namespace samebits::probe
