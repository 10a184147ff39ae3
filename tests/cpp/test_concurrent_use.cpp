// One shared model, four caller threads with their own states: every thread's outputs equal the outputs
// of the same calls made one after another, bit for bit, with the engine's pool at 1 and 2 workers (so
// several callers use the pool at once), on every SIMD target. The tsan preset runs this under
// ThreadSanitizer.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <functional>
#include <latch>
#include <samebits/samebits.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/simd_target.hpp"
#include "test_mamba_support.hpp"
#include "test_samba_support.hpp"
#include "test_support.hpp"
#include "test_transformer_support.hpp"

namespace samebits {
namespace {

constexpr int kCallers = 4;
constexpr int kRoundsPerPoolSize = 2;
constexpr std::int64_t kWidth = 32;  // d_model of every model here

// Every output of one caller's sequence of calls, in call order.
using Outputs = std::vector<std::vector<float>>;
// The calls one caller makes; `caller` picks its inputs and shapes so the callers do different work.
using Workload = std::function<Outputs(int caller)>;

std::string describe_difference(const Outputs& want, const Outputs& got) {
  if (want.size() != got.size())
    return "output count " + std::to_string(got.size()) + ", want " + std::to_string(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i].size() != got[i].size())
      return "output " + std::to_string(i) + " has " + std::to_string(got[i].size()) + " floats, want " +
             std::to_string(want[i].size());
    if (!want[i].empty() && std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)) != 0)
      return "output " + std::to_string(i) + " differs at float " +
             std::to_string(testing::first_difference(want[i].data(), got[i].data(),
                                                      static_cast<std::int64_t>(want[i].size())));
  }
  return "";
}

// Restores the pool size and the SIMD target however a check ends.
struct EngineSettingsGuard {
  int threads = num_threads();
  ~EngineSettingsGuard() {
    set_num_threads(threads);
    simd::reset_target();
  }
};

// The sequential results are computed first with a one-thread pool; then all callers run at once, started
// together, at each pool size. A caller's exception is rethrown here so it fails the test.
void check_on_active_target(const Workload& workload, const std::string& target) {
  set_num_threads(1);
  std::vector<Outputs> sequential;
  for (int caller = 0; caller < kCallers; ++caller) sequential.push_back(workload(caller));
  // Finite, non-empty outputs: equal bits then mean equal arithmetic, not two runs of the same NaNs.
  for (const Outputs& outputs : sequential)
    for (const auto& output : outputs) {
      ASSERT_FALSE(output.empty());
      for (float value : output) ASSERT_TRUE(fp::is_finite(value)) << target;
    }

  for (int pool_size : {1, 2}) {
    set_num_threads(pool_size);
    for (int round = 0; round < kRoundsPerPoolSize; ++round) {
      std::vector<Outputs> concurrent(kCallers);
      std::vector<std::exception_ptr> errors(kCallers);
      std::latch start(kCallers);
      std::vector<std::thread> threads;
      for (int caller = 0; caller < kCallers; ++caller)
        threads.emplace_back([&, caller] {
          start.arrive_and_wait();
          try {
            concurrent[caller] = workload(caller);
          } catch (...) {
            errors[caller] = std::current_exception();
          }
        });
      for (auto& thread : threads) thread.join();
      for (int caller = 0; caller < kCallers; ++caller) {
        if (errors[caller]) std::rethrow_exception(errors[caller]);
        EXPECT_EQ(describe_difference(sequential[caller], concurrent[caller]), "")
            << target << ", caller " << caller << ", pool of " << pool_size << ", round " << round;
      }
    }
  }
}

// Every SIMD target this machine runs (each has its own kernels and per-thread scratch).
void expect_concurrent_equals_sequential(const Workload& workload) {
  const EngineSettingsGuard restore;
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    check_on_active_target(workload, simd::target_name(target));
  }
}

// Time steps [t0, t0 + len) of every row of a row-major (B, L, width) array (width 1 for ids).
template <typename T>
std::vector<T> columns(const std::vector<T>& x, std::int64_t B, std::int64_t L, std::int64_t width,
                       std::int64_t t0, std::int64_t len) {
  std::vector<T> out(static_cast<std::size_t>(B * len * width));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < len * width; ++i)
      out[static_cast<std::size_t>(b * len * width + i)] =
          x[static_cast<std::size_t>((b * L + t0) * width + i)];
  return out;
}

std::vector<std::int32_t> random_ids(std::int64_t count, std::int64_t vocab, std::uint64_t seed) {
  testing::Rng rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(vocab));
  return ids;
}

// Batch and length of caller `caller`: different per caller, so the callers' work differs.
std::int64_t batch_of(int caller) { return 1 + caller % 2; }
std::int64_t length_of(int caller) { return 10 + 3 * caller; }
std::int64_t split_of(int caller) { return 3 + caller; }

SambaInference tiny_samba() {
  const models::SambaConfig config(testing::samba_args(32, kWidth, {"mamba3", "attention"}, 4, 48, false, 2));
  return SambaInference(config, testing::samba_parameters(config, 77, 0.08f, true));
}

