// Mamba-1 / Mamba-2 blocks at d_model 768: prefill of 1024 tokens and decode steps, the Mamba-2 step at
// positions 1, 255, 256, 1000 and 4000 (flat-cost decoding: the step must not grow with position beyond
// the open chunk's O(chunk) term). The PyTorch comparison lives in bench/bench_mamba.py.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "api/mamba_inference.hpp"

namespace {

using namespace samebits;

constexpr std::int64_t kDModel = 768;

struct Weights {
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::vector<float>> values;
  NamedTensors views() const {
    NamedTensors out;
    for (std::size_t i = 0; i < names.size(); ++i)
      out.push_back({names[i], TensorView{values[i].data(), shapes[i]}});
    return out;
  }
};

template <typename Table>
Weights make_weights(const Table& table, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  Weights w;
  for (const auto& t : table) {
    w.names.emplace_back(t.name);
    w.shapes.push_back(t.shape);
    std::vector<float> v(static_cast<std::size_t>(t.elements()));
    for (float& e : v) e = normal(rng);
    const std::string name = t.name;
    if (name.find("norm") != std::string::npos)
      for (float& e : v) e += 1.0f;
    if (name == "A_log")
      for (float& e : v) e = std::log(1.0f + static_cast<float>(rng() % 16));
    if (name == "dt_proj.bias" || name == "dt_bias")
      for (float& e : v) e = -4.0f + static_cast<float>(rng() % 100) * 0.04f;
    w.values.push_back(std::move(v));
  }
  return w;
}

std::vector<float> tokens(std::int64_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count * kDModel));
  for (float& e : x) e = normal(rng);
  return x;
}

const Mamba1BlockInference& mamba1() {
  static const Weights w = make_weights(blocks::mamba1_tensors(blocks::Mamba1Dims::for_d_model(kDModel)), 1);
  static const Mamba1BlockInference block(w.views());
  return block;
}

const Mamba2BlockInference& mamba2() {
  static const Weights w = make_weights(blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(kDModel)), 2);
  static const Mamba2BlockInference block(w.views());
  return block;
}

void BM_Mamba1Prefill(benchmark::State& s) {
  const std::int64_t L = s.range(0);
  const std::vector<float> x = tokens(L, 3);
  for (auto _ : s) benchmark::DoNotOptimize(mamba1().forward({x.data(), {1, L, kDModel}}));
  s.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Mamba1Prefill)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Mamba1Step(benchmark::State& s) {
  const std::vector<float> x = tokens(1, 4);
  Mamba1State state = mamba1().allocate_state(1);
  for (auto _ : s) benchmark::DoNotOptimize(mamba1().step({x.data(), {1, 1, kDModel}}, &state));
}
BENCHMARK(BM_Mamba1Step)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Mamba2Prefill(benchmark::State& s) {
  const std::int64_t L = s.range(0);
  const std::vector<float> x = tokens(L, 5);
  for (auto _ : s) benchmark::DoNotOptimize(mamba2().forward({x.data(), {1, L, kDModel}}));
  s.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
}
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
