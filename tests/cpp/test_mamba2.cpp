// Mamba2BlockInference: the recorded upstream digests (hashed fixtures), fast == literal twin across chunk
// boundaries on every target and thread count, flat-cost decoding == the twin's re-run of the open chunk,
// the lazily evaluated h_last report, foreign and edited states, and the refusals.
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

constexpr float kInf = std::numeric_limits<float>::infinity();

blocks::Mamba2Dims dims_of(std::int64_t d_model) { return blocks::Mamba2Dims::for_d_model(d_model); }

WeightSet golden_weights() {
  return testing::golden_lane("mamba2", blocks::mamba2_tensors(dims_of(32)),
                              {"block_norm.weight", "norm.weight"});
}

using testing::digest;

// Random weights whose dt spans small and large steps and whose A decays moderately, so segment sums
// and decays cover a wide range over a 256-row chunk.
WeightSet mamba2_weights(std::int64_t dm, std::uint64_t seed) {
  WeightSet w = testing::random_weights(blocks::mamba2_tensors(dims_of(dm)), seed);
  for (float& v : w["A_log"]) v = -1.5f + v * 0.5f;  // A about -0.2
  for (float& v : w["dt_bias"]) v = -3.0f + v * 0.5f;
  return w;
}

bool same_state(Mamba2State& a, Mamba2State& b, std::string* where) {
  auto same = [](const float* x, const float* y, std::int64_t n) {
    return testing::first_difference(x, y, n) == -1;
  };
  if (a.buffered_tokens() != b.buffered_tokens()) return *where = "buffered_tokens", false;
  if (!same(a.h(), b.h(), a.h_size())) return *where = "h", false;
  if (!same(a.conv_window(), b.conv_window(), a.conv_window_size())) return *where = "conv_window", false;
  // Only the open chunk's rows of the buffers are state; rows past buffered_tokens are stale either way.
  const std::int64_t cd = a.conv_dim(), H = a.nheads(), q = a.buffered_tokens();
  for (std::int64_t bb = 0; bb < a.batch(); ++bb) {
    if (!same(a.buffer_xbc() + bb * 256 * cd, b.buffer_xbc() + bb * 256 * cd, q * cd))
      return *where = "buffer_xbc", false;
    if (!same(a.buffer_dtraw() + bb * 256 * H, b.buffer_dtraw() + bb * 256 * H, q * H))
      return *where = "buffer_dtraw", false;
  }
  return true;
}

TEST(Mamba2Golden, HashedHeldOutForwardFastTwinAndDecode) {
  const Mamba2BlockInference block(golden_weights().views());
  const std::vector<float> x = testing::hashed_slab(1, 1024);
  const Mamba2State state = testing::expect_forward_twin_and_decode(block, x, "fa5cdfa7a8028ea4");
  EXPECT_EQ(state.buffered_tokens(), 16);
}

TEST(Mamba2Golden, HashedTrainingDecodeStep) {
  const Mamba2BlockInference block(golden_weights().views());
  const std::vector<float> x = testing::hashed_slab(0, 1024);
  const std::vector<float> x0 = testing::time_slice(x, 2, 16, 32, 0, 1);
  for (bool reference : {false, true}) {
    Mamba2State state = block.allocate_state(2);
    const TensorView xv{x.data(), {2, 16, 32}}, x0v{x0.data(), {2, 1, 32}};
    if (reference)
      block.forward_reference(xv, &state);
    else
      block.forward(xv, &state);
    const std::vector<float> y = reference ? block.step_reference(x0v, &state) : block.step(x0v, &state);
    EXPECT_EQ(digest(y, {2, 1, 32}), "795c0526eb99905f") << "reference=" << reference;
  }
}

