// scratch::Scope / scratch::Buffer: inside a scope a released buffer is handed out again (the same memory,
// best fit by size), nested scopes keep it until the outermost closes, and without a scope nothing is kept.
#include <gtest/gtest.h>

#include <thread>

#include "core/scratch.hpp"

namespace samebits::scratch {
namespace {

TEST(Scratch, WithoutScopeNothingIsKept) {
  { Buffer b(1000); }
  EXPECT_EQ(kept_count(), 0u);
}

TEST(Scratch, ScopeHandsReleasedMemoryOutAgain) {
  const Scope scope;
  const float* first = nullptr;
  {
    Buffer b(1 << 20);
    first = b.data();
    b.data()[0] = 1.0f;
  }
  EXPECT_EQ(kept_count(), 1u);
  Buffer again(1 << 19);  // smaller: the kept buffer fits
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(kept_count(), 0u);
}

TEST(Scratch, BestFitLeavesTheBigBufferForTheBigRequest) {
  const Scope scope;
  const float* small = nullptr;
  const float* big = nullptr;
  {
    Buffer a(1000);
    Buffer b(100000);
    small = a.data();
    big = b.data();
  }
  EXPECT_EQ(kept_count(), 2u);
  Buffer fits_small(900);
  EXPECT_EQ(fits_small.data(), small);
  Buffer fits_big(100000);
  EXPECT_EQ(fits_big.data(), big);
  Buffer too_big(200000);  // nothing kept fits: fresh memory
  EXPECT_NE(too_big.data(), small);
  EXPECT_NE(too_big.data(), big);
}

TEST(Scratch, OutermostScopeFreesAndThreadsKeepTheirOwn) {
  {
    const Scope outer;
    {
      const Scope inner;
      { Buffer b(4096); }
    }
    EXPECT_EQ(kept_count(), 1u);  // the outer scope still holds it
    std::thread other([] { EXPECT_EQ(kept_count(), 0u); });
    other.join();
  }
  EXPECT_EQ(kept_count(), 0u);
}

TEST(Scratch, EmptyBufferTakesNothing) {
  const Scope scope;
  { Buffer b(64); }
  Buffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(kept_count(), 1u);
}

}  // namespace
}  // namespace samebits::scratch
