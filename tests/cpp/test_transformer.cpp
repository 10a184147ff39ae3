// TransformerBlock bit guarantees: fast == scalar twin (every SIMD target, 1/2/3 threads, stateless and
// carried), step == forward at every position, split == whole, row alone == batch row, prefix == prefix,
// ragged rows == rows alone with +0.0 padding; windows 0 and 8, n_kv_heads in {n_heads, n_heads/2, 1}.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "numerics/fp.hpp"
#include "test_transformer_support.hpp"

namespace samebits {
namespace {

using testing::BlockShape;
using testing::first_difference;
using testing::make_block;
using testing::random_tokens;

std::int64_t diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -2;
  return first_difference(a.data(), b.data(), static_cast<std::int64_t>(a.size()));
}

std::vector<float> state_bytes(const TransformerState& s) {
  std::vector<float> out = s.k_cache_copy();
  const std::vector<float> v = s.v_cache_copy();
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

const std::vector<BlockShape>& shapes() {
  static const std::vector<BlockShape> all{
      {32, 4, 4, 48, 0},  {32, 4, 2, 48, 0}, {32, 4, 1, 48, 0}, {32, 4, 4, 48, 8},
      {32, 4, 2, 48, 8},  {32, 4, 1, 48, 8}, {32, 2, 1, 64, 0},  // the golden lanes' shape (head_dim 16)
      {48, 2, 1, 300, 3},  // head_dim 24 (vector tails), k = 300 down projection (3 leaves)
      {160, 2, 2, 40, 0},  // k = 160 projections (2 leaves), head_dim 80
  };
  return all;
}

TEST(Transformer, FastEqualsTwinEveryTargetAndThreadCount) {
  std::uint64_t seed = 100;
  for (const BlockShape& shape : shapes()) {
    const TransformerBlockInference block = make_block(shape, seed++);
    for (std::int64_t length : {1, 12, 40}) {
      const std::int64_t batch = 2;
      const std::vector<float> x = random_tokens(batch, length, shape.d_model, seed++);
      const TensorView view{x.data(), {batch, length, shape.d_model}};
      const std::vector<float> want = block.forward_reference(view);
      testing::for_each_target_and_threads([&](const std::string& where) {
        EXPECT_EQ(diff(want, block.forward(view)), -1) << shape.label() << " L " << length << " " << where;
      });
    }
    // Carried: a prefill of 5 then 7 more, fast against twin, outputs and the whole state buffers.
    const std::int64_t batch = 2;
    const std::vector<float> x = random_tokens(batch, 12, shape.d_model, seed++);
    std::vector<float> first, rest;  // each row's 12 tokens split into 5 + 7
    for (std::int64_t b = 0; b < batch; ++b) {
      const float* row = x.data() + b * 12 * shape.d_model;
      first.insert(first.end(), row, row + 5 * shape.d_model);
      rest.insert(rest.end(), row + 5 * shape.d_model, row + 12 * shape.d_model);
    }
    TransformerState fast = block.allocate_state(batch, 20);
    TransformerState twin = block.allocate_state(batch, 20);
    for (const auto* part : {&first, &rest}) {
      const std::int64_t length = static_cast<std::int64_t>(part->size()) / (batch * shape.d_model);
      const TensorView view{part->data(), {batch, length, shape.d_model}};
      const std::vector<float> got = block.forward(view, fast);
      const std::vector<float> want = block.forward_reference(view, twin, false);
      EXPECT_EQ(diff(want, got), -1) << shape.label() << " carried L " << length;
      EXPECT_EQ(diff(state_bytes(twin), state_bytes(fast)), -1)
          << shape.label() << " state after L " << length;
      EXPECT_EQ(fast.cached_tokens(), twin.cached_tokens());
    }
  }
}

// Decoding token by token equals the one-shot forward at every position; splits likewise.
TEST(Transformer, StepAndSplitsEqualTheWholeForward) {
  std::uint64_t seed = 200;
  for (const BlockShape& shape : shapes()) {
    const TransformerBlockInference block = make_block(shape, seed++);
    const std::int64_t batch = 2, length = 12, dm = shape.d_model;
    const std::vector<float> x = random_tokens(batch, length, dm, seed++);
    const std::vector<float> whole = block.forward(TensorView{x.data(), {batch, length, dm}});
    auto tokens = [&](std::int64_t from, std::int64_t count) {
      std::vector<float> part;
      for (std::int64_t b = 0; b < batch; ++b)
        part.insert(part.end(), x.begin() + (b * length + from) * dm,
                    x.begin() + (b * length + from + count) * dm);
      return part;
    };
    auto expect_positions = [&](const std::vector<float>& got, std::int64_t from, std::int64_t count,
                                const std::string& label) {
      for (std::int64_t b = 0; b < batch; ++b)
        EXPECT_EQ(std::memcmp(got.data() + b * count * dm, whole.data() + (b * length + from) * dm,
                              static_cast<std::size_t>(count * dm) * sizeof(float)),
                  0)
            << shape.label() << " " << label << " row " << b << " from " << from;
    };
    // Steps, in both input ranks.
    for (bool two_d : {false, true}) {
      TransformerState state = block.allocate_state(batch, length);
      for (std::int64_t t = 0; t < length; ++t) {
        const std::vector<float> token = tokens(t, 1);
        const TensorView view =
            two_d ? TensorView{token.data(), {batch, dm}} : TensorView{token.data(), {batch, 1, dm}};
        expect_positions(block.step(view, state), t, 1, two_d ? "step (B, d)" : "step");
      }
      EXPECT_EQ(state.cached_tokens(), length);
    }
    // Splits 5 + 7, 1 + 11, 3 + 1 + 8 (forward with a state, the step in the middle).
    for (const std::vector<std::int64_t>& split :
         std::vector<std::vector<std::int64_t>>{{5, 7}, {1, 11}, {3, 1, 8}}) {
      TransformerState state = block.allocate_state(batch, 16);
      std::int64_t from = 0;
      for (std::int64_t count : split) {
        const std::vector<float> part = tokens(from, count);
        expect_positions(block.forward(TensorView{part.data(), {batch, count, dm}}, state), from, count,
                         "split");
        from += count;
      }
    }
    // A fresh state and the stateless call agree.
    TransformerState fresh = block.allocate_state(batch, length);
    EXPECT_EQ(diff(whole, block.forward(TensorView{x.data(), {batch, length, dm}}, fresh)), -1)
        << shape.label();
  }
}

TEST(Transformer, RowsAlonePrefixesAndRaggedRows) {
  std::uint64_t seed = 300;
  for (const BlockShape& shape : shapes()) {
    const TransformerBlockInference block = make_block(shape, seed++);
    const std::int64_t batch = 4, length = 16, dm = shape.d_model;
    std::vector<float> x = random_tokens(batch, length, dm, seed++);
    const std::vector<float> whole = block.forward(TensorView{x.data(), {batch, length, dm}});
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::vector<float> row(x.begin() + b * length * dm, x.begin() + (b + 1) * length * dm);
      const std::vector<float> alone = block.forward(TensorView{row.data(), {1, length, dm}});
      EXPECT_EQ(std::memcmp(alone.data(), whole.data() + b * length * dm, alone.size() * sizeof(float)), 0)
          << shape.label() << " row " << b;
      for (std::int64_t n : {1, 7, 15}) {
        const std::vector<float> prefix = block.forward(TensorView{row.data(), {1, n, dm}});
        EXPECT_EQ(std::memcmp(prefix.data(), whole.data() + b * length * dm, prefix.size() * sizeof(float)),
                  0)
            << shape.label() << " row " << b << " prefix " << n;
      }
    }
    const std::vector<std::int64_t> lengths{16, 7, 1, 12};
    std::vector<float> junk = x;
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t i = (b * length + lengths[b]) * dm; i < (b + 1) * length * dm; ++i)
        junk[i] = fp::quiet_nan();  // padding junk never reaches a refusal
    const std::vector<float> ragged =
        block.forward_ragged(TensorView{junk.data(), {batch, length, dm}}, lengths);
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t n = lengths[b];
      const std::vector<float> row(x.begin() + b * length * dm, x.begin() + (b * length + n) * dm);
      const std::vector<float> alone = block.forward(TensorView{row.data(), {1, n, dm}});
      EXPECT_EQ(std::memcmp(alone.data(), ragged.data() + b * length * dm, alone.size() * sizeof(float)), 0)
          << shape.label() << " ragged row " << b;
      for (std::int64_t i = (b * length + n) * dm; i < (b + 1) * length * dm; ++i)
        ASSERT_EQ(fp::bits(ragged[i]), 0u) << shape.label() << " padding of row " << b;
    }
  }
}

