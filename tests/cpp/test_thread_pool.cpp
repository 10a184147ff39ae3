// parallel_for's contract: every index of [0, count) is visited exactly once whatever the count, grain
// and thread count (each thread starts on its own run of chunks and then takes what is left of the
// others'), a body's exception reaches the caller after the region ends, nested calls run serially, and
// grain_for_work gives a small region fewer threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_pool.hpp"

namespace samebits {
namespace {

class ThreadPool : public ::testing::Test {
 protected:
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = num_threads();
};

TEST_F(ThreadPool, EveryIndexIsVisitedExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    set_num_threads(threads);
    for (std::int64_t count : {1, 2, 3, 7, 8, 9, 31, 64, 100, 1000, 4099}) {
      for (std::int64_t grain : {1, 3, 16, 5000}) {
        std::vector<std::atomic<int>> visits(static_cast<std::size_t>(count));
        parallel_for(
            count,
            [&](std::int64_t begin, std::int64_t end) {
              ASSERT_LE(0, begin);
              ASSERT_LT(begin, end);
              ASSERT_LE(end, count);
              for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)].fetch_add(1);
            },
            grain);
        for (std::int64_t i = 0; i < count; ++i)
          ASSERT_EQ(visits[static_cast<std::size_t>(i)].load(), 1)
              << "index " << i << " of " << count << ", grain " << grain << ", " << threads << " threads";
      }
    }
  }
}

// grain_for_work: a region reading less than kMinBytesPerThread per thread runs on fewer threads, in even
// runs; one that pays for every thread keeps the pool's own balancing (grain 1).
TEST_F(ThreadPool, TheGrainForWorkGivesEachThreadEnoughBytes) {
  constexpr std::int64_t kb = 1024;
  set_num_threads(2);
  EXPECT_EQ(grain_for_work(8, 1 * kb), 8);   // 8 KiB in all: one thread
  EXPECT_EQ(grain_for_work(8, 12 * kb), 8);  // 96 KiB: still one
  EXPECT_EQ(grain_for_work(8, 16 * kb), 1);  // 128 KiB: both threads
  EXPECT_EQ(grain_for_work(1, 1), 1);
  EXPECT_EQ(grain_for_work(3, 0), 3);                                          // no bytes: one thread
  EXPECT_EQ(grain_for_work(std::int64_t{1} << 40, std::int64_t{1} << 40), 1);  // no overflow
  set_num_threads(5);
  EXPECT_EQ(grain_for_work(12, 16 * kb), 4);  // 192 KiB: three runs of 64 KiB
  EXPECT_EQ(grain_for_work(12, 24 * kb), 3);  // 288 KiB: four of the five threads
  EXPECT_EQ(grain_for_work(12, 64 * kb), 1);  // enough for all five
  set_num_threads(1);
  EXPECT_EQ(grain_for_work(8, 16 * kb), 1);  // one thread anyway
}

// What a region with that grain runs is observable: one range, on the caller, for small work, else one
// even range per thread the work pays for.
TEST_F(ThreadPool, SmallRegionsRunOnFewerThreads) {
  constexpr std::int64_t kb = 1024;
  struct Case {
    int threads;
    std::int64_t count, bytes, runs;
  };
  for (const Case& c : {Case{2, 8, 1 * kb, 1}, Case{2, 8, 12 * kb, 1}, Case{3, 8, 16 * kb, 2},
                        Case{5, 12, 16 * kb, 3}, Case{5, 12, 24 * kb, 4}}) {
    set_num_threads(c.threads);
    std::mutex mutex;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
    std::vector<std::thread::id> runners;
    parallel_for(
        c.count,
        [&](std::int64_t begin, std::int64_t end) {
          std::lock_guard<std::mutex> lock(mutex);
          ranges.emplace_back(begin, end);
          runners.push_back(std::this_thread::get_id());
        },
        grain_for_work(c.count, c.bytes));
    std::sort(ranges.begin(), ranges.end());
    ASSERT_EQ(static_cast<std::int64_t>(ranges.size()), c.runs)
        << c.count << " items of " << c.bytes << " bytes, " << c.threads << " threads";
    const std::int64_t grain = (c.count + c.runs - 1) / c.runs;
    for (std::int64_t r = 0; r < c.runs; ++r) {
      EXPECT_EQ(ranges[static_cast<std::size_t>(r)].first, r * grain);
      EXPECT_EQ(ranges[static_cast<std::size_t>(r)].second, std::min(c.count, (r + 1) * grain));
    }
    if (c.runs == 1) {
      EXPECT_EQ(runners.front(), std::this_thread::get_id());  // never handed to a worker
    }
  }
}

