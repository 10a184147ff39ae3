// Mamba3Block: the fast path equals the literal twin bit for bit (outputs, every state piece, reports) on
// every SIMD target and thread count; decode == prefill at every position across the chunk boundaries;
// splits, rows and batches agree; the open-chunk cache survives outside edits; refusals come first.
#include <gtest/gtest.h>

#include <cstring>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "blocks/mamba3/mamba3.hpp"
#include "numerics/fp.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using blocks::Mamba3Block;
using blocks::Mamba3State;
using blocks::Mamba3Weights;
using testing::Rng;
using testing::same_bits;
using testing::value_error_of;

using Forward = void (Mamba3Block::*)(const float*, std::int64_t, std::int64_t, Mamba3State&, float*,
                                      Mamba3Reports*, const char*) const;
constexpr Forward kFast = &Mamba3Block::forward;
constexpr Forward kTwin = &Mamba3Block::forward_reference;

// Weights in the golden fixtures' ranges (projections uniform in [-1/8, 1/8), norms near one).
Mamba3Weights random_weights(std::int64_t d_model, std::uint64_t seed) {
  const auto specs = blocks::mamba3_tensors(blocks::Mamba3Dims::of(d_model));
  Rng rng(seed);
  Mamba3Weights w;
  const float scales[blocks::kMamba3TensorCount] = {0.1f, 0.125f, 0.5f, 0.1f, 0.1f, 0.5f, 0.5f, 1.0f, 0.125f};
  const bool near_one[blocks::kMamba3TensorCount] = {true,  false, false, true, true,
                                                     false, false, false, false};
  for (int i = 0; i < blocks::kMamba3TensorCount; ++i) {
    w.tensors[i] = rng.uniform_vector(static_cast<std::size_t>(specs[i].elements()), scales[i]);
    if (near_one[i])
      for (float& v : w.tensors[i]) v += 1.0f;
  }
  return w;
}

std::vector<float> random_x(std::int64_t B, std::int64_t L, std::int64_t d, std::uint64_t seed) {
  return Rng(seed).uniform_vector(static_cast<std::size_t>(B * L * d), 2.0f);
}

// Columns [t0, t0 + len) of x (B, T, d) as a contiguous (B, len, d) array.
std::vector<float> slice(const std::vector<float>& x, std::int64_t B, std::int64_t T, std::int64_t d,
                         std::int64_t t0, std::int64_t len) {
  std::vector<float> out(static_cast<std::size_t>(B * len * d));
  for (std::int64_t b = 0; b < B; ++b)
    std::memcpy(out.data() + b * len * d, x.data() + (b * T + t0) * d, len * d * sizeof(float));
  return out;
}

// Step t of x (B, T, d_model) as one decode call, through the fast path or the scalar twin.
void decode_step(const Mamba3Block& block, const std::vector<float>& x, std::int64_t B, std::int64_t T,
                 std::int64_t t, Mamba3State& state, std::vector<float>& y, bool twin) {
  const std::vector<float> column = slice(x, B, T, block.dims().d_model, t, 1);
  if (twin)
    block.forward_reference(column.data(), B, 1, state, y.data(), nullptr, "mamba3_forward");
  else
    block.forward(column.data(), B, 1, state, y.data(), nullptr, "mamba3_forward");
}

// Decodes token t on a clone of `state` through the twin, then on `state` itself through the fast path;
// true when the two outputs agree bit for bit.
bool step_matches_twin(const Mamba3Block& block, const std::vector<float>& x, std::int64_t B, std::int64_t T,
                       std::int64_t t, Mamba3State& state) {
  const std::int64_t d = block.dims().d_model;
  std::vector<float> y(static_cast<std::size_t>(B * d)), want(y.size());
  Mamba3State twin = state.clone();
  decode_step(block, x, B, T, t, twin, want, true);
  decode_step(block, x, B, T, t, state, y, false);
  return same_bits(y, want);
}

struct SequenceRun {
  std::vector<float> y;  // (B, T, d)
  Mamba3State state;
  Mamba3Reports reports;  // of the last call
};