// One stateless forward of L tokens across chunk boundaries: fast == twin (outputs, state, h_last) on
// every target and thread count.
TEST(Mamba2Bits, FastEqualsTwinAcrossChunksTargetsAndThreads) {
  struct Case {
    std::int64_t dm, B, L;
    float lo, hi;
  };
  for (const Case& c :
       {Case{64, 2, 300, 0.0f, kInf}, Case{32, 1, 513, 0.01f, 0.1f}, Case{32, 3, 7, 0.0f, kInf}}) {
    const Mamba2BlockInference block(mamba2_weights(c.dm, 21).views(), c.lo, c.hi);
    Rng rng(static_cast<std::uint64_t>(c.L));
    const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(c.B * c.L * c.dm), 2.0f);
    Mamba2State twin_state = block.allocate_state(c.B);
    std::vector<float> twin_h_last;
    const std::vector<float> want =
        block.forward_reference({x.data(), {c.B, c.L, c.dm}}, &twin_state, &twin_h_last);
    testing::for_each_target_and_threads([&](const std::string& where) {
      Mamba2State state = block.allocate_state(c.B);
      Mamba2Report report;
      const std::vector<float> got = block.forward({x.data(), {c.B, c.L, c.dm}}, &state, &report);
      ASSERT_TRUE(testing::same_bits(want, got)) << "L=" << c.L << " dm=" << c.dm << " " << where;
      std::string which;
      ASSERT_TRUE(same_state(state, twin_state, &which)) << which << " " << where;
      ASSERT_TRUE(testing::same_bits(report.h_last(), twin_h_last)) << where;
    });
  }
}

TEST(Mamba2Bits, InitialStatesAndEditedBuffersFollowTheTwin) {
  const std::int64_t dm = 32;
  const Mamba2BlockInference block(mamba2_weights(dm, 22).views());
  Rng rng(5);
  // A non-zero h on a fresh state is upstream's initial_states.
  Mamba2State fresh = block.allocate_state(1);
  for (std::int64_t i = 0; i < fresh.h_size(); ++i)
    fresh.pin(Mamba2State::kH).data()[i] = rng.uniform() * 0.5f;
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(40 * dm), 2.0f);
  Mamba2State twin = fresh.clone();
  std::vector<float> twin_h_last;
  const std::vector<float> want = block.forward_reference({x.data(), {1, 40, dm}}, &twin, &twin_h_last);
  Mamba2Report report;
  EXPECT_TRUE(testing::same_bits(block.forward({x.data(), {1, 40, dm}}, &fresh, &report), want));
  EXPECT_TRUE(testing::same_bits(report.h_last(), twin_h_last));

  // Editing a buffered raw dt row (as a caller may through the writable views) must be honoured: the
  // kept derived rows no longer match the buffer and are rebuilt.
  fresh.pin(Mamba2State::kBufferDtraw).data()[17] += 0.25f;
  twin.pin(Mamba2State::kBufferDtraw).data()[17] += 0.25f;
  fresh.pin(Mamba2State::kBufferXbc).data()[3 * 320 + 5] = 0.125f;
  twin.pin(Mamba2State::kBufferXbc).data()[3 * 320 + 5] = 0.125f;
  // So must an edit of h between calls: a decode step reads each head's h through a transposed copy
  // that it keeps only while nobody else can have written h.
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{129}, fresh.h_size() - 1}) {
    fresh.pin(Mamba2State::kH).data()[i] = 0.75f;
    twin.pin(Mamba2State::kH).data()[i] = 0.75f;
  }
  const std::vector<float> x2 = rng.uniform_vector(static_cast<std::size_t>(dm), 2.0f);
  std::vector<float> twin2;
  const std::vector<float> want2 = block.step_reference({x2.data(), {1, 1, dm}}, &twin, &twin2);
  Mamba2Report report2;
  EXPECT_TRUE(testing::same_bits(block.step({x2.data(), {1, 1, dm}}, &fresh, &report2), want2));
  EXPECT_TRUE(testing::same_bits(report2.h_last(), twin2));

  // A state carried by another block (other weights) is continued from its buffer, not from rows this
  // state kept for the first block.
  const Mamba2BlockInference other(mamba2_weights(dm, 23).views());
  Mamba2State foreign = fresh.clone();
  Mamba2State foreign_twin = fresh.clone();
  EXPECT_TRUE(testing::same_bits(other.step({x2.data(), {1, 1, dm}}, &foreign),
                                 other.step_reference({x2.data(), {1, 1, dm}}, &foreign_twin)));
}

