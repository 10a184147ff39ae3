// parallel_for's contract: every index of [0, count) is visited exactly once whatever the count, grain
// and thread count (each thread starts on its own run of chunks and then takes what is left of the
// others'), a body's exception reaches the caller after the region ends, and nested calls run serially.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
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
