// SambaInference through the public C++ header: step == forward, clone() forks a sequence, ragged batches,
// step_many == each state stepped alone, refusals that leave the state untouched.
#include <gtest/gtest.h>

#include <samebits/samebits.hpp>
#include <vector>

#include "numerics/fp.hpp"
#include "test_samba_support.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

SambaInference small_model() {
  const models::SambaConfig config(
      testing::samba_args(48, 32, {"attention", "mamba3", "attention"}, 4, 40, false, 2));
  return SambaInference(config, testing::samba_parameters(config, 21, 0.08f));
}

std::vector<std::int32_t> ids_of(std::int64_t count, std::uint64_t seed) {
  testing::Rng rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.next() % 48);
  return ids;
}

TEST(SambaApi, StepEqualsForwardAndCloneForks) {
  const SambaInference model = small_model();
  const std::int64_t length = 20;
  const auto ids = ids_of(length, 1);
  const auto full = model.forward({ids.data(), 1, length});
  SambaState state = model.allocate_state(1, length);
  model.forward({ids.data(), 1, 8}, state);
  SambaState fork = state.clone();
  for (std::int64_t t = 8; t < length; ++t) {
    const auto out = model.step({&ids[static_cast<std::size_t>(t)], 1, 1}, fork);
    ASSERT_EQ(testing::first_difference(out.data(), full.data() + t * 48, 48), -1) << "position " << t;
  }
  // The original state did not move: continuing it gives the same bits again.
  const auto rest = model.forward({ids.data() + 8, 1, length - 8}, state);
  ASSERT_EQ(testing::first_difference(rest.data(), full.data() + 8 * 48, (length - 8) * 48), -1);
  EXPECT_EQ(model.forward_reference({ids.data(), 1, length}), full);
}

TEST(SambaApi, RaggedRowsEqualRowsAlone) {
  const SambaInference model = small_model();
  const std::int64_t batch = 3, length = 12;
  auto ids = ids_of(batch * length, 2);
  const std::vector<std::int64_t> lengths{12, 5, 1};
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = lengths[b]; t < length; ++t) ids[b * length + t] = 9999;  // junk is tolerated
  const auto ragged = model.forward_ragged({ids.data(), batch, length}, lengths);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto alone = model.forward({ids.data() + b * length, 1, lengths[b]});
    ASSERT_EQ(testing::first_difference(alone.data(), ragged.data() + b * length * 48, lengths[b] * 48), -1);
    for (std::int64_t i = (b * length + lengths[b]) * 48; i < (b + 1) * length * 48; ++i)
      ASSERT_EQ(fp::bits(ragged[static_cast<std::size_t>(i)]), 0u);
  }
}

TEST(SambaApi, StepManyEqualsEachStateSteppedAlone) {
  const SambaInference model = small_model();
  const auto ids = ids_of(40, 3);
  // Three sequences at positions 2, 9 and 5, and a copy of each stepped alone.
  std::vector<SambaState> together, alone;
  for (std::int64_t fed : {2, 9, 5}) {
    together.push_back(model.allocate_state(1, 16));
    model.forward({ids.data(), 1, fed}, together.back());
    alone.push_back(together.back().clone());
  }
  std::vector<SambaState*> states{&together[0], &together[1], &together[2]};
  for (std::int64_t round = 0; round < 3; ++round) {
    const std::vector<std::int32_t> next{ids[20 + round], ids[25 + round], ids[30 + round]};
    const auto rows = model.step_many(next, states);
    for (std::size_t i = 0; i < 3; ++i) {
      const auto row = model.step({&next[i], 1, 1}, alone[i]);
      ASSERT_EQ(testing::first_difference(row.data(), rows.data() + i * 48, 48), -1) << round << " " << i;
    }
  }
  EXPECT_THROW(model.step_many({1, 2}, {states[0], states[0]}), Error);
  EXPECT_THROW(model.step_many({1}, states), Error);
}

TEST(SambaApi, RefusalsLeaveTheStateUnchanged) {
  const SambaInference model = small_model();
  const auto ids = ids_of(6, 3);
  SambaState state = model.allocate_state(1, 6);
  model.forward({ids.data(), 1, 4}, state);
  const SambaState before = state.clone();
  auto same = [&](const SambaState& a, const SambaState& b) {
    for (std::int64_t i = 0; i < a.layer_count(); ++i) {
      if (a.attention(i)) {
        if (a.attention(i)->cached_tokens() != b.attention(i)->cached_tokens()) return false;
        if (testing::first_difference(a.attention(i)->v_cache_copy().data(),
                                      b.attention(i)->v_cache_copy().data(),
                                      a.attention(i)->cache_floats()) != -1)
          return false;
      }
    }
    return true;
  };
  const std::vector<std::int32_t> bad{1, 48};
  EXPECT_THROW(model.forward({bad.data(), 1, 2}, state), Error);  // id out of range
  EXPECT_THROW(model.forward({ids.data(), 1, 3}, state), Error);  // 4 + 3 > max_tokens
  EXPECT_THROW(model.step({ids.data(), 1, 2}, state), Error);     // L != 1
  SambaState other = model.allocate_state(2, 6);
  EXPECT_THROW(model.forward({ids.data(), 1, 1}, other), Error);  // batch mismatch
  EXPECT_TRUE(same(state, before));
  EXPECT_THROW(model.allocate_state(0, 3), Error);
  EXPECT_THROW(model.forward_ragged({ids.data(), 2, 3}, {1, 4}), Error);  // length above L
}

}  // namespace
}  // namespace samebits
