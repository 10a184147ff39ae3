// TransformerState layout and refusals: the packed / ring cache of docs/blocks.md §4.2, a one-ULP cache bump
// moving exactly the expected position, the cached RoPE rows equal to the per-call table, and every
// refusal of docs/api.md §3 with its wording.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/rope.hpp"
#include "numerics/simd_target.hpp"
#include "test_transformer_support.hpp"

namespace samebits {
namespace {

using testing::BlockShape;
using testing::make_block;
using testing::random_tokens;
using testing::tokens_at;

TEST(TransformerState, CachedRopeRowsEqualThePerCallTable) {
  const TransformerBlockInference block = make_block({64, 1, 1, 16, 0}, 1);
  const std::vector<float> inv = rope::inverse_frequencies(64, blocks::kRopeTheta);
  const rope::Table twin = rope::Table::build_reference(inv, 8192);
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    const rope::Table fast = rope::Table::build(inv, 8192);
    EXPECT_EQ(std::memcmp(fast.cos_values().data(), twin.cos_values().data(), twin.cos_values().size() * 4),
              0);
    EXPECT_EQ(std::memcmp(fast.sin_values().data(), twin.sin_values().data(), twin.sin_values().size() * 4),
              0);
  }
  simd::reset_target();
  // The block's shared rows, grown in steps, hold the same bits at every position they cover.
  for (std::int64_t positions : {1, 100, 3000, 8192}) {
    const auto rows = ApiAccess::block(block)->rope_rows(positions);
    ASSERT_GE(rows->positions(), positions);
    EXPECT_EQ(std::memcmp(rows->cos_row(0), twin.cos_row(0), positions * 32 * 4), 0) << positions;
    EXPECT_EQ(std::memcmp(rows->sin_row(0), twin.sin_row(0), positions * 32 * 4), 0) << positions;
  }
  EXPECT_EQ(rope::largest_angle(inv, 8192).angle, 8191.0f);  // inv[0] = 1 exactly: the angle is the position
  EXPECT_EQ(fp::bits(inv[0]), fp::bits(1.0f));
}

TEST(TransformerState, PackedLayoutGrowsInPlaceAndNeverReadsTheCapacityAfterIt) {
  const BlockShape shape{32, 4, 2, 48, 0};
  const TransformerBlockInference block = make_block(shape, 2);
  const std::int64_t batch = 2, dm = 32, hd = 8, kv = 2;
  const std::vector<float> x = random_tokens(batch, 9, dm, 3);
  TransformerState state = block.allocate_state(batch, 12);
  // Junk past the used region is not state: never read, never refused, left where it is.
  TransformerState clean = block.allocate_state(batch, 12);
  state.pin_k_cache().data()[state.cache_floats() - 1] = fp::quiet_nan();
  std::vector<float> first, second;
  for (std::int64_t b = 0; b < batch; ++b) {
    first.insert(first.end(), x.begin() + b * 9 * dm, x.begin() + (b * 9 + 5) * dm);
    second.insert(second.end(), x.begin() + (b * 9 + 5) * dm, x.begin() + (b + 1) * 9 * dm);
  }
  const std::vector<float> y = block.forward(TensorView{first.data(), {batch, 5, dm}}, state);
  EXPECT_EQ(testing::first_difference(y.data(),
                                      block.forward(TensorView{first.data(), {batch, 5, dm}}, clean).data(),
                                      static_cast<std::int64_t>(y.size())),
            -1);
  const std::vector<float> keys5 = state.keys();
  ASSERT_EQ(keys5.size(), static_cast<std::size_t>(batch * kv * 5 * hd));
  block.forward(TensorView{second.data(), {batch, 4, dm}}, state);
  const std::vector<float> keys9 = state.keys();
  // Stride 9 now: block (b, g) of the first call reappears at the head of block (b, g) of the second.
  for (std::int64_t head = 0; head < batch * kv; ++head)
    EXPECT_EQ(std::memcmp(keys9.data() + head * 9 * hd, keys5.data() + head * 5 * hd, 5 * hd * 4), 0) << head;
  for (std::int64_t i = batch * kv * 9 * hd; i < state.cache_floats() - 1; ++i) {
    ASSERT_EQ(fp::bits(state.pin_k_cache().data()[i]), 0u) << i;
    ASSERT_EQ(fp::bits(state.pin_v_cache().data()[i]), 0u) << i;
  }
  EXPECT_TRUE(fp::is_nan(state.pin_k_cache().data()[state.cache_floats() - 1]));
}

// The fast path scans a full-causal cache while it restrides it: a non-finite carried key or value in any
// (b, kv head) block, in k or in v, must give the up-front scan's message (the twin's) and leave both
// buffers bit for bit as they were, the capacity past the packed region included.
TEST(TransformerState, ARefusalFoundWhileRestridingLeavesTheCacheAsItWas) {
  const std::int64_t batch = 2, dm = 32, hd = 8, kv = 2, blocks = batch * kv;
  const TransformerBlockInference block = make_block({dm, 4, kv, 48, 0}, 6);
  const int saved_threads = num_threads();
  // (cached, length): a call long next to the cache moves the blocks one by one; a short one (a decode
  // step) moves them side by side on several threads, each block's covered rows from a saved copy.
  const std::int64_t shapes[][2] = {{5, 2}, {40, 1}, {40, 3}};
  for (const auto& shape : shapes) {
    const std::int64_t cached = shape[0], length = shape[1], capacity = cached + length + 5;
    const std::vector<float> prefix = random_tokens(batch, cached, dm, 7);
    const std::vector<float> x = random_tokens(batch, length, dm, 8);
    TransformerState prepared = block.allocate_state(batch, capacity);
    block.forward(TensorView{prefix.data(), {batch, cached, dm}}, prepared);
    const std::int64_t used = batch * kv * cached * hd;
    for (std::int64_t i = used; i < prepared.cache_floats(); ++i) {
      prepared.pin_k_cache().data()[i] =
          static_cast<float>(i);  // capacity sentinels: not state, but not to be moved
      prepared.pin_v_cache().data()[i] = -static_cast<float>(i);
    }
    // Every block's first and last cell, one inside, and both sides of the rows the blocks below land on.
    std::vector<std::int64_t> cells;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t base = b * cached * hd, covered = std::min(b * length, cached) * hd;
      for (std::int64_t at :
           {base, base + hd + 3, base + cached * hd - 1, base + covered, base + covered - 1})
        if (at >= base && at < base + cached * hd) cells.push_back(at);
    }
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      for (bool in_k : {true, false}) {
        for (std::int64_t at : cells) {
          for (float bad : {fp::quiet_nan(), fp::from_bits(0xFF800000u)}) {
            TransformerState state = prepared.clone();
            (in_k ? state.pin_k_cache().data() : state.pin_v_cache().data())[at] = bad;
            const TransformerState before = state.clone();
            std::string fast, twin;
            try {
              block.forward(TensorView{x.data(), {batch, length, dm}}, state);
            } catch (const Error& e) {
              fast = e.what();
            }
            TransformerState twin_state = before.clone();
            try {
              block.forward_reference(TensorView{x.data(), {batch, length, dm}}, twin_state, false);
            } catch (const Error& e) {
              twin = e.what();
            }
            const std::string where = "cached " + std::to_string(cached) + " length " +
                                      std::to_string(length) + " threads " + std::to_string(threads) +
                                      (in_k ? " k" : " v") + " at " + std::to_string(at);
            ASSERT_FALSE(fast.empty()) << "accepted a non-finite cache, " << where;
            EXPECT_EQ(fast, twin) << where;
            EXPECT_NE(
                fast.find(std::string(in_k ? "k_cache" : "v_cache") + " at flat index " + std::to_string(at)),
                std::string::npos)
                << fast;
            EXPECT_EQ(state.cached_tokens(), cached);
            ASSERT_EQ(std::memcmp(state.k_cache_copy().data(), before.k_cache_copy().data(),
                                  state.cache_floats() * 4),
                      0)
                << where;
            ASSERT_EQ(std::memcmp(state.v_cache_copy().data(), before.v_cache_copy().data(),
                                  state.cache_floats() * 4),
                      0)
                << where;
          }
        }
      }
      // And a clean cache takes the same path to the same bits as the twin, twice in a row.
      TransformerState state = prepared.clone(), twin_state = prepared.clone();
      for (int call = 0; call < 2 && cached + (call + 1) * length <= capacity; ++call) {
        const std::vector<float> y = block.forward(TensorView{x.data(), {batch, length, dm}}, state);
        const std::vector<float> want =
            block.forward_reference(TensorView{x.data(), {batch, length, dm}}, twin_state, false);
        EXPECT_EQ(testing::first_difference(y.data(), want.data(), static_cast<std::int64_t>(y.size())), -1);
        EXPECT_EQ(std::memcmp(state.pin_k_cache().data(), twin_state.pin_k_cache().data(),
                              state.cache_floats() * 4),
                  0);
        EXPECT_EQ(std::memcmp(state.pin_v_cache().data(), twin_state.pin_v_cache().data(),
                              state.cache_floats() * 4),
                  0);
      }
    }
  }
  set_num_threads(saved_threads);
  const std::int64_t cached = 5;
  const std::vector<float> prefix = random_tokens(batch, cached, dm, 7);
  TransformerState prepared = block.allocate_state(batch, 12);
  block.forward(TensorView{prefix.data(), {batch, cached, dm}}, prepared);
  // A call that would also overflow the cache reports the cache contents first, as the up-front scan does.
  TransformerState full = prepared.clone();
  full.pin_v_cache().data()[3] = fp::quiet_nan();
  const std::vector<float> many = random_tokens(batch, 8, dm, 9);
  try {
    block.forward(TensorView{many.data(), {batch, 8, dm}}, full);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NaN in v_cache at flat index 3"), std::string::npos) << e.what();
  }
}

