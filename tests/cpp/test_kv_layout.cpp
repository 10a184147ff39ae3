// The engine's private KV layout and trust (blocks::KvCache::spread / trusted): a state nobody holds is
// decoded in the spread layout without moving its cache or rescanning it, with the bits of a state kept
// packed; every accessor shows the packed layout of docs/blocks.md §4.2 (zeros in the capacity the engine
// used); writes through accessors and non-finite rows the engine itself wrote are refused as before.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "blocks/transformer/state.hpp"
#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "test_transformer_support.hpp"

namespace samebits {
namespace {

using testing::BlockShape;
using testing::make_block;
using testing::random_tokens;
using testing::same_bits;
using testing::tokens_at;

// The small block of these tests (d_model 16, two heads, two kv heads) and `length` random tokens of one
// batch row, fed to it one position at a time.
struct OneRowDecode {
  static constexpr std::int64_t kWidth = 16;
  OneRowDecode(std::uint64_t block_seed, std::int64_t length, std::uint64_t token_seed)
      : block(make_block(BlockShape{kWidth, 2, 2, 24, 0}, block_seed)),
        x(random_tokens(1, length, kWidth, token_seed)) {}
  TensorView token(std::int64_t t) const { return TensorView{x.data() + t * kWidth, {1, 1, kWidth}}; }
  void step(std::int64_t t, TransformerState& state) const { block.step(token(t), state); }
  // A state of 8 positions after the decode steps of positions [0, steps).
  TransformerState after_steps(std::int64_t steps) const {
    TransformerState state = block.allocate_state(1, 8);
    for (std::int64_t t = 0; t < steps; ++t) step(t, state);
    return state;
  }
  TransformerBlockInference block;
  std::vector<float> x;
};

// Spread then pack gives back the packed region bit for bit, and the capacity reads zeros wherever the
// spread blocks lay; capacity the engine never used keeps what it held.
TEST(KvLayout, SpreadThenPackRestoresThePackedCacheAndZerosWhatItUsed) {
  const std::int64_t hd = 3;
  for (std::int64_t blocks : {1, 2, 5})
    for (std::int64_t max_tokens : {1, 4, 9})
      for (std::int64_t held = 0; held <= max_tokens; ++held) {
        blocks::TransformerDims dims;
        dims.n_kv_heads = blocks;
        dims.head_dim = hd;
        const std::int64_t floats = blocks * max_tokens * hd;
        std::vector<float> k(static_cast<std::size_t>(floats)), v(k.size());
        for (std::int64_t i = 0; i < floats; ++i) {
          // The packed region numbered; the capacity marked with a sentinel the spread may overwrite.
          const bool state = i < blocks * held * hd;
          k[static_cast<std::size_t>(i)] = state ? static_cast<float>(i + 1) : -7.0f;
          v[static_cast<std::size_t>(i)] = state ? -static_cast<float>(i + 1) : -7.0f;
        }
        const std::vector<float> k0 = k, v0 = v;
        blocks::KvCache cache{k.data(), v.data(), 1, max_tokens, held};
        blocks::kv::spread_packed(cache, dims);
        ASSERT_TRUE(cache.spread);
        for (std::int64_t block = 0; block < blocks; ++block)
          for (std::int64_t e = 0; e < held * hd; ++e)
            ASSERT_EQ(k[static_cast<std::size_t>(block * max_tokens * hd + e)],
                      k0[static_cast<std::size_t>(block * held * hd + e)]);
        blocks::kv::pack_spread(cache, dims);
        ASSERT_FALSE(cache.spread);
        const std::string where =
            std::to_string(blocks) + " blocks, " + std::to_string(held) + " of " + std::to_string(max_tokens);
        for (std::int64_t i = 0; i < floats; ++i) {
          const auto at = static_cast<std::size_t>(i);
          if (i < blocks * held * hd) {
            ASSERT_EQ(k[at], k0[at]) << where;
            ASSERT_EQ(v[at], v0[at]) << where;
            continue;
          }
          const std::int64_t row = i / hd, block = row / max_tokens;
          const bool used = block > 0 && row - block * max_tokens < held;
          ASSERT_EQ(k[at], used ? 0.0f : k0[at]) << where << " at " << i;
          ASSERT_EQ(v[at], used ? 0.0f : v0[at]) << where << " at " << i;
        }
      }
}

// A non-finite value in a spread cache is named by its index in the packed layout, as the packed cache's
// scan names it: the first offender of k_cache, then of v_cache.
TEST(KvLayout, ASpreadCacheNamesItsFirstOffenderByThePackedIndex) {
  const std::int64_t blocks = 4, max_tokens = 7, held = 5, hd = 2;
  blocks::TransformerDims dims;
  dims.n_kv_heads = blocks;
  dims.head_dim = hd;
  for (bool in_k : {true, false})
    for (std::int64_t at : {0L, 9L, 10L, 23L, blocks * held * hd - 1}) {
      std::vector<float> k(static_cast<std::size_t>(blocks * max_tokens * hd), 1.0f), v(k);
      (in_k ? k : v)[static_cast<std::size_t>(at)] = at % 2 ? fp::quiet_nan() : fp::from_bits(fp::kInfBits);
      (in_k ? v : k)[static_cast<std::size_t>(at / 2)] = fp::quiet_nan();  // k is scanned before v
      blocks::KvCache cache{k.data(), v.data(), 1, max_tokens, held};
      auto message = [&] {
        return testing::error_of([&] { blocks::kv::refuse_non_finite_state(cache, dims, "scan"); },
                                 ErrorKind::Value);
      };
      const std::string packed = message();
      blocks::kv::spread_packed(cache, dims);
      EXPECT_EQ(message(), packed) << at;
      EXPECT_NE(packed.find("k_cache at flat index " + std::to_string(in_k ? at : at / 2)), std::string::npos)
          << packed;
    }
}

// A state kept private decodes spread, one kept exposed decodes packed: the same outputs step by step
// and the same packed cache at the end, on 1-3 threads; the exposed one never leaves the packed layout.
TEST(KvLayout, APrivateStateDecodesSpreadWithThePackedStatesBits) {
  const BlockShape shape{32, 4, 2, 40, 0};
  const TransformerBlockInference block = make_block(shape, 11);
  const std::int64_t batch = 2, dm = 32, length = 23, prefill = 5;
  const std::vector<float> x = random_tokens(batch, length, dm, 12);
  const int saved_threads = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    TransformerState hidden = block.allocate_state(batch, 30);
    TransformerState shown = block.allocate_state(batch, 30);
    std::vector<float> first;
    for (std::int64_t b = 0; b < batch; ++b)
      first.insert(first.end(), x.begin() + b * length * dm, x.begin() + (b * length + prefill) * dm);
    const TensorView head{first.data(), {batch, prefill, dm}};
    ASSERT_TRUE(same_bits(block.forward(head, hidden), block.forward(head, shown)));
    for (std::int64_t t = prefill; t < length; ++t) {
      const TransformerState::Pin pin = shown.pin_k_cache();  // a live pin holds the packed layout
      const std::vector<float> token = tokens_at(x, batch, length, dm, t);
      const TensorView one{token.data(), {batch, 1, dm}};
      ASSERT_TRUE(same_bits(block.step(one, hidden), block.step(one, shown))) << "step " << t;
      ASSERT_TRUE(hidden.spread()) << "step " << t;
      ASSERT_TRUE(hidden.trusted()) << "step " << t;
      ASSERT_FALSE(shown.spread()) << "step " << t;
      ASSERT_TRUE(same_bits(hidden.keys(), shown.keys())) << "step " << t;
      ASSERT_TRUE(same_bits(hidden.values(), shown.values())) << "step " << t;
    }
    const TransformerState copy = hidden.clone();
    EXPECT_TRUE(copy.spread() && copy.trusted());
    EXPECT_TRUE(same_bits(copy.k_cache_copy(), shown.k_cache_copy()));
    EXPECT_TRUE(same_bits(hidden.k_cache_copy(), shown.k_cache_copy()));
    EXPECT_TRUE(same_bits(hidden.v_cache_copy(), shown.v_cache_copy()));
    // The accessor packs the cache in place: what it shows is what the packed state holds.
    const TransformerState::Pin pin = hidden.pin_k_cache();
    const std::vector<float> k(pin.data(), pin.data() + pin.size());
    EXPECT_FALSE(hidden.spread());
    EXPECT_TRUE(hidden.pinned());
    EXPECT_TRUE(same_bits(k, shown.k_cache_copy()));
  }
  set_num_threads(saved_threads);
}

// A spread state keeps its keys again as key tiles (the decode rows' score operands). A state that goes
// back to the spread layout with rows already cached (after a handout ends and a call has checked it)
// rebuilds them from its keys: every later step equals the one-shot forward, across tile boundaries.
TEST(KvLayout, AStateBackInTheSpreadLayoutRebuildsItsKeyTiles) {
  const BlockShape shape{32, 4, 2, 40, 0};
  const TransformerBlockInference block = make_block(shape, 13);
  const std::int64_t batch = 2, dm = 32, length = 40, prefill = 7;
  const std::vector<float> x = random_tokens(batch, length, dm, 14);
  const std::vector<float> whole = block.forward(TensorView{x.data(), {batch, length, dm}});
  TransformerState state = block.allocate_state(batch, length);
  std::vector<float> first;
  for (std::int64_t b = 0; b < batch; ++b)
    first.insert(first.end(), x.begin() + b * length * dm, x.begin() + (b * length + prefill) * dm);
  block.forward(TensorView{first.data(), {batch, prefill, dm}}, state);
  ASSERT_TRUE(state.spread());
  state.pin_k_cache();  // packs; the next call scans the packed cache, the one after spreads again
  for (std::int64_t t = prefill; t < length; ++t) {
    const std::vector<float> token = tokens_at(x, batch, length, dm, t);
    const std::vector<float> y = block.step(TensorView{token.data(), {batch, 1, dm}}, state);
    for (std::int64_t b = 0; b < batch; ++b)
      ASSERT_EQ(std::memcmp(y.data() + b * dm, whole.data() + (b * length + t) * dm, dm * sizeof(float)), 0)
          << "position " << t << " row " << b;
    ASSERT_EQ(state.spread(), t > prefill) << "position " << t;
  }
}

// A value written through an accessor (the state then stays packed and untrusted) is refused by the next
// call with the twin's message, even after the pin is gone; so is a non-finite row the engine itself
// appended (finite x, overflowing weights), found in the spread layout and named by its packed index.
TEST(KvLayout, WritesFromOutsideAndOverflowingRowsAreRefusedAsTheTwinRefusesThem) {
  const BlockShape shape{16, 2, 2, 24, 0};
  const TransformerBlockInference block = make_block(shape, 21);
  const std::int64_t batch = 2, dm = 16;
  const std::vector<float> x = random_tokens(batch, 4, dm, 22);
  const TensorView prompt{x.data(), {batch, 4, dm}};
  auto refusal = [&](TransformerState& state, bool twin) {
    const std::vector<float> token = random_tokens(batch, 1, dm, 23);
    const TensorView one{token.data(), {batch, 1, dm}};
    return testing::error_of(
        [&] {
          if (twin) {
            block.forward_reference(one, state, true);
          } else {
            block.step(one, state);
          }
        },
        ErrorKind::Value);
  };

  TransformerState state = block.allocate_state(batch, 12);
  block.forward(prompt, state);
  block.forward(prompt, state);  // now spread and trusted
  ASSERT_TRUE(state.spread() && state.trusted());
  state.pin_v_cache().data()[37] = fp::quiet_nan();
  TransformerState twin = state.clone();
  const std::string fast = refusal(state, false);
  EXPECT_NE(fast.find("NaN in v_cache at flat index 37"), std::string::npos) << fast;
  EXPECT_EQ(fast, refusal(twin, true));

  // Weights that overflow k: the appended rows are infinite, so the state loses its trust.
  testing::BlockWeights w = testing::random_weights(shape, 21);
  for (float& value : w.values[3]) value = value < 0.0f ? -3e38f : 3e38f;  // k_proj.weight
  TransformerOptions options;
  options.n_heads = shape.n_heads;
  options.n_kv_heads = shape.n_kv_heads;
  const TransformerBlockInference hot(w.named, options);
  TransformerState burnt = hot.allocate_state(batch, 12);
  hot.forward(prompt, burnt);  // fresh: spread from the start
  ASSERT_TRUE(burnt.spread());
  EXPECT_FALSE(burnt.trusted());
  TransformerState burnt_twin = burnt.clone();
  const std::string spread_refusal = testing::error_of([&] { hot.forward(prompt, burnt); }, ErrorKind::Value);
  const std::string twin_refusal =
      testing::error_of([&] { hot.forward_reference(prompt, burnt_twin, false); }, ErrorKind::Value);
  EXPECT_NE(spread_refusal.find(" in k_cache at flat index"), std::string::npos) << spread_refusal;
  EXPECT_EQ(spread_refusal, twin_refusal);
  EXPECT_EQ(burnt.cached_tokens(), 4);
}

// Pins count: the state stays packed and untrusted while any pin lives, whichever dies first; once the last
// is gone one call scans the state (and trusts it again) and the next one spreads it.
TEST(KvLayout, AStateStaysPackedUntilItsLastPinIsGone) {
  const OneRowDecode decode(31, 8, 32);
  TransformerState state = decode.after_steps(1);
  ASSERT_TRUE(state.spread() && state.trusted());
  std::optional<TransformerState::Pin> k(state.pin_k_cache());
  std::optional<TransformerState::Pin> v(state.pin_v_cache());
  EXPECT_FALSE(state.spread());
  EXPECT_TRUE(state.pinned());
  decode.step(1, state);
  EXPECT_FALSE(state.spread() || state.trusted());
  k.reset();
  EXPECT_TRUE(state.pinned()) << "one pin is still alive";
  decode.step(2, state);
  EXPECT_FALSE(state.spread() || state.trusted());
  v.reset();
  EXPECT_FALSE(state.pinned());
  EXPECT_FALSE(state.trusted()) << "nothing has checked what the pins may have written";
  decode.step(3, state);  // scanned, packed
  EXPECT_TRUE(state.trusted() && !state.spread());
  decode.step(4, state);  // trusted: spread
  EXPECT_TRUE(state.spread() && state.trusted());
}

// A state borrowing caller buffers is always packed and never trusted: what the caller writes between
// calls is read (or refused) by the next call, and the buffers hold the packed layout after every call.
TEST(KvLayout, ABorrowingStateIsPackedAndScannedOnEveryCall) {
  const BlockShape shape{16, 2, 2, 24, 0};
  const TransformerBlockInference block = make_block(shape, 33);
  const std::int64_t batch = 2, dm = 16;
  const std::vector<float> x = random_tokens(batch, 6, dm, 34);
  TransformerState owned = block.allocate_state(batch, 6);
  std::vector<float> k(static_cast<std::size_t>(owned.cache_floats())), v(k.size());
  TransformerState borrowed =
      TransformerState::borrowing(batch, shape.n_kv_heads, owned.head_dim(), 6, 0, k.data(), v.data(), 0);
  for (std::int64_t t = 0; t < 4; ++t) {
    const std::vector<float> one = tokens_at(x, batch, 6, dm, t);
    const TensorView view{one.data(), {batch, 1, dm}};
    ASSERT_TRUE(same_bits(block.step(view, owned), block.step(view, borrowed))) << t;
    EXPECT_FALSE(borrowed.spread() || borrowed.trusted()) << t;
    EXPECT_TRUE(same_bits(k, owned.k_cache_copy())) << t;
    EXPECT_TRUE(same_bits(v, owned.v_cache_copy())) << t;
  }
  EXPECT_EQ(borrowed.cached_tokens(), 4);
  v[5] = fp::quiet_nan();
  const std::vector<float> one = tokens_at(x, batch, 6, dm, 4);
  const std::string refusal = testing::error_of(
      [&] {
        block.step(TensorView{one.data(), {batch, 1, dm}}, borrowed);
      },
      ErrorKind::Value);
  EXPECT_NE(refusal.find("NaN in v_cache at flat index 5"), std::string::npos) << refusal;
  EXPECT_EQ(borrowed.cached_tokens(), 4) << "a refused call commits nothing";
  const TransformerState copy = borrowed.clone();  // an owned copy, untrusted: it was never checked
  EXPECT_FALSE(copy.trusted());
  EXPECT_TRUE(same_bits(copy.v_cache_copy(), v));
}

// A refused call commits nothing: a state refused for a non-finite value it holds keeps its count and
// stays untrusted, so the next call scans it and refuses it again.
TEST(KvLayout, ARefusedCallCommitsNothing) {
  const OneRowDecode decode(35, 4, 36);
  TransformerState state = decode.after_steps(2);
  ASSERT_TRUE(state.spread() && state.trusted());
  state.pin_k_cache().data()[3] = fp::quiet_nan();
  auto refusal = [&] { return testing::error_of([&] { decode.step(2, state); }, ErrorKind::Value); };
  const std::string first = refusal();
  EXPECT_NE(first.find("NaN in k_cache at flat index 3"), std::string::npos) << first;
  EXPECT_EQ(state.cached_tokens(), 2);
  EXPECT_FALSE(state.trusted());
  EXPECT_EQ(refusal(), first);
}

}  // namespace
}  // namespace samebits