// Flat-cost decoding: step by step through 600 tokens equals one forward at every position, and at the
// positions around the chunk boundaries each fast step equals the twin's literal re-run of the open
// chunk from the same state (output, state, and h_last).
TEST(Mamba2Decode, StepsEqualForwardAndTheTwinAcrossChunkBoundaries) {
  const std::int64_t dm = 32, B = 2, L = 600;
  const Mamba2BlockInference block(mamba2_weights(dm, 24).views(), 0.001f, 2.0f);
  Rng rng(6);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(B * L * dm), 2.0f);
  const std::vector<float> whole = block.forward({x.data(), {B, L, dm}});
  const std::vector<std::int64_t> checked = {0, 1, 2, 130, 254, 255, 256, 257, 258, 511, 512, 513, 599};
  Mamba2State state = block.allocate_state(B);
  std::size_t next_check = 0;
  for (std::int64_t t = 0; t < L; ++t) {
    const std::vector<float> xt = testing::time_slice(x, B, L, dm, t, 1);
    const TensorView xv{xt.data(), {B, 1, dm}};
    const bool check = next_check < checked.size() && checked[next_check] == t;
    Mamba2State twin_state = check ? state.clone() : Mamba2State(1, dm);
    Mamba2Report report;
    const std::vector<float> y = block.step(xv, &state, &report);
    ASSERT_TRUE(testing::same_bits(y, testing::time_slice(whole, B, L, dm, t, 1))) << "position " << t;
    ASSERT_EQ(state.buffered_tokens(), (t + 1) % 256);
    if (check) {
      ++next_check;
      std::vector<float> twin_h_last;
      ASSERT_TRUE(testing::same_bits(block.step_reference(xv, &twin_state, &twin_h_last), y))
          << "position " << t;
      std::string which;
      ASSERT_TRUE(same_state(state, twin_state, &which)) << which << " at position " << t;
      ASSERT_TRUE(testing::same_bits(report.h_last(), twin_h_last)) << "h_last at position " << t;
    }
  }
  ASSERT_EQ(next_check, checked.size());
}

TEST(Mamba2Decode, SplitPrefillsRowsAndPrefixesAgree) {
  const std::int64_t dm = 32, B = 3, L = 530;
  const Mamba2BlockInference block(mamba2_weights(dm, 25).views());
  Rng rng(7);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(B * L * dm), 2.0f);
  const std::vector<float> whole = block.forward({x.data(), {B, L, dm}});
  // Splits that start and end inside chunks and on boundaries, mixing forward and step.
  Mamba2State state = block.allocate_state(B);
  std::vector<float> pieces(whole.size());
  std::int64_t t0 = 0;
  for (std::int64_t n : {5, 7, 243, 1, 1, 250, 1, 2, 18, 2}) {
    const std::vector<float> part = testing::time_slice(x, B, L, dm, t0, n);
    const std::vector<float> y = n == 1 ? block.step({part.data(), {B, dm}}, &state)
                                        : block.forward({part.data(), {B, n, dm}}, &state);
    testing::put_time_slice(pieces, y, B, L, dm, t0, n);
    t0 += n;
  }
  ASSERT_EQ(t0, L);
  EXPECT_TRUE(testing::same_bits(pieces, whole));
  for (std::int64_t b = 0; b < B; ++b) {
    const std::vector<float> row = testing::batch_slice(x, L, dm, b, 1);
    EXPECT_TRUE(testing::same_bits(block.forward({row.data(), {1, L, dm}}),
                                   testing::batch_slice(whole, L, dm, b, 1)));
  }
  for (std::int64_t n : {1, 255, 256, 257, 512, 513}) {
    const std::vector<float> prefix = testing::time_slice(x, B, L, dm, 0, n);
    EXPECT_TRUE(testing::same_bits(block.forward({prefix.data(), {B, n, dm}}),
                                   testing::time_slice(whole, B, L, dm, 0, n)))
        << "prefix " << n;
  }
}