// Runs x (B, T, d) through successive calls of the given lengths on `state`.
SequenceRun run_splits(const Mamba3Block& block, Forward fn, const std::vector<float>& x, std::int64_t B,
                       std::int64_t T, const std::vector<std::int64_t>& splits, Mamba3State state) {
  const std::int64_t d = block.dims().d_model;
  SequenceRun run{std::vector<float>(x.size()), std::move(state), {}};
  std::int64_t t0 = 0;
  for (std::int64_t len : splits) {
    const auto part = slice(x, B, T, d, t0, len);
    std::vector<float> y(part.size());
    (block.*fn)(part.data(), B, len, run.state, y.data(), &run.reports, "mamba3_forward");
    for (std::int64_t b = 0; b < B; ++b)
      std::memcpy(run.y.data() + (b * T + t0) * d, y.data() + b * len * d, len * d * sizeof(float));
    t0 += len;
  }
  EXPECT_LE(t0, T);  // a prefix of x may be run
  return run;
}

SequenceRun run_splits(const Mamba3Block& block, Forward fn, const std::vector<float>& x, std::int64_t B,
                       std::int64_t T, const std::vector<std::int64_t>& splits) {
  return run_splits(block, fn, x, B, T, splits, block.allocate_state(B));
}

std::vector<std::int64_t> ones(std::int64_t count) { return std::vector<std::int64_t>(count, 1); }

std::vector<float> piece(const Mamba3State& s, int p) {
  return std::vector<float>(s.piece(p), s.piece(p) + s.piece_elements(p));
}

// Every piece bit for bit, plus the two scalars.
void expect_same_state(const Mamba3State& a, const Mamba3State& b, const std::string& where) {
  EXPECT_EQ(a.buffered_tokens, b.buffered_tokens) << where;
  EXPECT_EQ(a.pending, b.pending) << where;
  for (int p = 0; p < Mamba3State::kPieceCount; ++p)
    EXPECT_TRUE(same_bits(piece(a, p), piece(b, p))) << where << " piece " << Mamba3State::piece_name(p);
}

// The parts a continuation reads: theta, h, the buffered rows (rows past buffered_tokens are stale).
void expect_same_live_state(const Mamba3State& a, const Mamba3State& b, const std::string& where) {
  ASSERT_EQ(a.buffered_tokens, b.buffered_tokens) << where;
  EXPECT_EQ(a.pending, b.pending) << where;
  EXPECT_TRUE(same_bits(piece(a, 0), piece(b, 0))) << where << " theta";
  EXPECT_TRUE(same_bits(piece(a, 1), piece(b, 1))) << where << " h";
  for (int p = 2; p < 8; ++p) {
    const std::int64_t per_batch = a.piece_elements(p) / a.batch();
    const std::int64_t live = per_batch / blocks::mamba3::kChunk * a.buffered_tokens;
    for (std::int64_t bb = 0; bb < a.batch(); ++bb)
      EXPECT_EQ(testing::first_difference(a.piece(p) + bb * per_batch, b.piece(p) + bb * per_batch, live), -1)
          << where << " piece " << Mamba3State::piece_name(p);
  }
}

void expect_same_reports(const Mamba3Reports& a, const Mamba3Reports& b, const std::string& where) {
  EXPECT_TRUE(same_bits(a.h_last, b.h_last)) << where << " h_last";
  EXPECT_TRUE(same_bits(a.k_last, b.k_last)) << where << " k_last";
  EXPECT_TRUE(same_bits(a.v_last, b.v_last)) << where << " v_last";
  EXPECT_TRUE(same_bits(a.theta_last, b.theta_last)) << where << " theta_last";
}

// Two runs agree: output bits, every state piece and the reports; or only the state a continuation reads.
void expect_same_run(const SequenceRun& want, const SequenceRun& got, const std::string& where) {
  EXPECT_TRUE(same_bits(want.y, got.y)) << where;
  expect_same_state(want.state, got.state, where);
  expect_same_reports(want.reports, got.reports, where);
}
void expect_same_live_run(const SequenceRun& want, const SequenceRun& got, const std::string& where) {
  EXPECT_TRUE(same_bits(want.y, got.y)) << where;
  expect_same_live_state(want.state, got.state, where);
  expect_same_reports(want.reports, got.reports, where);
}

TEST(Mamba3Block, FastEqualsTwinOverSizesTargetsAndThreads) {
  struct Case {
    std::int64_t d_model, B, L;
  };
  for (const Case& c : {Case{32, 1, 1}, Case{32, 3, 5}, Case{64, 2, 63}, Case{64, 1, 64}, Case{32, 2, 65},
                        Case{64, 3, 129}}) {
    const Mamba3Block block(random_weights(c.d_model, 11 + c.L));
    const auto x = random_x(c.B, c.L, c.d_model, 7 + c.B);
    const SequenceRun want = run_splits(block, kTwin, x, c.B, c.L, {c.L});
    const std::string what =
        "d_model=" + std::to_string(c.d_model) + " B=" + std::to_string(c.B) + " L=" + std::to_string(c.L);
    testing::for_each_target_and_threads([&](const std::string& where) {
      const SequenceRun got = run_splits(block, kFast, x, c.B, c.L, {c.L});
      ASSERT_TRUE(same_bits(want.y, got.y)) << what << " " << where;
      expect_same_state(want.state, got.state, what + " " + where);
      expect_same_reports(want.reports, got.reports, what + " " + where);
    });
  }
}