TEST(TransformerState, WindowRingHoldsTheMostRecentKeysOfTheFullCache) {
  const std::int64_t batch = 2, length = 13, dm = 32;
  const TransformerBlockInference full = make_block({dm, 4, 2, 48, 0}, 4);
  const TransformerBlockInference windowed = make_block({dm, 4, 2, 48, 8}, 4);  // the same weights
  const std::vector<float> x = random_tokens(batch, length, dm, 5);
  TransformerState a = full.allocate_state(batch, length);
  TransformerState b = windowed.allocate_state(batch, length);
  EXPECT_EQ(b.cache_floats(), batch * 2 * 8 * 8);  // a ring of W slots per (row, kv head)
  for (std::int64_t t = 0; t < length; ++t) {
    const std::vector<float> token = tokens_at(x, batch, length, dm, t);
    full.step(TensorView{token.data(), {batch, 1, dm}}, a);
    windowed.step(TensorView{token.data(), {batch, 1, dm}}, b);
    const std::int64_t held = std::min<std::int64_t>(t + 1, 8);
    const std::vector<float> all = a.keys(), recent = b.keys();
    ASSERT_EQ(recent.size(), static_cast<std::size_t>(batch * 2 * held * 8));
    for (std::int64_t head = 0; head < batch * 2; ++head)
      ASSERT_EQ(std::memcmp(recent.data() + head * held * 8, all.data() + (head * (t + 1) + t + 1 - held) * 8,
                            held * 8 * 4),
                0)
          << "t " << t << " head " << head;
    // Slot p mod 8 of the ring is position p.
    const std::int64_t slot = t % 8;
    EXPECT_EQ(std::memcmp(b.pin_v_cache().data() + slot * 8, a.values().data() + t * 8, 8 * 4), 0) << t;
  }
}

