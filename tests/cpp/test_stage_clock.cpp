// The stage clock behind the benchmarks' forward split: the outermost scope owns the time, nested and
// concurrent scopes record nothing, it records nothing while off, and turning it on changes no bit of a
// Mamba-3 forward (whose in_proj GEMMs and scan are timed scopes).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "blocks/mamba3/mamba3.hpp"
#include "core/stage_clock.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using stage_clock::Scope;
using stage_clock::Stage;

void spin_for_a_while() {
  volatile double sink = 0.0;
  for (int i = 0; i < 200000; ++i) sink = sink + 1.0;
}

TEST(StageClock, OffRecordsNothing) {
  stage_clock::enable(true);
  stage_clock::enable(false);
  {
    const Scope scope(Stage::kScan);
    spin_for_a_while();
  }
  for (double seconds : stage_clock::totals()) EXPECT_EQ(seconds, 0.0);
}

TEST(StageClock, OutermostScopeOwnsTheTime) {
  stage_clock::enable(true);
  {
    const Scope outer(Stage::kScan);
    spin_for_a_while();
    const Scope inner(Stage::kProjection);  // inside a scan: the scan's time
    spin_for_a_while();
    std::thread other([] {
      const Scope elsewhere(Stage::kAttention);  // another thread while a scope is open: not timed
      spin_for_a_while();
    });
    other.join();
  }
  {
    const Scope later(Stage::kProjection);  // once the scan closed, a projection times again
    spin_for_a_while();
  }
  const auto totals = stage_clock::totals();
  stage_clock::enable(false);
  EXPECT_GT(totals[static_cast<int>(Stage::kScan)], 0.0);
  EXPECT_GT(totals[static_cast<int>(Stage::kProjection)], 0.0);
  EXPECT_EQ(totals[static_cast<int>(Stage::kAttention)], 0.0);
}

TEST(StageClock, ForwardBitsDoNotDependOnIt) {
  const std::int64_t d_model = 128, B = 2, L = 70;
  const auto specs = blocks::mamba3_tensors(blocks::Mamba3Dims::of(d_model));
  blocks::Mamba3Weights w;
  for (int i = 0; i < blocks::kMamba3TensorCount; ++i) {
    w.tensors[i] = testing::Rng(40 + i).uniform_vector(static_cast<std::size_t>(specs[i].elements()), 0.125f);
    if (i == 0 || i == 3 || i == 4)
      for (float& v : w.tensors[i]) v += 1.0f;
  }
  const blocks::Mamba3Block block(std::move(w));
  const std::vector<float> x =
      testing::Rng(7).uniform_vector(static_cast<std::size_t>(B * L * d_model), 2.0f);
  auto run = [&](bool clocked) {
    stage_clock::enable(clocked);
    blocks::Mamba3State state = block.allocate_state(B);
    std::vector<float> y(x.size());
    block.forward(x.data(), B, L, state, y.data());
    stage_clock::enable(false);
    return y;
  };
  const std::vector<float> plain = run(false), clocked = run(true);
  EXPECT_EQ(std::memcmp(plain.data(), clocked.data(), plain.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace samebits