TEST(Mamba2Report, IsTheStateAfterTheCallEvenWhenReadLater) {
  const std::int64_t dm = 32;
  const Mamba2BlockInference block(mamba2_weights(dm, 26).views());
  Rng rng(8);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(20 * dm), 2.0f);
  Mamba2State state = block.allocate_state(1), twin = block.allocate_state(1);
  Mamba2Report first;
  std::vector<float> twin_first, twin_second;
  block.forward({x.data(), {1, 10, dm}}, &state, &first);
  block.forward_reference({x.data(), {1, 10, dm}}, &twin, &twin_first);
  EXPECT_FALSE(first.evaluated());
  // The next call on the same state settles the pending report before changing the state.
  Mamba2Report second;
  block.forward({x.data() + 10 * dm, {1, 10, dm}}, &state, &second);
  block.forward_reference({x.data() + 10 * dm, {1, 10, dm}}, &twin, &twin_second);
  EXPECT_TRUE(first.evaluated());
  EXPECT_TRUE(testing::same_bits(first.h_last(), twin_first));
  EXPECT_TRUE(testing::same_bits(second.h_last(), twin_second));
  EXPECT_FALSE(testing::same_bits(twin_first, twin_second));
  // The resumption h is still the zero boundary (no chunk completed); h_last is not.
  for (std::int64_t i = 0; i < state.h_size(); ++i) ASSERT_EQ(fp::bits(state.h()[i]), 0u);
}

TEST(Mamba2Refusals, WithUpstreamWording) {
  using testing::error_of;
  using testing::value_error_of;
  const std::int64_t dm = 32;
  WeightSet w = mamba2_weights(dm, 27);
  NamedTensors bad = w.views();
  bad[0].second.shape = {48};
  EXPECT_EQ(value_error_of([&] { Mamba2BlockInference b(bad); }),
            "samebits Mamba2Block: d_model must be a multiple of 32 so that nheads = 2*d_model/64 is whole "
            "(profile "
            "constants headdim 64, expand 2); got 48");
  bad = w.views();
  bad[5].second.shape = {2};
  EXPECT_EQ(value_error_of([&] { Mamba2BlockInference b(bad); }),
            "samebits Mamba2Block: A_log has shape (2,), want (1,)");
  const Mamba2BlockInference block(w.views());
  std::vector<float> x(2 * dm, 0.5f);
  Mamba2State state = block.allocate_state(2);
  state.set_buffered_tokens(256);
  EXPECT_EQ(value_error_of([&] {
              block.step({x.data(), {2, dm}}, &state);
            }),
            "mamba2_decode_step: buf_len must be in [0, 256) (the rows of the open chunk), got 256");
  state.set_buffered_tokens(-1);
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {2, 1, dm}}, &state);
            }),
            "mamba2_forward: buf_len must be in [0, 256) (the rows of the open chunk), got -1");
  state.set_buffered_tokens(3);
  state.pin(Mamba2State::kBufferXbc).data()[1000] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {2, 1, dm}}, &state);
            }),
            "mamba2_forward: NaN in buffer_xbc at flat index 1000 REFUSED");
  EXPECT_EQ(state.buffered_tokens(), 3);
  EXPECT_EQ(value_error_of([&] {
              block.step({x.data(), {2, 1, dm}}, nullptr);
            }),
            "samebits Mamba2Block.step: state is required (a decode step continues a sequence; "
            "allocate_state(B) makes "
            "the fresh one)");
  Mamba2State one = block.allocate_state(1);
  EXPECT_EQ(value_error_of([&] {
              block.forward({x.data(), {2, 1, dm}}, &one);
            }),
            "samebits Mamba2Block.forward: state buffer conv_window has shape (1, 320, 4), want (2, 320, 4)");
  EXPECT_EQ(
      error_of([&] { block.backward(); }, ErrorKind::NotImplemented),
      "samebits Mamba2BlockInference.backward: inference is forward only; the backward pass runs on the GPU "
      "block class over a training binding");
  WeightSet nan_weights = w;
  nan_weights["norm.weight"][7] = std::numeric_limits<float>::quiet_NaN();
  const Mamba2BlockInference nan_block(nan_weights.views());
  EXPECT_EQ(value_error_of([&] {
              nan_block.forward({x.data(), {2, 1, dm}});
            }),
            "mamba2_forward: NaN in norm.weight at flat index 7 REFUSED");
}