// docs/api.md §14.1 item 19's shape of check: a one-ULP bump of flat v_cache[7] just before step 6 must leave
// positions 0..5 alone and move a later one; bumps of the first 32 k_cache cells may be absorbed but can
// never move an earlier position.
TEST(TransformerState, OneUlpInTheCacheMovesTheExpectedPosition) {
  const std::int64_t batch = 2, length = 12, dm = 32;
  const TransformerBlockInference block = make_block({dm, 2, 1, 64, 0}, 6);
  const std::vector<float> x = random_tokens(batch, length, dm, 7);
  const std::vector<float> full = block.forward(TensorView{x.data(), {batch, length, dm}});
  auto first_moved = [&](const std::function<float*(TransformerState&)>& cell) {
    TransformerState state = block.allocate_state(batch, length);
    for (std::int64_t t = 0; t < length; ++t) {
      if (t == 6) {
        float* target = cell(state);
        const std::uint32_t before = fp::bits(*target);
        *target = fp::from_bits(before + 1);
        EXPECT_NE(fp::bits(*target), before);  // the bump landed
      }
      const std::vector<float> token = tokens_at(x, batch, length, dm, t);
      const std::vector<float> y = block.step(TensorView{token.data(), {batch, 1, dm}}, state);
      for (std::int64_t b = 0; b < batch; ++b)
        if (std::memcmp(y.data() + b * dm, full.data() + (b * length + t) * dm, dm * 4) != 0) return t;
    }
    return length;
  };
  // Which later position first shows the bump depends on the weights (upstream's fixture: exactly 6, checked
  // in tests/python/test_transformer.py); here it must be a position >= 6 and must exist at all.
  const std::int64_t moved = first_moved([](TransformerState& s) { return s.pin_v_cache().data() + 7; });
  EXPECT_GE(moved, 6);
  EXPECT_LT(moved, length);
  for (int cell = 0; cell < 32; ++cell) {
    const std::int64_t moved =
        first_moved([cell](TransformerState& s) { return s.pin_k_cache().data() + cell; });
    EXPECT_GE(moved, 6) << cell;
  }
}

