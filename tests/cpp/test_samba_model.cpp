// The Samba stack at the models layer: fast == twin, step == forward, split == whole, rows independent.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "models/samba.hpp"
#include "test_samba_support.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using models::SambaConfig;
using models::SambaConfigArgs;
using models::SambaLayerKind;
using testing::Rng;

SambaConfig small_config(bool tied) {
  return SambaConfig(testing::samba_args(64, 32, {"mamba3", "attention"}, 2, 64, tied));
}

// Weights uniform in [-0.05, 0.05), every norm weight ones (as upstream's step_vs_full check builds them).
std::vector<float> small_parameters(const SambaConfig& config, std::uint64_t seed) {
  return testing::samba_parameters(config, seed, 0.05f);
}

// Owned per-layer states for one batch.
struct States {
  std::vector<std::unique_ptr<blocks::Mamba3State>> mamba;
  std::vector<AlignedBuffer<float>> k, v;
  std::vector<blocks::KvCache> kv;
  std::vector<models::SambaLayerState> refs;

  States(const models::SambaModel& model, std::int64_t batch, std::int64_t max_tokens) {
    const auto n = static_cast<std::size_t>(model.layer_count());
    mamba.resize(n);
    k.resize(n);
    v.resize(n);
    kv.resize(n);
    refs.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (model.layer_kind(static_cast<std::int64_t>(i)) == SambaLayerKind::Mamba3) {
        mamba[i] = std::make_unique<blocks::Mamba3State>(
            model.mamba3(static_cast<std::int64_t>(i)).allocate_state(batch));
        refs[i].mamba3 = mamba[i].get();
      } else {
        const auto& dims = model.attention(static_cast<std::int64_t>(i)).dims();
        kv[i].batch = batch;
        kv[i].max_tokens = max_tokens;
        const std::int64_t floats = kv[i].floats(dims);
        k[i].assign_zero(static_cast<std::size_t>(floats));
        v[i].assign_zero(static_cast<std::size_t>(floats));
        kv[i].k = k[i].data();
        kv[i].v = v[i].data();
        refs[i].kv = &kv[i];
      }
    }
  }
};

std::vector<std::int32_t> random_ids(std::int64_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.next() % 64);
  return ids;
}

std::vector<float> run(const models::SambaModel& model, const std::vector<std::int32_t>& ids,
                       std::int64_t batch, std::int64_t length, bool reference = false) {
  States states(model, batch, length);
  std::vector<float> logits(static_cast<std::size_t>(batch * length * 64));
  if (reference)
    model.forward_reference(ids.data(), batch, length, states.refs, logits.data(), "test");
  else
    model.forward(ids.data(), batch, length, states.refs, logits.data(), "test");
  return logits;
}

TEST(SambaModel, FastEqualsTwinOnEveryTargetAndThreadCount) {
  for (bool tied : {true, false}) {
    const SambaConfig config = small_config(tied);
    const models::SambaModel model(config, small_parameters(config, tied ? 5 : 6));
    const auto ids = random_ids(2 * 70, 7);
    const auto want = run(model, ids, 2, 70, true);
    testing::for_each_target_and_threads([&](const std::string& where) {
      ASSERT_TRUE(testing::same_bits(want, run(model, ids, 2, 70))) << where << " tied=" << tied;
    });
  }
}

TEST(SambaModel, StepEqualsForwardAndSplitEqualsWhole) {
  const SambaConfig config = small_config(true);
  const models::SambaModel model(config, small_parameters(config, 8));
  const std::int64_t batch = 2, length = 70;  // crosses the Mamba-3 chunk of 64
  const auto ids = random_ids(batch * length, 9);
  const auto full = run(model, ids, batch, length);
  States states(model, batch, length);
  std::vector<float> step(static_cast<std::size_t>(batch * 64));
  for (std::int64_t t = 0; t < length; ++t) {
    std::vector<std::int32_t> column(static_cast<std::size_t>(batch));
    for (std::int64_t b = 0; b < batch; ++b) column[b] = ids[b * length + t];
    model.forward(column.data(), batch, 1, states.refs, step.data(), "test");
    for (std::int64_t b = 0; b < batch; ++b)
      ASSERT_EQ(testing::first_difference(step.data() + b * 64, full.data() + (b * length + t) * 64, 64), -1)
          << "position " << t << " row " << b;
  }
  // 5 + 65 tokens through two stateful forwards.
  States split(model, batch, length);
  for (auto [start, count] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 65}}) {
    std::vector<std::int32_t> part;
    for (std::int64_t b = 0; b < batch; ++b)
      part.insert(part.end(), ids.begin() + b * length + start, ids.begin() + b * length + start + count);
    std::vector<float> out(static_cast<std::size_t>(batch * count * 64));
    model.forward(part.data(), batch, count, split.refs, out.data(), "test");
    for (std::int64_t b = 0; b < batch; ++b)
      ASSERT_EQ(testing::first_difference(out.data() + b * count * 64,
                                          full.data() + (b * length + start) * 64, count * 64),
                -1)
          << "split at " << start << " row " << b;
  }
}

TEST(SambaModel, RowAloneEqualsRowInBatch) {
  const SambaConfig config = small_config(false);
  const models::SambaModel model(config, small_parameters(config, 10));
  const std::int64_t batch = 3, length = 20;
  const auto ids = random_ids(batch * length, 11);
  const auto all = run(model, ids, batch, length);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::vector<std::int32_t> row(ids.begin() + b * length, ids.begin() + (b + 1) * length);
    const auto alone = run(model, row, 1, length);
    ASSERT_EQ(testing::first_difference(alone.data(), all.data() + b * length * 64, length * 64), -1)
        << "row " << b;
  }
}

}  // namespace
}  // namespace samebits
