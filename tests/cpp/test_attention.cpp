// The attention fast path equals its literal twin bit for bit: head_dim (single leaf, ragged vector
// tails, two and three GEMM leaves), GQA groups, windows, query slices, planted subnormals, signed zeros,
// huge and overflowing scores; plus hand-checked values of the twin itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "numerics/attention.hpp"
#include "numerics/fp.hpp"
#include "numerics/simd_target.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using attention::Unit;

// Buffers for one unit shaped like a call: L queries at pos0.., a key span that ends at pos0 + L.
struct Case {
  std::int64_t queries, heads, head_dim, pos0, window;
  std::vector<float> q, keys, values;
  std::int64_t key_lo = 0, span = 0;
  float softcap = 0.0f;  // docs/models.md §9

  Case(std::int64_t queries_, std::int64_t heads_, std::int64_t head_dim_, std::int64_t pos0_,
       std::int64_t window_, std::uint64_t seed, float scale = 1.0f)
      : queries(queries_), heads(heads_), head_dim(head_dim_), pos0(pos0_), window(window_) {
    key_lo = window > 0 && pos0 - window + 1 > 0 ? pos0 - window + 1 : 0;
    span = pos0 + queries - key_lo;
    testing::Rng rng(seed);
    q = rng.uniform_vector(static_cast<std::size_t>(queries * heads * head_dim), scale);
    keys = rng.uniform_vector(static_cast<std::size_t>(span * head_dim), scale);
    values = rng.uniform_vector(static_cast<std::size_t>(span * head_dim));
  }
  Unit unit(std::vector<float>& ctx) {
    ctx.assign(static_cast<std::size_t>(queries * heads * head_dim), 12345.0f);
    Unit u;
    u.q = q.data();
    u.q_stride = heads * head_dim;
    u.ctx = ctx.data();
    u.ctx_stride = heads * head_dim;
    u.queries = queries;
    u.heads = heads;
    u.keys = keys.data();
    u.values = values.data();
    u.span = span;
    u.head_dim = head_dim;
    u.key_lo = key_lo;
    u.pos0 = pos0;
    u.window = window;
    u.finite_keys = pos0 - key_lo;
    u.softcap = softcap;
    return u;
  }
  // The keys again as key tiles (Unit::key_tiles); the rest of the last tile is NaN, which no stored
  // lane may see.
  std::vector<float> key_tiles() const {
    const std::int64_t width = attention::kKeyTileWidth;
    std::vector<float> tiles(static_cast<std::size_t>((span + width - 1) / width * width * head_dim),
                             std::numeric_limits<float>::quiet_NaN());
    for (std::int64_t j = 0; j < span; ++j)
      for (std::int64_t d = 0; d < head_dim; ++d)
        tiles[static_cast<std::size_t>(j / width * head_dim * width + d * width + j % width)] =
            keys[static_cast<std::size_t>(j * head_dim + d)];
    return tiles;
  }
};

// Fast (every target) == twin, for the whole unit and for query slices of it.
void expect_fast_equals_twin(Case& c, const std::string& label) {
  std::vector<float> want;
  attention::attend_reference(c.unit(want));
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    std::vector<float> got;
    attention::attend(c.unit(got));
    EXPECT_EQ(testing::first_difference(want.data(), got.data(), static_cast<std::int64_t>(want.size())), -1)
        << label << " target " << simd::target_name(target);
    // Slices of 1, 3 and the rest: each query's row does not depend on its neighbours.
    std::vector<float> sliced;
    Unit whole = c.unit(sliced);
    std::int64_t first = 0;
    for (std::int64_t count : {std::int64_t{1}, std::int64_t{3}, c.queries}) {
      if (first >= c.queries) break;
      const std::int64_t n = first + count > c.queries ? c.queries - first : count;
      attention::attend(attention::query_slice(whole, first, n));
      first += n;
    }
    EXPECT_EQ(testing::first_difference(want.data(), sliced.data(), static_cast<std::int64_t>(want.size())),
              -1)
        << label << " sliced, target " << simd::target_name(target);
    // With key tiles beside the keys (a decode row reads its scores' keys from them).
    const std::vector<float> tiles = c.key_tiles();
    std::vector<float> tiled;
    Unit with_tiles = c.unit(tiled);
    with_tiles.key_tiles = tiles.data();
    attention::attend(with_tiles);
    EXPECT_EQ(testing::first_difference(want.data(), tiled.data(), static_cast<std::int64_t>(want.size())),
              -1)
        << label << " with key tiles, target " << simd::target_name(target);
  }
  simd::reset_target();
}

