// sqrtf over all 2^32 inputs: the literal Newton algorithm equals the special cases plus the hardware
// square root (Open point 7.3), which is correctly rounded, and every SIMD target's twin agrees.
// Sanitizer builds (SAMEBITS_SANITIZER_BUILD, set by the asan/tsan presets) check a documented subset
// instead, because 2^32 instrumented evaluations take far too long; the normal build stays exhaustive.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"
#include "numerics/vector_math.hpp"

namespace samebits {
namespace {

using fp::bits;
using fp::from_bits;

constexpr std::int64_t kBlock = std::int64_t{1} << 16;
constexpr std::int64_t kBlocks = (std::int64_t{1} << 32) / kBlock;

#if defined(SAMEBITS_SANITIZER_BUILD) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSubsetOnly = true;
#else
constexpr bool kSubsetOnly = false;
#endif

// The blocks of 2^16 consecutive bit patterns (block = top 16 bits: sign, exponent, 7 mantissa bits) to
// check. Exhaustive: all of them. Sanitizer subset (5060 blocks, about 8% of the inputs):
// - every 17th block (17 is odd, so the strided blocks meet every value of the 7 mantissa bits, every
//   exponent and both signs);
// - both zeros and every subnormal of either sign, up to the first block of normals;
// - the first and the last block of every binade of either sign (mantissa near 1 and near 2, either
//   side of each exponent step, whose parity decides how the root halves the exponent);
// - FLT_MAX, the infinities and the NaN range edges: the first and last NaN blocks and the blocks either
//   side of the quiet-NaN boundary.
std::vector<std::int64_t> blocks_to_check() {
  std::vector<bool> chosen(static_cast<std::size_t>(kBlocks), !kSubsetOnly);
  if (kSubsetOnly) {
    auto pick = [&](std::int64_t block) { chosen[static_cast<std::size_t>(block)] = true; };
    for (std::int64_t block = 0; block < kBlocks; block += 17) pick(block);
    for (std::int64_t sign : {0x0000, 0x8000}) {
      for (std::int64_t block = 0; block <= 0x0080; ++block) pick(sign | block);
      for (std::int64_t exponent = 0; exponent < 256; ++exponent) {
        pick(sign | exponent << 7);
        pick(sign | exponent << 7 | 0x7F);
      }
      for (std::int64_t block : {0x7F7F, 0x7F80, 0x7FBF, 0x7FC0, 0x7FFF}) pick(sign | block);
    }
  }
  std::vector<std::int64_t> blocks;
  for (std::int64_t block = 0; block < kBlocks; ++block)
    if (chosen[static_cast<std::size_t>(block)]) blocks.push_back(block);
  if (kSubsetOnly)
    std::printf("sanitizer build: checking %zu of %lld blocks of 2^16 inputs\n", blocks.size(),
                static_cast<long long>(kBlocks));
  return blocks;
}

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
  const std::vector<std::int64_t> blocks = blocks_to_check();
  Mismatches literal_vs_fast, fast_vs_double;
  parallel_for(static_cast<std::int64_t>(blocks.size()), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t index = begin; index < end; ++index) {
      const std::int64_t block = blocks[static_cast<std::size_t>(index)];
      const std::uint32_t first = static_cast<std::uint32_t>(block * kBlock);
      for (std::uint32_t i = 0; i < kBlock; ++i) {
        const std::uint32_t u = first + i;
        const float x = from_bits(u);
        const float fast = primitives::sqrtf(x);
        if (bits(primitives::sqrtf_reference(x)) != bits(fast)) literal_vs_fast.add(u);
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

const vector_math::detail::ArrayKernels& kernels_of(simd::Target target) {
  return *simd::kernels_for(target).vector_math;
}

// The targets' kernel tables are called directly (instead of switching the process-wide target) so
// one pass over the inputs checks every target, with the scalar result computed once.
TEST(SqrtExhaustive, EveryTargetEqualsTheScalarPrimitive) {
  const std::vector<simd::Target> targets = simd::available_targets();
  std::vector<Mismatches> mismatches(targets.size());
  const std::vector<std::int64_t> blocks = blocks_to_check();
  parallel_for(static_cast<std::int64_t>(blocks.size()), [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> in(kBlock), expected(kBlock), out(kBlock);
    for (std::int64_t index = begin; index < end; ++index) {
      const std::int64_t block = blocks[static_cast<std::size_t>(index)];
      const std::uint32_t first = static_cast<std::uint32_t>(block * kBlock);
      for (std::uint32_t i = 0; i < kBlock; ++i) {
        in[i] = from_bits(first + i);
        expected[i] = primitives::sqrtf(in[i]);
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
