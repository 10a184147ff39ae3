// The per-call non-finite refusal shared by every block: a vectorized, pool-split scan, then the namer.
#include "blocks/common/block_support.hpp"

#include <algorithm>
#include <atomic>

#include "core/thread_pool.hpp"
#include "numerics/finite_scan.hpp"

namespace samebits::blocks {

void refuse_if_any_non_finite(std::initializer_list<ScannedArray> arrays, const std::string& what,
                              const std::string& name_prefix) {
  refuse_if_any_non_finite(arrays.begin(), arrays.size(), what, name_prefix);
}

void refuse_if_any_non_finite(const ScannedArray* arrays, std::size_t count, const std::string& what,
                              const std::string& name_prefix) {
  // Blocks of this many floats are the pool's unit; below a few of them the hand-off costs more than the
  // scan itself.
  constexpr std::int64_t kBlock = 1 << 15;
  std::int64_t total = 0;
  for (std::size_t a = 0; a < count; ++a) total += arrays[a].count;
  bool clean = true;
  if (total <= 4 * kBlock) {
    for (std::size_t a = 0; a < count && clean; ++a)
      clean = finite_scan::all_finite(arrays[a].data, arrays[a].count);
  } else {
    // Block b covers floats [b * kBlock, (b + 1) * kBlock) of the arrays laid end to end, each array's
    // blocks starting afresh so no block spans two arrays.
    std::int64_t blocks = 0;
    for (std::size_t a = 0; a < count; ++a) blocks += (arrays[a].count + kBlock - 1) / kBlock;
    std::atomic<bool> ok{true};
    parallel_for(blocks, [&](std::int64_t begin, std::int64_t end) {
      std::size_t a = 0;
      std::int64_t first_block = 0;  // the first block of array a
      for (std::int64_t b = begin; b < end; ++b) {
        while ((arrays[a].count + kBlock - 1) / kBlock <= b - first_block) {
          first_block += (arrays[a].count + kBlock - 1) / kBlock;
          ++a;
        }
        const std::int64_t lo = (b - first_block) * kBlock, hi = std::min(arrays[a].count, lo + kBlock);
        if (!finite_scan::all_finite(arrays[a].data + lo, hi - lo))
          ok.store(false, std::memory_order_relaxed);
      }
    });
    clean = ok.load();
  }
  if (clean) return;
  for (std::size_t a = 0; a < count; ++a)
    refuse_non_finite(arrays[a].data, arrays[a].count, what, name_prefix + arrays[a].name);
}

}  // namespace samebits::blocks
