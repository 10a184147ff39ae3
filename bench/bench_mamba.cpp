// Mamba-1 / Mamba-2 blocks at d_model 768: prefill of 1024 tokens and decode steps, the Mamba-2 step at
// positions 1, 255, 256, 1000 and 4000 (flat-cost decoding: the step must not grow with position beyond
// the open chunk's O(chunk) term). The PyTorch comparison lives in bench/bench_mamba.py.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"

namespace {

using namespace samebits;

constexpr std::int64_t kDModel = 768;

// A block over deterministic weights for every tensor of `table` (the block keeps its own copy of them).
template <typename Block, typename Table>
Block make_block(const Table& table, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<std::vector<float>> values;
  values.reserve(table.size());  // the views below point into these vectors
  NamedTensors views;
  for (const auto& t : table) {
    std::vector<float>& v = values.emplace_back(static_cast<std::size_t>(t.elements()));
    for (float& e : v) e = normal(rng);
    const std::string name = t.name;
    if (name.find("norm") != std::string::npos)
      for (float& e : v) e += 1.0f;
    if (name == "A_log")
      for (float& e : v) e = std::log(1.0f + static_cast<float>(rng() % 16));
    if (name == "dt_proj.bias" || name == "dt_bias")
      for (float& e : v) e = -4.0f + static_cast<float>(rng() % 100) * 0.04f;
    views.push_back({name, TensorView{v.data(), t.shape}});
  }
  return Block(views);
}

std::vector<float> tokens(std::int64_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count * kDModel));
  for (float& e : x) e = normal(rng);
  return x;
}

const Mamba1BlockInference& mamba1() {
  static const Mamba1BlockInference block =
      make_block<Mamba1BlockInference>(blocks::mamba1_tensors(blocks::Mamba1Dims::for_d_model(kDModel)), 1);
  return block;
}

const Mamba2BlockInference& mamba2() {
  static const Mamba2BlockInference block =
      make_block<Mamba2BlockInference>(blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(kDModel)), 2);
  return block;
}

// A prefill of s.range(0) tokens (drawn from `seed`) from a zero state, with its token rate.
template <typename Block>
void prefill(benchmark::State& s, const Block& block, std::uint32_t seed) {
  const std::int64_t L = s.range(0);
  const std::vector<float> x = tokens(L, seed);
  for (auto _ : s) benchmark::DoNotOptimize(block.forward({x.data(), {1, L, kDModel}}));
  s.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Mamba1Prefill(benchmark::State& s) { prefill(s, mamba1(), 3); }
BENCHMARK(BM_Mamba1Prefill)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Mamba1Step(benchmark::State& s) {
  const std::vector<float> x = tokens(1, 4);
  Mamba1State state = mamba1().allocate_state(1);
  for (auto _ : s) benchmark::DoNotOptimize(mamba1().step({x.data(), {1, 1, kDModel}}, &state));
}
BENCHMARK(BM_Mamba1Step)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Mamba2Prefill(benchmark::State& s) { prefill(s, mamba2(), 5); }
BENCHMARK(BM_Mamba2Prefill)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// One decode step at absolute position p (p tokens already in the state), from a copy of that state.
void BM_Mamba2StepAt(benchmark::State& s) {
  const std::int64_t position = s.range(0);
  Mamba2State prefilled = mamba2().allocate_state(1);
  if (position > 0) {
    const std::vector<float> prefix = tokens(position, 6);
    mamba2().forward({prefix.data(), {1, position, kDModel}}, &prefilled);
  }
  const std::vector<float> x = tokens(1, 7);
  for (auto _ : s) {
    s.PauseTiming();
    Mamba2State state = prefilled.clone();
    s.ResumeTiming();
    benchmark::DoNotOptimize(mamba2().step({x.data(), {1, 1, kDModel}}, &state));
  }
  s.counters["open_rows"] = static_cast<double>(position % 256);
}
BENCHMARK(BM_Mamba2StepAt)
    ->Arg(1)
    ->Arg(255)
    ->Arg(256)
    ->Arg(1000)
    ->Arg(4000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Steady decoding: consecutive steps on one state (the open chunk's kept rows are reused).
void BM_Mamba2Step(benchmark::State& s) {
  const std::vector<float> x = tokens(1, 8);
  Mamba2State state = mamba2().allocate_state(1);
  for (auto _ : s) benchmark::DoNotOptimize(mamba2().step({x.data(), {1, 1, kDModel}}, &state));
}
BENCHMARK(BM_Mamba2Step)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