// Trust: a call skips its state scan only for a state nobody outside the engine could have written since
// the engine checked it (see Mamba2State::trusted).
TEST(Mamba2Trust, OnlyAStateTheEngineAloneWroteIsTrusted) {
  using testing::value_error_of;
  const std::int64_t dm = 32;
  const Mamba2BlockInference block(mamba2_weights(dm, 60).views());
  std::vector<float> x(dm, 0.5f);
  Mamba2State state = block.allocate_state(1);
  EXPECT_TRUE(state.trusted());
  block.step({x.data(), {1, dm}}, &state);
  EXPECT_TRUE(state.trusted());
  EXPECT_TRUE(state.clone().trusted());
  float* h = nullptr;
  {
    const Mamba2State::Pin held = state.pin(Mamba2State::kH);
    h = held.data();
    EXPECT_FALSE(state.trusted());
    block.step({x.data(), {1, dm}}, &state);  // scanned: clean
    EXPECT_FALSE(state.trusted()) << "the view may still be written";
    h[17] = kInf;  // written after that call
  }
  auto refusal = [&] { return value_error_of([&] { block.step({x.data(), {1, dm}}, &state); }); };
  EXPECT_EQ(refusal(), "mamba2_decode_step: infinity in h at flat index 17 REFUSED");
  h[17] = 0.0f;
  block.step({x.data(), {1, dm}}, &state);
  EXPECT_TRUE(state.trusted());
  float* window = state.pin(Mamba2State::kConvWindow).data();  // pinned, then written before the next call
  window[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(refusal(), "mamba2_decode_step: NaN in conv_window at flat index 2 REFUSED");
  window[2] = 0.0f;
  block.step_reference({x.data(), {1, dm}}, &state);
  EXPECT_FALSE(state.trusted());  // the twin does not check what it writes
}

TEST(Mamba2Trust, AStateTheEngineFilledWithOverflowIsScannedAndRefused) {
  using testing::value_error_of;
  const std::int64_t dm = 32;
  WeightSet w = mamba2_weights(dm, 61);
  for (float& v : w["in_proj.weight"]) v = v < 0.0f ? -3e38f : 3e38f;  // finite, but the products overflow
  const Mamba2BlockInference block(w.views());
  std::vector<float> x(dm, 0.5f);
  Mamba2State state = block.allocate_state(1);
  block.step({x.data(), {1, dm}}, &state);
  EXPECT_FALSE(state.trusted());
  const std::string refusal = value_error_of([&] { block.step({x.data(), {1, dm}}, &state); });
  EXPECT_EQ(refusal.rfind("mamba2_decode_step: ", 0), 0u) << refusal;
  EXPECT_NE(refusal.find(" REFUSED"), std::string::npos) << refusal;
}

// A trusted state's decode steps reuse kept copies (each head's h^T and discretized Xd rows), and so does
// its clone (which copies only the open chunk's Xd rows). They must give way to an edit of the buffer
// alone (no raw dt edit, so the derived dt rows stay valid) and to a state continued by another block
// (whose dt differs), each step equal to the twin's.
TEST(Mamba2Trust, KeptCopiesGiveWayToEditsAndOtherBlocks) {
  const std::int64_t dm = 64, B = 2;
  const Mamba2BlockInference block(mamba2_weights(dm, 62).views());
  const Mamba2BlockInference other(mamba2_weights(dm, 63).views());
  Rng rng(9);
  Mamba2State state = block.allocate_state(B);
  auto step_both = [&](const Mamba2BlockInference& by, Mamba2State& fast, const char* what) {
    const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(B * dm), 2.0f);
    Mamba2State twin = fast.clone();
    const std::vector<float> want = by.step_reference({x.data(), {B, dm}}, &twin);
    EXPECT_TRUE(testing::same_bits(by.step({x.data(), {B, dm}}, &fast), want)) << what;
  };
  for (int t = 0; t < 20; ++t) step_both(block, state, "plain decoding");
  ASSERT_TRUE(state.trusted());

  Mamba2State forked = state.clone();  // the same block continues a copy: the copy keeps the copies
  ASSERT_TRUE(forked.trusted());
  step_both(block, forked, "a clone's first step");
  step_both(block, forked, "a clone's second step");

  Mamba2State continued = state.clone();
  ASSERT_TRUE(continued.trusted());
  step_both(other, continued, "another block's first step");
  step_both(other, continued, "another block's second step");

  const std::int64_t cd = state.conv_dim();
  state.pin(Mamba2State::kBufferXbc).data()[(1 * 256 + 5) * cd + 70] +=
      0.5f;  // row 1, open row 5, head 1's x
  step_both(block, state, "after an edit of one buffered x value");
  step_both(block, state, "the step after it");
  ASSERT_TRUE(state.trusted());
}