TEST(Mamba3Block, LongPrefillEqualsTwin) {
  const Mamba3Block block(random_weights(32, 3));
  const auto x = random_x(1, 300, 32, 4);
  const SequenceRun want = run_splits(block, kTwin, x, 1, 300, {300});
  const SequenceRun got = run_splits(block, kFast, x, 1, 300, {300});
  expect_same_run(want, got, "L=300");
}

// Token-by-token decoding across 63 / 64 / 65 / 128 / 129 equals one stateless forward at every position,
// and the fast decode keeps the twin decode's exact state and reports after every step.
TEST(Mamba3Block, DecodeEqualsPrefillAtEveryPosition) {
  constexpr std::int64_t B = 2, T = 130, D = 64;
  const Mamba3Block block(random_weights(D, 5));
  const auto x = random_x(B, T, D, 6);
  const SequenceRun whole = run_splits(block, kTwin, x, B, T, {T});

  Mamba3State twin_state = block.allocate_state(B), fast_state = block.allocate_state(B);
  for (std::int64_t t = 0; t < T; ++t) {
    const auto token = slice(x, B, T, D, t, 1);
    std::vector<float> y_twin(token.size()), y_fast(token.size());
    Mamba3Reports r_twin, r_fast;
    block.forward_reference(token.data(), B, 1, twin_state, y_twin.data(), &r_twin, "mamba3_decode_step");
    block.forward(token.data(), B, 1, fast_state, y_fast.data(), &r_fast, "mamba3_decode_step");
    const std::string where = "position " + std::to_string(t);
    ASSERT_TRUE(same_bits(y_twin, y_fast)) << where;
    for (std::int64_t b = 0; b < B; ++b)
      ASSERT_EQ(testing::first_difference(y_fast.data() + b * D, whole.y.data() + (b * T + t) * D, D), -1)
          << where << " row " << b;
    expect_same_state(twin_state, fast_state, where);
    expect_same_reports(r_twin, r_fast, where);
    EXPECT_EQ(fast_state.buffered_tokens, t % 64 + 1) << where;
  }
  expect_same_live_state(whole.state, fast_state, "after decode");
}

TEST(Mamba3Block, DecodeOnEveryTargetAndThreadCountEqualsPrefill) {
  constexpr std::int64_t B = 2, T = 70, D = 32;
  const Mamba3Block block(random_weights(D, 8));
  const auto x = random_x(B, T, D, 9);
  const SequenceRun whole = run_splits(block, kTwin, x, B, T, {T});
  testing::for_each_target_and_threads([&](const std::string& where) {
    const SequenceRun decoded = run_splits(block, kFast, x, B, T, ones(T));
    expect_same_live_run(whole, decoded, where);
  });
}

TEST(Mamba3Block, EverySplitEqualsTheWholeSequence) {
  constexpr std::int64_t B = 2, T = 140, D = 64;
  const Mamba3Block block(random_weights(D, 12));
  const auto x = random_x(B, T, D, 13);
  const SequenceRun whole = run_splits(block, kFast, x, B, T, {T});
  const SequenceRun twin_whole = run_splits(block, kTwin, x, B, T, {T});
  ASSERT_TRUE(same_bits(whole.y, twin_whole.y));
  const std::vector<std::vector<std::int64_t>> splits = {
      {5, 7, 128}, {64, 1, 75},  {63, 2, 75}, {40, 40, 50, 10},   {1, 63, 1, 65, 10}, {128, 1, 1, 10},
      {129, 11},   {65, 64, 11}, {139, 1},    {30, 3, 4, 2, 101}, {62, 3, 60, 4, 11}};
  for (const auto& split : splits) {
    std::string what = "split";
    for (auto s : split) what += ' ' + std::to_string(s);
    const SequenceRun got = run_splits(block, kFast, x, B, T, split);
    expect_same_live_run(whole, got, what);
  }
}