TEST(Attention, FastEqualsTwinOverShapes) {
  std::uint64_t seed = 1;
  for (std::int64_t head_dim : {2, 16, 24, 64, 130, 300}) {
    for (std::int64_t heads : {1, 2, 4, 5}) {
      for (std::int64_t window : {0, 1, 5}) {
        for (auto [queries, pos0] :
             {std::pair<std::int64_t, std::int64_t>{1, 0}, {1, 9}, {7, 0}, {20, 3}, {37, 11}}) {
          if (head_dim >= 130 && queries > 7) continue;  // keep the twin's runtime modest
          Case c(queries, heads, head_dim, pos0, window, seed++);
          expect_fast_equals_twin(c, "hd " + std::to_string(head_dim) + " heads " + std::to_string(heads) +
                                         " window " + std::to_string(window) + " L " +
                                         std::to_string(queries) + " pos0 " + std::to_string(pos0));
        }
      }
    }
  }
}

// The softcap between the scale and the mask (docs/models.md §9), on the row-block and decode kernels, with
// key tiles, small and large caps, and scores past the skip bound.
TEST(Attention, SoftcapFastEqualsTwin) {
  std::uint64_t seed = 500;
  for (float cap : {0.25f, 3.0f, 50.0f, 1e30f}) {
    for (std::int64_t head_dim : {16, 24, 64}) {
      for (auto [queries, pos0, window] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 9, 0},
                                           {1, 40, 5},
                                           {7, 0, 0},
                                           {20, 3, 5},
                                           {37, 11, 0}}) {
        Case c(queries, 2, head_dim, pos0, window, seed++, 4.0f);
        c.softcap = cap;
        expect_fast_equals_twin(c, "softcap " + std::to_string(cap) + " hd " + std::to_string(head_dim) +
                                       " L " + std::to_string(queries) + " pos0 " + std::to_string(pos0));
      }
    }
  }
  Case big(20, 2, 16, 4, 0, 11, 3e12f);
  big.softcap = 30.0f;
  expect_fast_equals_twin(big, "softcap beyond skip bound");
  // The cap changes the output.
  Case plain(7, 2, 16, 0, 0, 600, 4.0f), capped(7, 2, 16, 0, 0, 600, 4.0f);
  capped.softcap = 0.5f;
  std::vector<float> a, b;
  attention::attend_reference(plain.unit(a));
  attention::attend_reference(capped.unit(b));
  EXPECT_NE(testing::first_difference(a.data(), b.data(), static_cast<std::int64_t>(a.size())), -1);
}

TEST(Attention, LongSpans) {
  Case prefill(300, 2, 16, 0, 0, 77);
  expect_fast_equals_twin(prefill, "prefill 300");
  Case decode(1, 4, 64, 700, 0, 78);
  expect_fast_equals_twin(decode, "decode at 700");
  Case windowed(40, 4, 32, 260, 8, 79);
  expect_fast_equals_twin(windowed, "window 8 at 260");
}

