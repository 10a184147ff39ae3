// Machine probes: times the per-ISA FMA and streaming-read loops and turns them into flop/s and bytes/s.
#include "numerics/machine_probe.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/thread_pool.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::machine_probe {
namespace {

using Clock = std::chrono::steady_clock;

// Results land here so the loops' values are observably used and the compiler cannot drop them.
volatile float g_float_sink = 0.0f;
volatile unsigned long long g_word_sink = 0;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

// Baseline x86-64 has no FMA instruction: a multiply then an add (kept apart by -ffp-contract=off)
// per chain step, still 2 flops.
float detail::mul_add_rounds_baseline(long long rounds) {
  float acc[detail::kFmaChains];
  for (int c = 0; c < detail::kFmaChains; ++c) acc[c] = 1.0f + 0.01f * static_cast<float>(c);
  for (long long r = 0; r < rounds; ++r)
    for (int c = 0; c < detail::kFmaChains; ++c) acc[c] = acc[c] * 0.9999f + 1.0e-4f;
  float total = 0.0f;
  for (float value : acc) total += value;
  return total;
}

unsigned long long detail::or_reduce_baseline(const unsigned long long* data, std::size_t words) {
  unsigned long long acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    acc0 |= data[i];
    acc1 |= data[i + 1];
    acc2 |= data[i + 2];
    acc3 |= data[i + 3];
  }
  for (; i < words; ++i) acc0 |= data[i];
  return acc0 | acc1 | acc2 | acc3;
}

namespace {

// The FMA loop for `target` (capped to what runs here); sets `lanes` to its floats per FMA. The scalar
// target measures the scalar FMA instruction where the CPU has one (the best table's one-lane loop).
using FmaLoop = float (*)(long long);
FmaLoop fma_loop_for(simd::Target target, int& lanes) {
  const simd::Target usable = simd::best_available(target);
  if (usable == simd::Target::Scalar) {
    lanes = 1;
    return simd::kernels_for(simd::best_available(simd::Target::Avx512)).probe.fma_rounds_one_lane;
  }
  const detail::ProbeLoops& loops = simd::kernels_for(usable).probe;
  lanes = loops.fma_lanes;
  return loops.fma_rounds;
}

using OrLoop = unsigned long long (*)(const unsigned long long*, std::size_t);
OrLoop best_or_loop() {
  return simd::kernels_for(simd::best_available(simd::Target::Avx512)).probe.or_reduce;
}

}  // namespace

double measure_fma_peak_flops(simd::Target target, double seconds) {
  int lanes = 1;
  const FmaLoop loop = fma_loop_for(target, lanes);
  // Grow one block until it lasts about 2 ms, long enough that clock reads and the loop's tail vanish.
  long long rounds = 1 << 12;
  for (;;) {
    const Clock::time_point start = Clock::now();
    g_float_sink = loop(rounds);
    if (seconds_since(start) >= 2.0e-3 || rounds >= (1LL << 40)) break;
    rounds *= 2;
  }
  const double flops_per_block = 2.0 * lanes * detail::kFmaChains * static_cast<double>(rounds);
  double best = 0.0;
  const Clock::time_point begin = Clock::now();
  for (int block = 0; block < 3 || seconds_since(begin) < seconds; ++block) {
    const Clock::time_point start = Clock::now();
    g_float_sink = loop(rounds);
    best = std::max(best, flops_per_block / seconds_since(start));
  }
  return best;
}

double measure_read_bandwidth(std::size_t bytes, double seconds) {
  return measure_read_bandwidth(bytes, seconds, 1);
}

double measure_read_bandwidth(std::size_t bytes, double seconds, int threads) {
  threads = std::max(threads, 1);
  const std::size_t words = std::max<std::size_t>(bytes / sizeof(unsigned long long), 1);
  AlignedBuffer<unsigned long long> buffer(words);
  // Writing every word faults the pages in before timing; the pattern is never all zero.
  for (std::size_t i = 0; i < words; ++i) buffer[i] = (i * 0x9E3779B97F4A7C15ULL) | 1ULL;
  const OrLoop loop = best_or_loop();
  const int previous = num_threads();
  set_num_threads(threads);
  std::vector<unsigned long long> sinks(static_cast<std::size_t>(threads));
  // One part per pool thread, cut at 64-byte lines so no two threads share one.
  auto pass = [&] {
    parallel_for(threads, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t part = begin; part < end; ++part) {
        const std::size_t lo = words * static_cast<std::size_t>(part) / threads / 8 * 8;
        const std::size_t hi =
            part + 1 == threads ? words : words * static_cast<std::size_t>(part + 1) / threads / 8 * 8;
        sinks[static_cast<std::size_t>(part)] = loop(buffer.data() + lo, hi - lo);
      }
    });
    unsigned long long all = 0;
    for (unsigned long long v : sinks) all |= v;
    g_word_sink = all;
  };
  pass();  // warm-up pass (TLB, prefetchers, the pool's workers)
  const double pass_bytes = static_cast<double>(words * sizeof(unsigned long long));
  double best = 0.0;
  const Clock::time_point begin = Clock::now();
  for (int round = 0; round < 3 || seconds_since(begin) < seconds; ++round) {
    const Clock::time_point start = Clock::now();
    pass();
    best = std::max(best, pass_bytes / seconds_since(start));
  }
  set_num_threads(previous);
  return best;
}

}  // namespace samebits::machine_probe