TEST(Mamba3Block, RowAloneEqualsRowInBatch) {
  constexpr std::int64_t B = 3, T = 80, D = 32;
  const Mamba3Block block(random_weights(D, 14));
  const auto x = random_x(B, T, D, 15);
  const SequenceRun batch = run_splits(block, kFast, x, B, T, {50, 1, 29});
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<float> row(x.begin() + b * T * D, x.begin() + (b + 1) * T * D);
    const SequenceRun alone = run_splits(block, kFast, row, 1, T, {50, 1, 29});
    EXPECT_EQ(testing::first_difference(alone.y.data(), batch.y.data() + b * T * D, T * D), -1)
        << "row " << b;
    const std::int64_t h_size = alone.state.piece_elements(1);
    EXPECT_EQ(testing::first_difference(alone.state.h(), batch.state.h() + b * h_size, h_size), -1)
        << "row " << b;
  }
}

TEST(Mamba3Block, InputStatesContinuationEqualsTwin) {
  constexpr std::int64_t B = 2, T = 70, D = 32;
  const Mamba3Block block(random_weights(D, 16));
  const auto x = random_x(B, T, D, 17);
  Mamba3State start = block.allocate_state(B);
  Rng rng(18);
  const auto theta = rng.uniform_vector(start.piece_elements(0), 3.0f);
  const auto h = rng.uniform_vector(start.piece_elements(1), 0.5f);
  const auto k = rng.uniform_vector(start.piece_elements(8), 1.0f);
  const auto v = rng.uniform_vector(start.piece_elements(9), 1.0f);
  start.set_input_states(theta.data(), h.data(), k.data(), v.data());
  EXPECT_TRUE(start.pending);
  const SequenceRun want = run_splits(block, kTwin, x, B, T, {5, 1, 64}, start.clone());
  EXPECT_FALSE(want.state.pending);
  testing::for_each_target_and_threads([&](const std::string& where) {
    const SequenceRun got = run_splits(block, kFast, x, B, T, {5, 1, 64}, start.clone());
    expect_same_run(want, got, where);
  });
  // The correction moved the outputs: the same run without it differs.
  const SequenceRun plain = run_splits(block, kFast, x, B, T, {5, 1, 64});
  EXPECT_FALSE(same_bits(want.y, plain.y));
}

// The decode cache is derived from buffer_adt: edits made between calls (as the writable Python views
// allow), clones and a rewound buffered_tokens must all give the twin's bits.
TEST(Mamba3Block, OpenChunkCacheFollowsOutsideEdits) {
  constexpr std::int64_t B = 2, T = 40, D = 32;
  const Mamba3Block block(random_weights(D, 19));
  const auto x = random_x(B, T, D, 20);
  SequenceRun fast = run_splits(block, kFast, x, B, T, ones(10));
  SequenceRun twin = run_splits(block, kTwin, x, B, T, ones(10));
  auto step_both = [&](std::int64_t t, const std::string& where) {
    const auto token = slice(x, B, T, D, t, 1);
    std::vector<float> y_fast(token.size()), y_twin(token.size());
    block.forward(token.data(), B, 1, fast.state, y_fast.data(), nullptr, "mamba3_decode_step");
    block.forward_reference(token.data(), B, 1, twin.state, y_twin.data(), nullptr, "mamba3_decode_step");
    EXPECT_TRUE(same_bits(y_fast, y_twin)) << where;
    expect_same_state(twin.state, fast.state, where);
  };
  // One ULP on a buffered adt row.
  for (Mamba3State* s : {&fast.state, &twin.state}) {
    float& cell = s->pin(Mamba3State::kAdt).data()[3 * block.dims().heads + 0];
    cell = fp::from_bits(fp::bits(cell) + 1);
  }
  step_both(10, "after an adt edit");
  // A rewound buffer: forget the last four rows.
  fast.state.buffered_tokens -= 4;
  twin.state.buffered_tokens -= 4;
  step_both(11, "after a rewind");
  // Clones carry their own cache: both continue exactly like the twin, and an edit in one leaves the other.
  Mamba3State fast_fork = fast.state.clone(), twin_fork = twin.state.clone();
  step_both(12, "original after clone");
  for (Mamba3State* s : {&fast_fork, &twin_fork}) {
    float& cell = s->pin(Mamba3State::kAdt).data()[1];
    cell = fp::from_bits(fp::bits(cell) - 1);
  }
  std::swap(fast.state, fast_fork);
  std::swap(twin.state, twin_fork);
  step_both(12, "edited clone");
  std::swap(fast.state, fast_fork);
  std::swap(twin.state, twin_fork);
  step_both(13, "original after the clone's edit");
}