void expect_refusal(const std::function<void()>& call, ErrorKind kind, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no refusal; wanted: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TransformerState, CallRefusals) {
  const TransformerBlockInference block = make_block({32, 2, 1, 64, 0}, 8);
  const TransformerBlockInference windowed = make_block({32, 2, 1, 64, 4}, 8);
  std::vector<float> x = random_tokens(2, 3, 32, 9);
  const TensorView good{x.data(), {2, 3, 32}};
  const auto V = ErrorKind::Value;
  expect_refusal(
      [&] {
        block.forward(TensorView{x.data(), {6, 32}});
      },
      V, "samebits TransformerBlock.forward: x must be (B, L, d_model), got 2-D shape (6, 32)");
  expect_refusal(
      [&] {
        block.forward(TensorView{x.data(), {2, 3, 16, 2}});
      },
      V, "got 4-D shape (2, 3, 16, 2)");
  std::vector<float> wide(2 * 3 * 16);
  expect_refusal(
      [&] {
        block.forward(TensorView{wide.data(), {2, 6, 16}});
      },
      V, "x has d_model 16, the weights have 32");
  expect_refusal([&] { block.forward(TensorView{x.data(), {0, 3, 32}}); }, V, "B and L must be positive");
  TransformerState state = block.allocate_state(2, 4);
  expect_refusal(
      [&] { block.step(good, state); }, V,
      "samebits TransformerBlock.step: a decode step takes exactly one token per batch row, got L = 3; "
      "use forward() for prefill");
  expect_refusal(
      [&] {
        block.step(TensorView{x.data(), {64}}, state);
      },
      V, "x must be (B, L, d_model) -- or (B, d_model) for a step --, got 1-D shape (64,)");
  TransformerState three = block.allocate_state(3, 4);
  expect_refusal(
      [&] { block.forward(good, three); }, V,
      "the state was allocated for batch_size 3 but x has B = 2 (allocate_state(B, max_tokens) makes a "
      "matching one)");
  TransformerState ring = windowed.allocate_state(2, 8);
  expect_refusal([&] { block.forward(good, ring); }, V,
                 "the state was allocated for window 4 but this block has window 0");
  block.forward(good, state);
  expect_refusal([&] { block.forward(good, state); }, V,
                 "this call would use 6 KV slots and the cache holds 4 REFUSED");
  state.set_cached_tokens(5);
  expect_refusal([&] { block.forward(good, state); }, V, "cached_tokens must be in [0, 4]");
  state.set_cached_tokens(3);
  state.pin_v_cache().data()[9] = fp::from_bits(0x7F800000u);
  expect_refusal(
      [&] {
        block.step(TensorView{x.data(), {2, 32}}, state);
      },
      V, "samebits TransformerBlock.step: infinity in v_cache at flat index 9 REFUSED");
  ring.pin_k_cache().data()[ring.cache_floats() - 1] = fp::quiet_nan();  // an unused ring slot is still state
  expect_refusal([&] { windowed.forward(good, ring); }, V,
                 "NaN in k_cache at flat index " + std::to_string(ring.cache_floats() - 1) + " REFUSED");
  x[40] = fp::quiet_nan();
  expect_refusal([&] { block.forward(good); }, V,
                 "samebits TransformerBlock.forward: NaN in x at flat index 40 REFUSED");
  x[40] = 0.5f;
  TransformerState huge = block.allocate_state(2, 8193);
  expect_refusal([&] { block.forward(good, huge); }, V, "exceeds max_positions 8192");
  TransformerState edge = block.allocate_state(1, 8192);  // 8192 positions are inside the domain
  EXPECT_NO_THROW(block.step(TensorView{x.data(), {1, 1, 32}}, edge));
  expect_refusal([&] { block.allocate_state(0, 4); }, V,
                 "samebits TransformerBlock: batch_size must be positive, got 0");
  expect_refusal([&] { block.allocate_state(1, 0); }, V, "max_tokens must be positive, got 0");
  expect_refusal([&] { block.backward(); }, ErrorKind::NotImplemented,
                 "samebits TransformerBlockInference.backward: inference is forward only");
}