// Every float a call changes lies in spans_written_by (what the trust check reads after the call).
TEST(Mamba2Trust, ACallWritesOnlyTheSpansItDeclares) {
  const std::int64_t dm = 32, B = 2;
  const Mamba2BlockInference block(mamba2_weights(dm, 62).views());
  const std::vector<float> x = Rng(63).uniform_vector(static_cast<std::size_t>(B * 600 * dm), 2.0f);
  for (std::int64_t q0 : {0, 1, 100, 254, 255}) {
    for (std::int64_t length : {1, 2, 156, 300}) {
      Mamba2State state = block.allocate_state(B);
      if (q0 > 0) block.forward({x.data(), {B, q0, dm}}, &state);
      ASSERT_EQ(state.buffered_tokens(), q0);
      const Mamba2State before = state.clone();
      const auto spans = blocks::Mamba2State::EngineAccess(ApiAccess::engine(state)).spans_written_by(length);
      block.forward({x.data() + B * q0 * dm, {B, length, dm}}, &state);
      const Mamba2State& after = state;
      auto check = [&](const float* old_values, const float* new_values, std::int64_t count,
                       const char* name) {
        for (std::int64_t i = 0; i < count; ++i) {
          if (fp::bits(old_values[i]) == fp::bits(new_values[i])) continue;
          bool declared = false;
          for (const auto& span : spans)
            declared = declared || (span.at <= new_values + i && new_values + i < span.at + span.count);
          ASSERT_TRUE(declared) << name << "[" << i << "] changed outside the declared spans (q0 " << q0
                                << ", length " << length << ")";
        }
      };
      check(before.conv_window(), after.conv_window(), before.conv_window_size(), "conv_window");
      check(before.h(), after.h(), before.h_size(), "h");
      check(before.buffer_xbc(), after.buffer_xbc(), before.buffer_xbc_size(), "buffer_xbc");
      check(before.buffer_dtraw(), after.buffer_dtraw(), before.buffer_dtraw_size(), "buffer_dtraw");
    }
  }
}

}  // namespace
}  // namespace samebits
