// sqrtf over all 2^32 inputs: the literal Newton algorithm equals the special cases plus the hardware
// square root (Open point 7.3), which is correctly rounded, and every SIMD target's twin agrees.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_target.hpp"
#include "numerics/vector_math.hpp"

namespace samebits {
namespace {

using fp::bits;
using fp::from_bits;

constexpr std::int64_t kBlock = std::int64_t{1} << 16;
constexpr std::int64_t kBlocks = (std::int64_t{1} << 32) / kBlock;

// Keeps the first (lowest) failing input of each kind for the failure message.
struct Mismatches {
  std::atomic<std::uint64_t> count{0};
  std::mutex mutex;
  std::uint32_t first_input = 0xFFFFFFFFu;
  void add(std::uint32_t input) {
    count.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex);
    if (input < first_input) first_input = input;
  }
};

TEST(SqrtExhaustive, LiteralAlgorithmEqualsHardwareSqrtForEveryInput) {
  Mismatches literal_vs_fast, fast_vs_double;
  parallel_for(kBlocks, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t block = begin; block < end; ++block) {
      const std::uint32_t first = static_cast<std::uint32_t>(block * kBlock);
      for (std::uint32_t i = 0; i < kBlock; ++i) {
        const std::uint32_t u = first + i;
        const float x = from_bits(u);
        const float fast = prim::sqrtf(x);
        if (bits(prim::sqrtf_reference(x)) != bits(fast)) literal_vs_fast.add(u);
        // An independent correctly rounded root for the positive normals: the double root rounded
        // to float (53 >= 2 * 24 + 2 bits, so no double-rounding error).
        if (u >= 0x00800000u && u <= 0x7F7FFFFFu &&
            bits(fast) != bits(static_cast<float>(std::sqrt(static_cast<double>(x)))))
          fast_vs_double.add(u);
      }
    }
  });
  EXPECT_EQ(literal_vs_fast.count.load(), 0u) << "first input 0x" << std::hex << literal_vs_fast.first_input;
  EXPECT_EQ(fast_vs_double.count.load(), 0u) << "first input 0x" << std::hex << fast_vs_double.first_input;
}

const vmath::detail::ArrayKernels& kernels_of(simd::Target target) {
  switch (target) {
    case simd::Target::Avx512:
      return vmath::detail::avx512_kernels();
    case simd::Target::Avx2:
      return vmath::detail::avx2_kernels();
    case simd::Target::Scalar:
      break;
  }
  return vmath::detail::scalar_kernels();
}

// The targets' kernel tables are called directly (instead of switching the process-wide target) so
// one pass over the inputs checks every target, with the scalar result computed once.
TEST(SqrtExhaustive, EveryTargetEqualsTheScalarPrimitive) {
  const std::vector<simd::Target> targets = simd::available_targets();
  std::vector<Mismatches> mismatches(targets.size());
  parallel_for(kBlocks, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> in(kBlock), expected(kBlock), out(kBlock);
    for (std::int64_t block = begin; block < end; ++block) {
      const std::uint32_t first = static_cast<std::uint32_t>(block * kBlock);
      for (std::uint32_t i = 0; i < kBlock; ++i) {
        in[i] = from_bits(first + i);
        expected[i] = prim::sqrtf(in[i]);
      }
      for (std::size_t t = 0; t < targets.size(); ++t) {
        kernels_of(targets[t]).sqrt(in.data(), out.data(), kBlock);
        for (std::uint32_t i = 0; i < kBlock; ++i)
          if (bits(out[i]) != bits(expected[i])) mismatches[t].add(first + i);
      }
    }
  });
  for (std::size_t t = 0; t < targets.size(); ++t)
    EXPECT_EQ(mismatches[t].count.load(), 0u)
        << simd::target_name(targets[t]) << ": first input 0x" << std::hex << mismatches[t].first_input;
}

}  // namespace
}  // namespace samebits
