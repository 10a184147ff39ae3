// Mamba1BlockInference: the recorded upstream digests (hashed fixtures), fast == literal twin on every
// target and thread count, the state guarantees (step == forward, split == whole, row alone == batch),
// planted subnormals, and every refusal with upstream's wording.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "numerics/fp.hpp"
#include "test_mamba_support.hpp"

namespace samebits {
namespace {

using testing::Rng;
using testing::WeightSet;

blocks::Mamba1Dims dims_of(std::int64_t d_model) { return blocks::Mamba1Dims::for_d_model(d_model); }

WeightSet golden_weights() {
  return testing::golden_lane("mamba1", blocks::mamba1_tensors(dims_of(32)), {"norm.weight"});
}

using testing::digest;

TEST(Mamba1Golden, LaneWeightsMatchTheRecordedDigest) {
  WeightSet w = golden_weights();
  EXPECT_EQ(digest(w["in_proj.weight"], {128, 32}), "02cc7a74dd8ba699");
}

TEST(Mamba1Golden, HashedHeldOutForwardFastTwinAndDecode) {
  const WeightSet w = golden_weights();
  const Mamba1BlockInference block(w.views());
  const std::vector<float> x = testing::hashed_slab(1, 1024);
  EXPECT_EQ(digest(x, {2, 16, 32}), "803a93350f7ea51b");
  // Fast, twin and token by token from a fresh state give the same bytes (docs/goldens.md §6).
  testing::expect_forward_twin_and_decode(block, x, "b2e6c1006bf3a5ce");
}

TEST(Mamba1Golden, HashedTrainingDecodeStep) {
  const Mamba1BlockInference block(golden_weights().views());
  const std::vector<float> x = testing::hashed_slab(0, 1024);
  EXPECT_EQ(digest(x, {2, 16, 32}), "c27efc5113530683");
  for (bool reference : {false, true}) {
    Mamba1State state = block.allocate_state(2);
    const TensorView xv{x.data(), {2, 16, 32}};
    if (reference)
      block.forward_reference(xv, &state);
    else
      block.forward(xv, &state);
    const std::vector<float> x0 = testing::time_slice(x, 2, 16, 32, 0, 1);
    const TensorView x0v{x0.data(), {2, 1, 32}};
    const std::vector<float> y = reference ? block.step_reference(x0v, &state) : block.step(x0v, &state);
    EXPECT_EQ(digest(y, {2, 1, 32}), "b0304f6d0a3d4432") << "reference=" << reference;
  }
}

// Runs forward from a carried, non-zero state on both paths and compares outputs and states.
void expect_fast_equals_twin(const Mamba1BlockInference& block, std::int64_t B, std::int64_t L, Rng& rng,
                             float scale) {
  const std::int64_t dm = block.d_model();
  Mamba1State warm = block.allocate_state(B);
  const std::vector<float> x0 = rng.uniform_vector(static_cast<std::size_t>(B * 3 * dm), scale);
  block.forward_reference({x0.data(), {B, 3, dm}}, &warm);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(B * L * dm), scale);
  Mamba1State twin_state = warm.clone();
  const std::vector<float> want = block.forward_reference({x.data(), {B, L, dm}}, &twin_state);
  testing::for_each_target_and_threads([&](const std::string& where) {
    Mamba1State state = warm.clone();
    const std::vector<float> got = block.forward({x.data(), {B, L, dm}}, &state);
    ASSERT_TRUE(testing::same_bits(want, got)) << "B=" << B << " L=" << L << " dm=" << dm << " " << where;
    ASSERT_EQ(testing::first_difference(state.h(), twin_state.h(), state.h_size()), -1) << where;
    ASSERT_EQ(
        testing::first_difference(state.conv_window(), twin_state.conv_window(), state.conv_window_size()),
        -1)
        << where;
  });
}

TEST(Mamba1Bits, FastEqualsTwinOverSizesTargetsAndThreads) {
  Rng rng(11);
  // 72: d_inner 144 spans two conv channel blocks and three scan groups, the last one ragged.
  for (std::int64_t dm : {1, 8, 12, 16, 24, 40, 72}) {
    const Mamba1BlockInference block(
        testing::random_weights(blocks::mamba1_tensors(dims_of(dm)), 100 + dm).views());
    for (std::int64_t B : {1, 3})
      for (std::int64_t L : {1, 2, 5, 19}) expect_fast_equals_twin(block, B, L, rng, 2.0f);
  }
}

TEST(Mamba1Bits, FastEqualsTwinWithPlantedSubnormals) {
  // Subnormal inputs, weights and state cells must be flushed at exactly the twin's seams; tiny scales
  // push intermediate products (dB, dBu, h) through the subnormal range.
  const std::int64_t dm = 16;
  WeightSet w = testing::random_weights(blocks::mamba1_tensors(dims_of(dm)), 7);
  const float tiny = fp::from_bits(0x00000005u);
  w["in_proj.weight"][3] = tiny;
  w["conv1d.weight"][1] = -tiny;
  w["conv1d.bias"][2] = fp::from_bits(0x80400000u);
  w["x_proj.weight"][5] = tiny;
  w["D"][0] = -tiny;
  w["out_proj.weight"][9] = 1e-38f;
  // softplus(-87) is about 1.6e-38, so dB = MUL(dl, B) lands in the subnormal range and must flush.
  for (std::size_t d = 0; d < w["dt_proj.bias"].size(); ++d)
    w["dt_proj.bias"][d] = d % 3 == 0 ? -87.0f : d % 3 == 1 ? -30.0f : 0.0f;
  const std::int64_t rank = dims_of(dm).dt_rank;
  for (std::size_t d = 0; d < w["dt_proj.bias"].size(); d += 3)
    for (std::int64_t j = 0; j < rank; ++j)
      w["dt_proj.weight"][d * rank + j] = 0.0f;  // delta = softplus(bias)
  // Large u on those channels lifts an unflushed subnormal dB back into the normal range in dBu.
  for (std::size_t d = 3; d < w["conv1d.bias"].size(); d += 3) w["conv1d.bias"][d] = 60.0f;
  const Mamba1BlockInference block(w.views());
  Rng rng(8);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(2 * 9 * dm), 1e-19f);
    x[0] = tiny;
    x[7] = -tiny;
    x[20] = fp::from_bits(0x807FFFFFu);
    Mamba1State base = block.allocate_state(2);
    base.pin_h().data()[1] = tiny;
    base.pin_h().data()[40] = 1e-38f;
    base.pin_conv_window().data()[2] = -tiny;
    Mamba1State twin_state = base.clone();
    const std::vector<float> want = block.forward_reference({x.data(), {2, 9, dm}}, &twin_state);
    testing::for_each_target_and_threads([&](const std::string& where) {
      Mamba1State state = base.clone();
      const std::vector<float> got = block.forward({x.data(), {2, 9, dm}}, &state);
      ASSERT_TRUE(testing::same_bits(want, got)) << where;
      ASSERT_EQ(testing::first_difference(state.h(), twin_state.h(), state.h_size()), -1) << where;
    });
  }
}