// Subnormals and values near FLT_MIN in the weights, the input and the carried state reach every flush
// seam; the fast path (whose GEMMs skip flushes only when MXCSR proves them inert) must still match.
TEST(Mamba3Block, SubnormalsInWeightsInputsAndStateMatchTwin) {
  constexpr std::int64_t B = 2, T = 70, D = 32;
  Mamba3Weights w = random_weights(D, 21);
  const float tiny = fp::from_bits(0x00000123u), near_min = fp::from_bits(0x00800001u);
  for (int i : {1, 2, 5, 6, 7, 8})
    for (std::size_t j = 0; j < w.tensors[i].size(); j += 7) w.tensors[i][j] = (j % 2 ? tiny : -near_min);
  w.tensors[7][0] = -tiny;  // D
  const Mamba3Block block(std::move(w));
  auto x = random_x(B, T, D, 22);
  for (std::size_t j = 0; j < x.size(); j += 5) x[j] = (j % 2 ? -tiny : near_min);
  Mamba3State start = block.allocate_state(B);
  Rng rng(23);
  for (int p = 0; p < 2; ++p) {
    auto values = rng.uniform_vector(start.piece_elements(p), 1e-37f);
    std::memcpy(start.pin(p).data(), values.data(), values.size() * sizeof(float));
  }
  const SequenceRun want = run_splits(block, kTwin, x, B, T, {3, 1, 66}, start.clone());
  testing::for_each_target_and_threads([&](const std::string& where) {
    const SequenceRun got = run_splits(block, kFast, x, B, T, {3, 1, 66}, start.clone());
    expect_same_run(want, got, where);
  });
}

TEST(Mamba3Block, RefusalsComeBeforeAnyArithmeticAndLeaveTheStateAlone) {
  constexpr std::int64_t B = 2, D = 32;
  Mamba3Weights w = random_weights(D, 24);
  const Mamba3Block good(w);
  const auto x = random_x(B, 3, D, 25);
  std::vector<float> y(x.size());
  for (Forward fn : {kFast, kTwin}) {
    Mamba3State state = good.allocate_state(B);
    (good.*fn)(x.data(), B, 3, state, y.data(), nullptr, "mamba3_forward");
    const Mamba3State before = state.clone();
    auto call = [&](const std::vector<float>& input, Mamba3State& s, const Mamba3Block& block) {
      return value_error_of([&] { (block.*fn)(input.data(), B, 3, s, y.data(), nullptr, "mamba3_forward"); });
    };
    auto bad_x = x;
    bad_x[5] = fp::quiet_nan();
    EXPECT_EQ(call(bad_x, state, good), "mamba3_forward: NaN in x at flat index 5 REFUSED");
    state.pin(Mamba3State::kH).data()[9] = fp::from_bits(fp::kInfBits);
    EXPECT_EQ(call(x, state, good), "mamba3_forward: infinity in state.h at flat index 9 REFUSED");
    state.pin(Mamba3State::kH).data()[9] = before.h()[9];
    state.pin(Mamba3State::kSig).data()[0] = -fp::from_bits(fp::kInfBits);
    EXPECT_EQ(call(x, state, good), "mamba3_forward: infinity in state.buffer_sig at flat index 0 REFUSED");
    state.pin(Mamba3State::kSig).data()[0] = before.buffer_sig()[0];
    // pending_k is only judged when pending.
    state.pin(Mamba3State::kPendingK).data()[2] = fp::quiet_nan();
    Mamba3State probe = state.clone();
    EXPECT_NO_THROW((good.*fn)(x.data(), B, 3, probe, y.data(), nullptr, "mamba3_forward"));
    state.pin(Mamba3State::kPendingK).data()[2] = 0.0f;
    state.buffered_tokens = 65;
    EXPECT_NE(call(x, state, good).find("mamba3: buf_len must be in [0, 64]"), std::string::npos);
    state.buffered_tokens = -1;
    EXPECT_NE(call(x, state, good).find("got -1"), std::string::npos);
    state.buffered_tokens = before.buffered_tokens;
    state.pending = true;
    EXPECT_EQ(call(x, state, good),
              "Mamba3State.set_input_states: the state is mid-sequence (buf_len = 3); Input_States only has "
              "upstream meaning on a fresh state");
    state.pending = false;
    expect_same_state(before, state, "after refusals");
    EXPECT_NE(value_error_of([&] {
                (good.*fn)(x.data(), B, 0, state, y.data(), nullptr, "mamba3_forward");
              }).find("B and L must be positive"),
              std::string::npos);
    Mamba3State other = good.allocate_state(B + 1);
    EXPECT_NE(call(x, other, good).find("the state holds batch 3"), std::string::npos);
  }
  // Non-finite weights build (upstream judges them per call) and every call refuses them by name.
  w.tensors[1][7] = fp::from_bits(fp::kInfBits);
  const Mamba3Block bad(std::move(w));
  Mamba3State state = bad.allocate_state(B);
  EXPECT_EQ(
      value_error_of([&] { bad.forward(x.data(), B, 3, state, y.data(), nullptr, "mamba3_decode_step"); }),
      "mamba3_decode_step: infinity in in_proj.weight at flat index 7 REFUSED");
  EXPECT_EQ(state.buffered_tokens, 0);
}