// A slow thread's run is finished by the others: the region still covers every index once.
TEST_F(ThreadPool, ADelayedRangeDoesNotLoseOrRepeatWork) {
  set_num_threads(3);
  const std::int64_t count = 96;
  std::vector<std::atomic<int>> visits(static_cast<std::size_t>(count));
  const auto caller = std::this_thread::get_id();
  parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
    if (std::this_thread::get_id() != caller) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)].fetch_add(1);
  });
  for (std::int64_t i = 0; i < count; ++i) ASSERT_EQ(visits[static_cast<std::size_t>(i)].load(), 1) << i;
}

// Thousands of tiny regions back to back, more threads than this machine has cores: helpers often arrive
// after the caller has taken every chunk and closed the round. Each region's data dies with it, so a
// helper that still touched a region after its caller returned would be a use after free (ASan) or a
// race (TSan); every index is still visited exactly once.
TEST_F(ThreadPool, ShortRegionsBackToBackIgnoreLateHelpers) {
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (int region = 0; region < 10000; ++region) {
      const std::int64_t count = 1 + region % 6;
      auto visits = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(count));
      parallel_for(
          count,
          [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)].fetch_add(1);
          },
          1);
      for (std::int64_t i = 0; i < count; ++i)
        ASSERT_EQ(visits[static_cast<std::size_t>(i)].load(), 1) << "region " << region << " index " << i;
    }
  }
}

TEST_F(ThreadPool, AnExceptionReachesTheCallerAndThePoolStaysUsable) {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_for(64,
                              [&](std::int64_t begin, std::int64_t end) {
                                ran.fetch_add(static_cast<int>(end - begin));
                                if (begin <= 40 && 40 < end) throw std::runtime_error("cell 40");
                              }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 64) << "every range still runs";
    std::atomic<std::int64_t> sum{0};
    parallel_for(1000, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) sum.fetch_add(i);
    });
    EXPECT_EQ(sum.load(), 999 * 1000 / 2);
  }
}

TEST_F(ThreadPool, NestedCallsRunOnTheirOwnThread) {
  set_num_threads(2);
  std::vector<std::atomic<int>> visits(16 * 16);
  parallel_for(16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const auto outer = std::this_thread::get_id();
      parallel_for(16, [&](std::int64_t b, std::int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        for (std::int64_t j = b; j < e; ++j) visits[static_cast<std::size_t>(i * 16 + j)].fetch_add(1);
      });
    }
  });
  for (auto& v : visits) EXPECT_EQ(v.load(), 1);
}

// Several callers at once (one model shared by threads): each region still covers its own range once.
TEST_F(ThreadPool, ConcurrentCallersEachGetTheirWholeRange) {
  set_num_threads(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int round = 0; round < 200; ++round) {
        const std::int64_t count = 50 + c * 7 + round % 13;
        std::vector<std::atomic<int>> visits(static_cast<std::size_t>(count));
        parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t i = begin; i < end; ++i) visits[static_cast<std::size_t>(i)].fetch_add(1);
        });
        for (auto& v : visits)
          if (v.load() != 1) wrong.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace samebits