TEST(Mamba1State, StepEqualsForwardSplitEqualsWholeRowsAreIndependent) {
  const std::int64_t dm = 32, B = 3, L = 23;
  const Mamba1BlockInference block(testing::random_weights(blocks::mamba1_tensors(dims_of(dm)), 5).views());
  Rng rng(6);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(B * L * dm), 2.0f);
  const std::vector<float> whole = block.forward({x.data(), {B, L, dm}});

  // Token by token, on both the (B, 1, d) and the (B, d) spelling.
  Mamba1State state = block.allocate_state(B);
  for (std::int64_t t = 0; t < L; ++t) {
    const std::vector<float> xt = testing::time_slice(x, B, L, dm, t, 1);
    const std::vector<float> yt =
        t % 2 ? block.step({xt.data(), {B, 1, dm}}, &state) : block.step({xt.data(), {B, dm}}, &state);
    ASSERT_TRUE(testing::same_bits(yt, testing::time_slice(whole, B, L, dm, t, 1))) << "position " << t;
  }

  // Splits: 5 + 7 + steps + the rest.
  Mamba1State split = block.allocate_state(B);
  std::vector<float> pieces(whole.size());
  std::int64_t t0 = 0;
  for (std::int64_t len : {5, 7, 1, 1, 9}) {
    const std::vector<float> part = testing::time_slice(x, B, L, dm, t0, len);
    const std::vector<float> y = len == 1 ? block.step({part.data(), {B, 1, dm}}, &split)
                                          : block.forward({part.data(), {B, len, dm}}, &split);
    testing::put_time_slice(pieces, y, B, L, dm, t0, len);
    t0 += len;
  }
  ASSERT_EQ(t0, L);
  EXPECT_TRUE(testing::same_bits(pieces, whole));
  EXPECT_EQ(testing::first_difference(split.h(), state.h(), state.h_size()), -1);

  // Each row alone, and prefixes.
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<float> row = testing::batch_slice(x, L, dm, b, 1);
    EXPECT_TRUE(testing::same_bits(block.forward({row.data(), {1, L, dm}}),
                                   testing::batch_slice(whole, L, dm, b, 1)));
  }
  for (std::int64_t n : {1, 7, 22}) {
    const std::vector<float> prefix = testing::time_slice(x, B, L, dm, 0, n);
    EXPECT_TRUE(testing::same_bits(block.forward({prefix.data(), {B, n, dm}}),
                                   testing::time_slice(whole, B, L, dm, 0, n)));
  }
  // Stateless forward never changes a state it is not given; repeat calls agree.
  EXPECT_TRUE(testing::same_bits(block.forward({x.data(), {B, L, dm}}), whole));
}

