// Mamba-3 block speed (Google Benchmark): prefill tokens/s at L = 512 and the decode step at chosen
// positions, d_model 384 and 768, fast path vs the scalar twin. Threads: SAMEBITS_NUM_THREADS (default all
// cores).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "blocks/mamba3/mamba3.hpp"

namespace {

using samebits::blocks::Mamba3Block;
using samebits::blocks::Mamba3State;

// A deterministic uniform stream (SplitMix64): weights near the golden fixtures' ranges.
std::vector<float> uniform(std::size_t count, float scale, std::uint64_t seed) {
  std::vector<float> v(count);
  for (auto& x : v) {
    std::uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    x = static_cast<float>(static_cast<double>((z ^ (z >> 31)) >> 40) / 8388608.0 - 1.0) * scale;
  }
  return v;
}

const Mamba3Block& block(std::int64_t d_model) {
  static std::map<std::int64_t, std::unique_ptr<Mamba3Block>> cache;
  auto& slot = cache[d_model];
  if (!slot) {
    const auto specs = samebits::blocks::mamba3_tensors(samebits::blocks::Mamba3Dims::of(d_model));
    samebits::blocks::Mamba3Weights w;
    const float scales[9] = {0.1f, 0.125f, 0.5f, 0.1f, 0.1f, 0.5f, 0.5f, 1.0f, 0.125f};
    for (int i = 0; i < 9; ++i) {
      w.tensors[i] = uniform(static_cast<std::size_t>(specs[i].elements()), scales[i], 100 + i);
      if (i == 0 || i == 3 || i == 4)
        for (float& v : w.tensors[i]) v += 1.0f;
    }
    slot = std::make_unique<Mamba3Block>(std::move(w));
  }
  return *slot;
}

void BM_Prefill(benchmark::State& bench) {
  const std::int64_t d_model = bench.range(0), L = bench.range(1);
  const bool twin = bench.range(2) != 0;
  const Mamba3Block& b = block(d_model);
  const auto x = uniform(static_cast<std::size_t>(L * d_model), 2.0f, 7);
  std::vector<float> y(x.size());
  for (auto _ : bench) {
    Mamba3State state = b.allocate_state(1);
    if (twin)
      b.forward_reference(x.data(), 1, L, state, y.data());
    else
      b.forward(x.data(), 1, L, state, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  bench.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(L), benchmark::Counter::kIsIterationInvariantRate);
}

// One decode step at `position` tokens into the sequence (the prepared state is cloned outside the timing).
void BM_Step(benchmark::State& bench) {
  const std::int64_t d_model = bench.range(0), position = bench.range(1);
  const bool reports = bench.range(2) != 0;
  const Mamba3Block& b = block(d_model);
  Mamba3State prepared = b.allocate_state(1);
  if (position > 0) {
    const auto prefix = uniform(static_cast<std::size_t>(position * d_model), 2.0f, 9);
    std::vector<float> y(prefix.size());
    b.forward(prefix.data(), 1, position, prepared, y.data());
  }
  const auto token = uniform(static_cast<std::size_t>(d_model), 2.0f, 11);
  std::vector<float> out(token.size());
  samebits::Mamba3Reports sink;
  Mamba3State state = prepared.clone();
  b.forward(token.data(), 1, 1, state, out.data());  // warm the per-thread scratch
  for (auto _ : bench) {
    bench.PauseTiming();
    state = prepared.clone();
    bench.ResumeTiming();
    b.forward(token.data(), 1, 1, state, out.data(), reports ? &sink : nullptr, "mamba3_decode_step");
    benchmark::DoNotOptimize(out.data());
  }
}

// Consecutive decode steps from `position` on (no state reset: the position advances with the iterations).
void BM_StepRun(benchmark::State& bench) {
  const std::int64_t d_model = bench.range(0), position = bench.range(1);
  const Mamba3Block& b = block(d_model);
  Mamba3State state = b.allocate_state(1);
  const auto prefix = uniform(static_cast<std::size_t>(position * d_model), 2.0f, 9);
  std::vector<float> y(prefix.size());
  b.forward(prefix.data(), 1, position, state, y.data());
  const auto token = uniform(static_cast<std::size_t>(d_model), 2.0f, 11);
  std::vector<float> out(token.size());
  for (auto _ : bench) {
    b.forward(token.data(), 1, 1, state, out.data(), nullptr, "mamba3_decode_step");
    benchmark::DoNotOptimize(out.data());
  }
}

}  // namespace

BENCHMARK(BM_StepRun)->Args({384, 100})->Args({768, 100})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Prefill)->Args({384, 512, 0})->Args({768, 512, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Step)
    ->ArgsProduct({{384, 768}, {1, 63, 64, 65, 1000, 4000}, {0}})
    ->Args({768, 63, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK_MAIN();