TEST(Mamba3Block, WeightSizesAreChecked) {
  Mamba3Weights w = random_weights(32, 26);
  w.tensors[5].pop_back();
  EXPECT_NE(value_error_of([&] { Mamba3Block block(std::move(w)); }).find("B_bias"), std::string::npos);
  Mamba3Weights odd = random_weights(32, 27);
  odd.tensors[0].resize(48);
  EXPECT_NE(value_error_of([&] { Mamba3Block block(std::move(odd)); }).find("multiple of 32"),
            std::string::npos);
}

// Trust: a call skips its state scan only for a state nobody outside the engine could have written since
// the engine checked it. Every way in (a mutable accessor, set_input_states, the twin's writes) ends the
// trust until the engine has run on the state again with no pointer outstanding.
TEST(Mamba3Trust, OnlyAStateTheEngineAloneWroteIsTrusted) {
  const Mamba3Block block(random_weights(32, 40));
  const std::int64_t B = 2;
  const auto x = random_x(B, 3, 32, 41);
  std::vector<float> y(x.size());
  Mamba3State state = block.allocate_state(B);
  EXPECT_TRUE(state.trusted());  // all zeros, written by the engine
  block.forward(x.data(), B, 3, state, y.data(), nullptr, "mamba3_forward");
  EXPECT_TRUE(state.trusted());
  EXPECT_TRUE(state.clone().trusted());
  {
    const Mamba3State::Pin pin = state.pin(Mamba3State::kH);  // a writable view handed out
    EXPECT_FALSE(state.trusted());
    EXPECT_FALSE(state.clone().trusted());
    block.forward(x.data(), B, 3, state, y.data(), nullptr, "mamba3_forward");
    EXPECT_FALSE(state.trusted()) << "the view may still be written";
  }
  EXPECT_FALSE(state.trusted()) << "nothing has checked the state since the view was handed out";
  block.forward(x.data(), B, 3, state, y.data(), nullptr, "mamba3_forward");
  EXPECT_TRUE(state.trusted());
  Mamba3State fresh = block.allocate_state(B);
  const std::vector<float> theta(fresh.piece_elements(0), 0.5f), h(fresh.piece_elements(1), 0.25f),
      k(fresh.piece_elements(8), 1.0f), v(fresh.piece_elements(9), -1.0f);
  fresh.set_input_states(theta.data(), h.data(), k.data(), v.data());
  EXPECT_FALSE(fresh.trusted());
  block.forward(x.data(), B, 3, fresh, y.data(), nullptr, "mamba3_forward");
  EXPECT_TRUE(fresh.trusted());
  block.forward_reference(x.data(), B, 3, fresh, y.data(), nullptr, "mamba3_forward");
  EXPECT_FALSE(fresh.trusted());  // the twin writes the pieces unchecked
}