TEST(ConcurrentUse, SambaForwardCarriedStepRagged) {
  const SambaInference model = tiny_samba();
  const std::int64_t vocab = model.config().vocab();
  expect_concurrent_equals_sequential([&](int caller) {
    const std::int64_t B = batch_of(caller), L = length_of(caller), split = split_of(caller);
    const auto ids = random_ids(B * L, vocab, 300 + caller);
    Outputs out;
    out.push_back(model.forward({ids.data(), B, L}));

    SambaState carried = model.allocate_state(B, L);
    const auto head = columns(ids, B, L, 1, 0, split), tail = columns(ids, B, L, 1, split, L - split);
    out.push_back(model.forward({head.data(), B, split}, carried));
    out.push_back(model.forward({tail.data(), B, L - split}, carried));

    SambaState decoding = model.allocate_state(B, L);
    out.push_back(model.forward({head.data(), B, split}, decoding));
    for (std::int64_t t = split; t < L; ++t) {
      const auto column = columns(ids, B, L, 1, t, 1);
      out.push_back(model.step({column.data(), B, 1}, decoding));
    }

    const std::int64_t rows = 3;
    const auto ragged_ids = random_ids(rows * L, vocab, 400 + caller);
    out.push_back(model.forward_ragged({ragged_ids.data(), rows, L}, {L, split, 1}));
    return out;
  });
}

// A Llama block's stateless, carried, step and ragged calls (full causal or windowed cache).
void check_transformer(std::int64_t window) {
  const TransformerBlockInference block = testing::make_block({kWidth, 4, 2, 48, window}, 500 + window);
  expect_concurrent_equals_sequential([&](int caller) {
    const std::int64_t B = batch_of(caller), L = length_of(caller), split = split_of(caller);
    const auto x = testing::random_tokens(B, L, kWidth, 600 + caller);
    Outputs out;
    out.push_back(block.forward({x.data(), {B, L, kWidth}}));

    TransformerState carried = block.allocate_state(B, L);
    const auto head = columns(x, B, L, kWidth, 0, split), tail = columns(x, B, L, kWidth, split, L - split);
    out.push_back(block.forward({head.data(), {B, split, kWidth}}, carried));
    out.push_back(block.forward({tail.data(), {B, L - split, kWidth}}, carried));

    TransformerState decoding = block.allocate_state(B, L);
    out.push_back(block.forward({head.data(), {B, split, kWidth}}, decoding));
    for (std::int64_t t = split; t < L; ++t) {
      const auto column = columns(x, B, L, kWidth, t, 1);
      out.push_back(block.step({column.data(), {B, kWidth}}, decoding));
    }

    const std::int64_t rows = 3;
    const auto ragged_x = testing::random_tokens(rows, L, kWidth, 700 + caller);
    out.push_back(block.forward_ragged({ragged_x.data(), {rows, L, kWidth}}, {L, split, 1}));
    return out;
  });
}

TEST(ConcurrentUse, TransformerForwardCarriedStepRagged) { check_transformer(0); }
TEST(ConcurrentUse, WindowedTransformerForwardCarriedStepRagged) { check_transformer(6); }

// A Mamba block's stateless, carried and step calls; Block is Mamba2BlockInference or Mamba3BlockInference.
template <typename Block>
void check_mamba_block(const Block& block, std::uint64_t seed) {
  expect_concurrent_equals_sequential([&](int caller) {
    const std::int64_t B = batch_of(caller), L = length_of(caller), split = split_of(caller);
    const auto x = testing::Rng(seed + caller).uniform_vector(static_cast<std::size_t>(B * L * kWidth), 2.0f);
    Outputs out;
    out.push_back(block.forward({x.data(), {B, L, kWidth}}));

    auto carried = block.allocate_state(B);
    const auto head = columns(x, B, L, kWidth, 0, split), tail = columns(x, B, L, kWidth, split, L - split);
    out.push_back(block.forward({head.data(), {B, split, kWidth}}, &carried));
    out.push_back(block.forward({tail.data(), {B, L - split, kWidth}}, &carried));

    auto decoding = block.allocate_state(B);
    out.push_back(block.forward({head.data(), {B, split, kWidth}}, &decoding));
    for (std::int64_t t = split; t < L; ++t) {
      const auto column = columns(x, B, L, kWidth, t, 1);
      out.push_back(block.step({column.data(), {B, kWidth}}, &decoding));
    }
    return out;
  });
}

TEST(ConcurrentUse, Mamba2ForwardCarriedStep) {
  testing::WeightSet w =
      testing::random_weights(blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(kWidth)), 800);
  for (float& v : w["A_log"]) v = -1.5f + v * 0.5f;  // A about -0.2: moderate decay, as test_mamba2 uses
  for (float& v : w["dt_bias"]) v = -3.0f + v * 0.5f;
  const Mamba2BlockInference block(w.views());
  check_mamba_block(block, 900);
}

TEST(ConcurrentUse, Mamba3ForwardCarriedStep) {
  const testing::WeightSet w =
      testing::random_weights(blocks::mamba3_tensors(blocks::Mamba3Dims::of(kWidth)), 1000);
  const Mamba3BlockInference block(w.views());
  check_mamba_block(block, 1100);
}

}  // namespace
}  // namespace samebits
