// The per-call non-finite refusal shared by every block: a vectorized, pool-split scan, then the namer.
#include "blocks/block_support.hpp"

#include <algorithm>
#include <atomic>

#include "core/thread_pool.hpp"
#include "numerics/finite_scan.hpp"

namespace samebits::blocks {

void refuse_if_non_finite(const float* data, std::int64_t count, const std::string& what,
                          const std::string& name) {
  // Below a few blocks the pool's hand-off costs more than the scan itself.
  constexpr std::int64_t kBlock = 1 << 15;
  bool clean;
  if (count <= 4 * kBlock) {
    clean = finite::all_finite(data, count);
  } else {
    std::atomic<bool> ok{true};
    parallel_for((count + kBlock - 1) / kBlock, [&](std::int64_t begin, std::int64_t end) {
      const std::int64_t first = begin * kBlock, last = std::min(count, end * kBlock);
      if (!finite::all_finite(data + first, last - first)) ok.store(false, std::memory_order_relaxed);
    });
    clean = ok.load();
  }
  if (!clean) refuse_non_finite(data, count, what, name);
}

}  // namespace samebits::blocks