TEST(Mamba3Trust, AValueWrittenThroughAHeldPointerIsRefusedOnceThePointerIsForgotten) {
  const Mamba3Block block(random_weights(32, 42));
  const auto x = random_x(1, 1, 32, 43);
  std::vector<float> y(x.size());
  Mamba3State state = block.allocate_state(1);
  block.forward(x.data(), 1, 1, state, y.data(), nullptr, "mamba3_forward");
  float* theta = state.pin(Mamba3State::kTheta).data();  // pinned, then written before the next call
  theta[4] = fp::quiet_nan();
  EXPECT_EQ(
      value_error_of([&] { block.forward(x.data(), 1, 1, state, y.data(), nullptr, "mamba3_forward"); }),
      "mamba3_forward: NaN in state.theta at flat index 4 REFUSED");
  theta[4] = 0.0f;
  float* h = nullptr;
  {
    const Mamba3State::Pin held = state.pin(Mamba3State::kH);
    h = held.data();
    block.forward(x.data(), 1, 1, state, y.data(), nullptr, "mamba3_forward");  // scanned: still clean
    h[9] = fp::from_bits(fp::kInfBits);                                         // written after that call
  }
  EXPECT_EQ(
      value_error_of([&] { block.forward(x.data(), 1, 1, state, y.data(), nullptr, "mamba3_forward"); }),
      "mamba3_forward: infinity in state.h at flat index 9 REFUSED");
  float* adt = state.pin(Mamba3State::kAdt).data();
  adt[3] = fp::quiet_nan();
  h[9] = 0.0f;
  EXPECT_EQ(
      value_error_of([&] { block.forward(x.data(), 1, 1, state, y.data(), nullptr, "mamba3_forward"); }),
      "mamba3_forward: NaN in state.buffer_adt at flat index 3 REFUSED");
}

TEST(Mamba3Trust, AStateTheEngineFilledWithOverflowIsScannedAndRefused) {
  // Finite weights so large that the projections overflow: the call itself writes non-finite rows.
  Mamba3Weights w = random_weights(32, 44);
  for (float& value : w.tensors[1]) value = value < 0.0f ? -3e38f : 3e38f;
  const Mamba3Block block(std::move(w));
  const auto x = random_x(1, 2, 32, 45);
  std::vector<float> y(x.size());
  for (std::int64_t length : {1, 2}) {
    Mamba3State state = block.allocate_state(1);
    block.forward(x.data(), 1, length, state, y.data(), nullptr, "mamba3_forward");
    EXPECT_FALSE(state.trusted());
    const std::string refusal =
        value_error_of([&] { block.forward(x.data(), 1, 1, state, y.data(), nullptr, "mamba3_forward"); });
    EXPECT_NE(refusal.find("mamba3_forward: "), std::string::npos) << refusal;
    EXPECT_NE(refusal.find(" in state."), std::string::npos) << refusal;
    EXPECT_NE(refusal.find(" REFUSED"), std::string::npos) << refusal;
  }
}

// Every float a call changes lies in spans_written_by (what the trust check and the Samba undo read).
TEST(Mamba3Trust, ACallWritesOnlyTheSpansItDeclares) {
  const Mamba3Block block(random_weights(32, 46));
  const std::int64_t B = 2;
  const auto x = random_x(B, 200, 32, 47);
  for (std::int64_t q0 : {0, 1, 30, 63, 64}) {
    for (std::int64_t length : {1, 2, 34, 70}) {
      Mamba3State state = block.allocate_state(B);
      std::vector<float> y(static_cast<std::size_t>(B * 200 * 32));
      if (q0 > 0) {
        const auto head = slice(x, B, 200, 32, 0, q0);
        block.forward(head.data(), B, q0, state, y.data(), nullptr, "mamba3_forward");
      }
      const Mamba3State before = state.clone();
      const auto spans = Mamba3State::EngineAccess(state).spans_written_by(length);
      const auto part = slice(x, B, 200, 32, q0, length);
      block.forward(part.data(), B, length, state, y.data(), nullptr, "mamba3_forward");
      const Mamba3State& after = state;
      for (int p = 0; p < Mamba3State::kPieceCount; ++p) {
        const float* old_values = before.piece(p);
        const float* new_values = after.piece(p);
        for (std::int64_t i = 0; i < before.piece_elements(p); ++i) {
          if (fp::bits(old_values[i]) == fp::bits(new_values[i])) continue;
          bool declared = false;
          for (const auto& span : spans)
            declared = declared || (span.at <= new_values + i && new_values + i < span.at + span.count);
          ASSERT_TRUE(declared) << Mamba3State::piece_name(p) << "[" << i << "] changed outside the declared "
                                << "spans (q0 " << q0 << ", length " << length << ")";
        }
      }
    }
  }
}

