// A persistent worker pool: parallel_for splits independent outputs across threads and never
// changes the order of any reduction, so results never depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace samebits {

// Number of threads parallel_for uses (the caller counts as one). Defaults to the environment
// variable SAMEBITS_NUM_THREADS when it is a positive integer, otherwise to every core. Public through
// samebits/engine.hpp.
int num_threads();
// n >= 1; values above 256 are clamped. Idle workers beyond n stay parked.
void set_num_threads(int n);

// Number of logical cores the process may use.
int hardware_threads();

// Calls body(begin, end) over disjoint ranges that cover [0, count), in any order and on any
// thread. Each index is visited exactly once. Calls from inside a body run serially.
// An exception thrown by a body is rethrown on the calling thread after every range finished.
// Safe to call from several threads at once: regions that need helpers take turns on the workers, and a
// region run by the caller alone (one thread, or too little work to split) never waits for another.
void parallel_for(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body,
                  std::int64_t grain = 1);

// Threads scaled with the work (docs/performance.md §D): a thread is worth handing a share of a region only
// when that share reads at least this many bytes; below it the hand-over costs more than the core saves.
inline constexpr std::int64_t kMinBytesPerThread = std::int64_t{64} << 10;

// The grain to pass parallel_for for `count` independent items that each read about `bytes_per_item` bytes:
// the region then runs on at most max(1, count * bytes_per_item / kMinBytesPerThread) threads (one for a
// small region), in that many even runs. Only which thread computes an output changes, never a bit.
std::int64_t grain_for_work(std::int64_t count, std::int64_t bytes_per_item);

}  // namespace samebits