TEST(Mamba1State, ConvWindowIsTheLastFourRawInputsOldestFirst) {
  const std::int64_t dm = 8;
  const Mamba1BlockInference block(testing::random_weights(blocks::mamba1_tensors(dims_of(dm)), 9).views());
  Rng rng(10);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(2 * dm), 1.0f);
  Mamba1State state = block.allocate_state(1);
  block.forward({x.data(), {1, 2, dm}}, &state);
  // After two tokens the two oldest window entries are still the zeros of the fresh state.
  for (std::int64_t d = 0; d < block.d_inner(); ++d) {
    EXPECT_EQ(fp::bits(state.conv_window()[d * 4 + 0]), 0u);
    EXPECT_EQ(fp::bits(state.conv_window()[d * 4 + 1]), 0u);
    EXPECT_NE(fp::bits(state.conv_window()[d * 4 + 3]), 0u);
  }
}

TEST(Mamba1Refusals, WeightsStateAndInputsWithUpstreamWording) {
  using testing::error_of;
  using testing::value_error_of;
  const std::int64_t dm = 16;
  WeightSet w = testing::random_weights(blocks::mamba1_tensors(dims_of(dm)), 3);
  // Key set.
  NamedTensors missing = w.views();
  missing.erase(missing.begin() + 3);
  missing.push_back({"bogus", missing[0].second});
  EXPECT_EQ(
      value_error_of([&] { Mamba1BlockInference b(missing); }),
      "samebits Mamba1Block: weight dict mismatch; missing ['conv1d.bias']; unknown ['bogus']. The exact key "
      "set "
      "is ['norm.weight', 'in_proj.weight', 'conv1d.weight', 'conv1d.bias', 'x_proj.weight', "
      "'dt_proj.weight', "
      "'dt_proj.bias', 'A_log', 'D', 'out_proj.weight'] -- the upstream (PyTorch-style) parameter names");
  // norm rank, shapes (with the conv's alternative spelling).
  NamedTensors bad = w.views();
  bad[0].second.shape = {4, 4};
  EXPECT_EQ(value_error_of([&] { Mamba1BlockInference b(bad); }),
            "samebits Mamba1Block: norm.weight must be 1-D (d_model,), got shape (4, 4)");
  bad = w.views();
  bad[1].second.shape = {16, 64};
  EXPECT_EQ(value_error_of([&] { Mamba1BlockInference b(bad); }),
            "samebits Mamba1Block: in_proj.weight has shape (16, 64), want (64, 16)");
  bad = w.views();
  bad[2].second.shape = {32, 4, 1};
  EXPECT_EQ(value_error_of([&] { Mamba1BlockInference b(bad); }),
            "samebits Mamba1Block: conv1d.weight has shape (32, 4, 1), want (32, 1, 4) (or (32, 4))");
  NamedTensors squeezed = w.views();
  squeezed[2].second.shape = {32, 4};
  const Mamba1BlockInference alt(squeezed);
  const Mamba1BlockInference block(w.views());

  std::vector<float> x(2 * 4 * dm, 0.5f);
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {8, dm}});
            }),
            "samebits Mamba1Block.forward: x must be (B, L, d_model), got 2-D shape (8, 16)");
  Mamba1State state = block.allocate_state(2);
  EXPECT_EQ(value_error_of([&] {
              block.step({x.data(), {128}}, &state);
            }),
            "samebits Mamba1Block.step: x must be (B, L, d_model) -- or (B, d_model) for a step --, got 1-D "
            "shape (128,)");
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {2, 8, 8}});
            }),
            "samebits Mamba1Block.forward: x has d_model 8, the weights have 16");
  EXPECT_EQ(value_error_of([&] {
              block.step({x.data(), {2, 4, dm}}, &state);
            }),
            "samebits Mamba1Block.step: a decode step takes exactly one token per batch row, got L = 4; use "
            "forward() "
            "for prefill");
  EXPECT_EQ(value_error_of([&] {
              block.step({x.data(), {2, 1, dm}}, nullptr);
            }),
            "samebits Mamba1Block.step: state is required (a decode step continues a sequence; "
            "allocate_state(B) makes "
            "the fresh one)");
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {0, 4, dm}});
            }),
            "samebits Mamba1Block.forward: B and L must be positive");
  Mamba1State three = block.allocate_state(3);
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {2, 4, dm}}, &three);
            }),
            "samebits Mamba1Block.forward: state buffer conv_window has shape (3, 32, 4), want (2, 32, 4)");
  EXPECT_EQ(value_error_of([&] { block.allocate_state(0); }),
            "samebits Mamba1Block: batch_size must be positive, got 0");
  EXPECT_EQ(
      error_of([&] { block.backward(); }, ErrorKind::NotImplemented),
      "samebits Mamba1BlockInference.backward: inference is forward only; the backward pass runs on the GPU "
      "block class over a training binding");

  // Non-finite data: x first, then weights, then the state; nothing changes before the refusal.
  x[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {2, 4, dm}}, &state);
            }),
            "mamba1_forward: NaN in x at flat index 5 REFUSED");
  x[5] = 0.5f;
  state.pin_h().data()[17] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(value_error_of([&] {
              block.step({x.data(), {2, dm}}, &state);
            }),
            "mamba1_decode_step: infinity in h at flat index 17 REFUSED");
  state.pin_h().data()[17] = 0.0f;
  WeightSet nan_weights = w;
  nan_weights["dt_proj.bias"][4] = std::numeric_limits<float>::infinity();
  const Mamba1BlockInference bad_block(nan_weights.views());  // constructing is fine, as upstream
  EXPECT_EQ(value_error_of([&] {
              bad_block.forward({x.data(), {2, 4, dm}});
            }),
            "mamba1_forward: infinity in dt_proj.bias at flat index 4 REFUSED");
  EXPECT_TRUE(testing::same_bits(alt.forward({x.data(), {2, 4, dm}}), block.forward({x.data(), {2, 4, dm}})));
}

TEST(Mamba1Weights, AreCopiedAtConstruction) {
  const std::int64_t dm = 8;
  WeightSet w = testing::random_weights(blocks::mamba1_tensors(dims_of(dm)), 4);
  const Mamba1BlockInference block(w.views());
  std::vector<float> x(3 * dm, 0.25f);
  const std::vector<float> before = block.forward({x.data(), {1, 3, dm}});
  for (auto& v : w.values)
    for (float& e : v) e = 0.0f;
  EXPECT_TRUE(testing::same_bits(block.forward({x.data(), {1, 3, dm}}), before));
}

}  // namespace
}  // namespace samebits