// L up to 300: decode and splits against the stateless forward, which itself matches the twin.
TEST(Transformer, LongSequences) {
  for (const BlockShape& shape : {BlockShape{32, 2, 1, 64, 0}, BlockShape{32, 4, 2, 48, 8}}) {
    const TransformerBlockInference block = make_block(shape, 400);
    const std::int64_t length = 300, dm = shape.d_model;
    const std::vector<float> x = random_tokens(1, length, dm, 401);
    const std::vector<float> whole = block.forward(TensorView{x.data(), {1, length, dm}});
    EXPECT_EQ(diff(block.forward_reference(TensorView{x.data(), {1, length, dm}}), whole), -1)
        << shape.label();
    TransformerState state = block.allocate_state(1, length);
    const std::vector<float> head(x.begin(), x.begin() + 129 * dm);
    const std::vector<float> got = block.forward(TensorView{head.data(), {1, 129, dm}}, state);
    EXPECT_EQ(std::memcmp(got.data(), whole.data(), got.size() * sizeof(float)), 0) << shape.label();
    for (std::int64_t t = 129; t < length; ++t) {
      const std::vector<float> y = block.step(TensorView{x.data() + t * dm, {1, 1, dm}}, state);
      ASSERT_EQ(std::memcmp(y.data(), whole.data() + t * dm, dm * sizeof(float)), 0)
          << shape.label() << " step " << t;
    }
  }
}

}  // namespace
}  // namespace samebits