TEST(TransformerState, ConstructionRefusals) {
  const BlockShape shape{32, 2, 1, 64, 0};
  auto build_shape = [&](const BlockShape& s,
                         const std::function<void(testing::BlockWeights&, TransformerOptions&)>& edit) {
    testing::BlockWeights w = testing::random_weights(s, 10);
    TransformerOptions options;
    options.n_heads = s.n_heads;
    options.n_kv_heads = s.n_kv_heads;
    edit(w, options);
    TransformerBlockInference block(w.named, options);
  };
  auto build = [&](const std::function<void(testing::BlockWeights&, TransformerOptions&)>& edit) {
    build_shape(shape, edit);
  };
  const auto V = ErrorKind::Value;
  expect_refusal(
      [&] { build([](auto&, auto& o) { o.n_heads = 3; }); }, V,
      "d_model must equal n_heads*head_dim (LlamaDims.validate carries the same refusal), got d_model 32 vs "
      "n_heads 3 * head_dim 10");
  expect_refusal([&] { build([](auto&, auto& o) { o.n_heads = 0; }); }, V, "n_heads must be positive, got 0");
  expect_refusal([&] { build([](auto&, auto& o) { o.window = -1; }); }, V,
                 "window must be 0 (full causal) or a positive sliding-window width, got -1");
  expect_refusal([&] { build([](auto&, auto& o) { o.n_kv_heads = 0; }); }, V,
                 "n_kv_heads must be positive, got 0");
  expect_refusal(
      [&] {
        build_shape({32, 4, 3, 64, 0}, [](auto&, auto&) {});
      },
      V, "n_heads 4 not divisible by n_kv_heads 3");
  expect_refusal([&] { build_shape({32, 32, 1, 64, 0}, [](auto&, auto&) {}); }, V, "head_dim 1 is odd");
  expect_refusal([&] { build([](auto& w, auto&) {
                         w.named[2].second.shape = {16, 64};
                       }); }, V,
                 "q_proj.weight has shape (16, 64), want (32, 32)");
  expect_refusal([&] { build([](auto& w, auto&) {
                         w.named[6].second.shape = {64, 16};
                       }); }, V,
                 "gate_proj.weight must be (intermediate, d_model=32), got shape (64, 16)");
  expect_refusal([&] { build([](auto& w, auto&) {
                         w.named[0].second.shape = {4, 8};
                       }); }, V,
                 "input_layernorm.weight must be 1-D (d_model,), got shape (4, 8)");
  expect_refusal([&] { build([](auto& w, auto&) { w.values[8][17] = fp::quiet_nan(); }); }, V,
                 "samebits TransformerBlock: NaN in down_proj.weight at flat index 17 REFUSED");
  expect_refusal(
      [&] {
        build([](auto& w, auto&) {
          w.named[1].first = "post_norm.weight";
          w.named.pop_back();
        });
      },
      V,
      "samebits TransformerBlock: weight dict mismatch; missing ['post_attention_layernorm.weight', "
      "'down_proj.weight']; unknown ['post_norm.weight']. The exact key set is ['input_layernorm.weight', ");
}

}  // namespace
}  // namespace samebits
