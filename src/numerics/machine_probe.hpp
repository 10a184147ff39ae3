// Machine probes for benchmarks: the single-thread FMA peak of a SIMD target and the streaming read
// bandwidth, measured on the running machine so GEMM numbers can be read against real ceilings.
#pragma once

#include <cstddef>

#include "numerics/simd_target.hpp"

namespace samebits::machine_probe {

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
// A target's probe loops (numerics/simd_kernels.hpp holds one set per target). Each runs `rounds` rounds
// of kFmaChains independent FMAs (or one full pass over `words` 64-bit words) and returns a value that
// depends on every operation, so nothing is elided.
inline constexpr int kFmaChains = 12;
struct ProbeLoops {
  int fma_lanes;                                   // floats per FMA of fma_rounds
  float (*fma_rounds)(long long rounds);           // fma_lanes lanes
  float (*fma_rounds_one_lane)(long long rounds);  // 1 lane (vfmadd231ss where the target has FMA)
  unsigned long long (*or_reduce)(const unsigned long long* data, std::size_t words);
};
// The scalar target's loops (baseline x86-64 has no FMA: a multiply then an add, still 2 flops).
float mul_add_rounds_baseline(long long rounds);
unsigned long long or_reduce_baseline(const unsigned long long* data, std::size_t words);
}  // namespace detail

}  // namespace samebits::machine_probe