// Decode-sized units run each row with the keys across the lanes: every span length around the lane
// widths (whole key groups, zero-padded tails), one- and multi-leaf head_dims, one to four rows.
TEST(Attention, DecodeRowsOverEverySpanLength) {
  std::uint64_t seed = 500;
  for (std::int64_t head_dim : {8, 24, 64, 136}) {
    for (std::int64_t heads : {1, 3, 4}) {
      for (std::int64_t pos0 = 0; pos0 < 70; pos0 += head_dim == 64 ? 1 : 7) {
        for (std::int64_t window : {0, 6}) {
          Case c(1, heads, head_dim, pos0, window, seed++);
          expect_fast_equals_twin(c, "decode hd " + std::to_string(head_dim) + " heads " +
                                         std::to_string(heads) + " pos0 " + std::to_string(pos0) +
                                         " window " + std::to_string(window));
        }
      }
    }
  }
}

TEST(Attention, PlantedSubnormalsTakeTheFlushingRerun) {
  Case c(24, 2, 32, 5, 0, 91);
  const float tiny = fp::from_bits(0x00000123u);
  const float neg_tiny = fp::from_bits(0x80400000u);
  for (std::size_t i = 3; i < c.q.size(); i += 17) c.q[i] = i % 2 ? tiny : neg_tiny;
  for (std::size_t i = 5; i < c.keys.size(); i += 13) c.keys[i] = neg_tiny;
  for (std::size_t i = 7; i < c.values.size(); i += 11) c.values[i] = tiny;
  // Whole value columns near FLT_MIN: every product with a weight below ~0.78 lands below FLT_MIN and is
  // flushed by the literal chain, while an unflushed chain would add them up to a normal number.
  for (std::int64_t j = 0; j < c.span; ++j) {
    c.values[static_cast<std::size_t>(j * 32 + 3)] = 1.5e-38f;
    c.values[static_cast<std::size_t>(j * 32 + 20)] = -1.5e-38f;
  }
  expect_fast_equals_twin(c, "planted subnormals");
}

// A decode step of grouped heads reads the unit's values once for all its heads: a flushing rerun that only
// some heads need, and heads that go to the twin (an overflowing score) beside heads that do not, still give
// every head the twin's bits.
TEST(Attention, DecodeHeadsShareOneValuePass) {
  const float tiny = fp::from_bits(0x00000123u);
  for (std::int64_t heads : {2, 3, 4}) {
    Case c(1, heads, 32, 40, 0, 300 + static_cast<std::uint64_t>(heads));
    for (std::int64_t j = 0; j < c.span; ++j) c.values[static_cast<std::size_t>(j * 32 + 5)] = 1.5e-38f;
    c.values[7] = tiny;
    expect_fast_equals_twin(c, "decode heads " + std::to_string(heads) + " with subnormal products");
    Case scores(1, heads, 24, 50, 0, 350 + static_cast<std::uint64_t>(heads));  // subnormal operands
    scores.q[3] = tiny;
    for (std::size_t i = 5; i < scores.keys.size(); i += 29) scores.keys[i] = -tiny;
    for (std::int64_t d = 0; d < 24; ++d) scores.q[static_cast<std::size_t>(24 + d)] = 1e-20f;
    expect_fast_equals_twin(
        scores, "decode heads " + std::to_string(heads) + " with subnormal query and key elements");
    Case mixed(1, heads, 16, 30, 0, 400 + static_cast<std::uint64_t>(heads));
    for (std::int64_t d = 0; d < 16; ++d)
      mixed.q[static_cast<std::size_t>(16 + d)] = 3e19f;  // head 1 overflows
    for (float& k : mixed.keys) k *= 1e19f;
    expect_fast_equals_twin(mixed, "decode heads " + std::to_string(heads) + ", one to the twin");
  }
}