// Decode rows read h through a transposed copy kept across calls; an edit of h from outside (a pointer
// used right away, or one held across a call) must reach the very next call, exactly as the twin sees it.
TEST(Mamba3Trust, AnEditOfHReachesTheNextDecodeStep) {
  const Mamba3Block block(random_weights(32, 48));
  const auto x = random_x(1, 80, 32, 49);
  std::vector<float> y(32);
  Mamba3State state = block.allocate_state(1);
  auto step = [&](std::int64_t t, Mamba3State& s, std::vector<float>& out, bool twin) {
    decode_step(block, x, 1, 80, t, s, out, twin);
  };
  for (std::int64_t t = 0; t < 67; ++t) step(t, state, y, false);  // sealed once: h is not zero
  ASSERT_TRUE(state.trusted());
  ASSERT_TRUE(Mamba3State::EngineAccess(state).h_transposed_current());
  float* h = state.pin(Mamba3State::kH).data();
  h[5 * 128 + 7] = 0.75f;  // used right away
  EXPECT_TRUE(step_matches_twin(block, x, 1, 80, 67, state));
  {
    const Mamba3State::Pin held = state.pin(Mamba3State::kH);  // held across a call, written after it
    step(68, state, y, false);
    held.data()[9 * 128 + 100] = -1.5f;
  }
  EXPECT_TRUE(step_matches_twin(block, x, 1, 80, 69, state));
  for (std::int64_t t = 70; t < 73; ++t)  // and trusted again afterwards
    EXPECT_TRUE(step_matches_twin(block, x, 1, 80, t, state)) << t;
  EXPECT_TRUE(state.trusted());
}

// Decode rows read the open chunk's buffered keys through a transposed copy the engine keeps up to date
// row by row: after every call it equals buffer_krot's buffered rows, and an edit of a buffered key from
// outside reaches the next call exactly as the twin sees it.
TEST(Mamba3Trust, TheKeysCopyFollowsTheBufferAndOutsideEdits) {
  const Mamba3Block block(random_weights(32, 50));
  const std::int64_t B = 2;
  const auto x = random_x(B, 140, 32, 51);
  std::vector<float> y(B * 32);
  Mamba3State state = block.allocate_state(B);
  auto step = [&](std::int64_t t, Mamba3State& s, std::vector<float>& out, bool twin) {
    decode_step(block, x, B, 140, t, s, out, twin);
  };
  auto copy_matches = [&](Mamba3State& s) {
    Mamba3State::EngineAccess engine(s);
    if (!engine.krot_transposed_current()) return false;
    const float* keys = s.buffer_krot();
    const float* columns = engine.krot_transposed();
    const std::int64_t H = s.heads();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t slot = 0; slot < s.buffered_tokens; ++slot)
          for (std::int64_t n = 0; n < 128; ++n)
            if (fp::bits(columns[((b * H + h) * 128 + n) * 64 + slot]) !=
                fp::bits(keys[((b * 64 + slot) * H + h) * 128 + n]))
              return false;
    return true;
  };
  for (std::int64_t t = 0; t < 70; ++t) {  // across a seal, where the rows start over
    step(t, state, y, false);
    ASSERT_TRUE(copy_matches(state)) << "position " << t;
  }
  ASSERT_TRUE(state.trusted());
  float* keys = state.pin(Mamba3State::kKrot).data();
  keys[(2 * state.heads() + 1) * 128 + 7] = 0.75f;  // slot 2, head 1 of row 0: used right away
  EXPECT_TRUE(step_matches_twin(block, x, B, 140, 70, state));
  {
    const Mamba3State::Pin held = state.pin(Mamba3State::kKrot);  // held across a call, written after it
    step(71, state, y, false);
    held.data()[((64 + 4) * state.heads() + 0) * 128 + 100] = -1.5f;  // slot 4, head 0 of row 1
  }
  EXPECT_TRUE(step_matches_twin(block, x, B, 140, 72, state));
  for (std::int64_t t = 73; t < 76; ++t) {  // and kept again afterwards
    EXPECT_TRUE(step_matches_twin(block, x, B, 140, t, state)) << t;
    EXPECT_TRUE(copy_matches(state)) << t;
  }
  EXPECT_TRUE(state.trusted());
  // buffered_tokens is settable without an accessor: raised over slots the copy has not taken since it was
  // last rebuilt, the next step reads those slots from the buffer (here one edited while outside the rows).
  Mamba3State raised = block.allocate_state(B);
  for (std::int64_t t = 0; t < 66; ++t) step(t, raised, y, false);  // sealed: two rows of the new chunk
  raised.pin(Mamba3State::kKrot).data()[(38 * raised.heads() + 1) * 128 + 3] = 2.5f;  // slot 38, unbuffered
  step(66, raised, y, false);   // rebuilds the copy for slots [0, 3) only
  raised.buffered_tokens = 40;  // slots 3..39 now count, slot 38 edited
  EXPECT_TRUE(step_matches_twin(block, x, B, 140, 67, raised));
}

}  // namespace
}  // namespace samebits