TEST(Attention, NegativeZeroChainMeetsSkippedPositiveValue) {
  // q = 0: every visible weight is 1/(p+1). Column 0 holds -2e-38 for keys 0..15 (so w * v is a negative
  // subnormal, flushed to -0.0, for p >= 1) and +1 afterwards. The value chain walks the visible keys only
  // (docs/models.md §13), so the hidden +1 keys leave the -0.0 as it is, as a decode step (which has no
  // hidden keys) computes it; the fast path, which walks hidden keys inside a row block, must agree.
  Case c(32, 1, 16, 0, 0, 5);
  std::fill(c.q.begin(), c.q.end(), 0.0f);
  for (std::int64_t j = 0; j < c.span; ++j)
    c.values[static_cast<std::size_t>(j * 16)] = j < 16 ? -2e-38f : 1.0f;
  std::vector<float> want;
  attention::attend_reference(c.unit(want));
  // Hand check: row p in 1..15 ends at -0.0; row 0 keeps -2e-38 (weight 1).
  EXPECT_EQ(fp::bits(want[0]), fp::bits(-2e-38f));
  for (std::int64_t p = 1; p < 16; ++p)
    EXPECT_EQ(fp::bits(want[static_cast<std::size_t>(p * 16)]), 0x80000000u) << p;
  expect_fast_equals_twin(c, "negative zero");
  // The same row decoded alone (its span ends at its own position): the same bits.
  for (std::int64_t p = 1; p < 16; ++p) {
    attention::Unit alone = c.unit(want);
    std::vector<float> row(16);
    alone = attention::query_slice(alone, p, 1);
    alone.span = p + 1;
    alone.ctx = row.data();
    attention::attend(alone);
    EXPECT_EQ(fp::bits(row[0]), 0x80000000u) << "decoded row " << p;
  }
  // All later values negative too: the chain stays -0.0.
  for (std::int64_t j = 16; j < c.span; ++j) c.values[static_cast<std::size_t>(j * 16)] = -1.0f;
  attention::attend_reference(c.unit(want));
  for (std::int64_t p = 1; p < 16; ++p)
    EXPECT_EQ(fp::bits(want[static_cast<std::size_t>(p * 16)]), 0x80000000u) << p;
  expect_fast_equals_twin(c, "negative zero kept");
}

TEST(Attention, HugeAndOverflowingScores) {
  // |q|, |k| beyond the skip bound: hidden keys are then computed literally.
  Case big(20, 2, 16, 4, 0, 11, 3e12f);
  expect_fast_equals_twin(big, "beyond skip bound");
  // Scores that overflow to infinity (NaN rows in the softmax): the twin's rows.
  Case overflow(9, 2, 16, 0, 3, 12, 3e19f);
  expect_fast_equals_twin(overflow, "overflowing scores");
}

TEST(Attention, TwinHandCheckedValues) {
  // One head, head_dim 2, two queries, two keys, window 0. q0 = (1, 0), q1 = (0, 1); k0 = (1, 0),
  // k1 = (0, 1); v0 = (1, 2), v1 = (3, 4). Query 0 sees key 0 only: ctx = v0 exactly (weight 1; the
  // hidden key contributes 0 * v1). Query 1 sees both with scores 0 and 1/sqrt(2) after the scale:
  // its weights sum to one, so ctx lies between v0 and v1 (checked against a double evaluation).
  std::vector<float> q{1, 0, 0, 1}, k{1, 0, 0, 1}, v{1, 2, 3, 4}, ctx(4);
  Unit u;
  u.q = q.data();
  u.q_stride = 2;
  u.ctx = ctx.data();
  u.ctx_stride = 2;
  u.queries = 2;
  u.heads = 1;
  u.keys = k.data();
  u.values = v.data();
  u.span = 2;
  u.head_dim = 2;
  attention::attend_reference(u);
  EXPECT_EQ(ctx[0], 1.0f);
  EXPECT_EQ(ctx[1], 2.0f);
  const double s = 1.0 / std::sqrt(2.0);
  const double w1 = std::exp(s - s) / (std::exp(0.0 - s) + 1.0);  // weight of key 1, shifted by the max
  EXPECT_NEAR(ctx[2], 1.0 + 2.0 * w1, 1e-6);
  EXPECT_NEAR(ctx[3], 2.0 + 2.0 * w1, 1e-6);
  EXPECT_EQ(fp::bits(attention::score_scale(16)), fp::bits(0.25f));  // rsqrt(16) is exact
}

}  // namespace
}  // namespace samebits
