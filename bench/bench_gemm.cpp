// GEMM NT throughput on the shapes of the issue, next to this machine's measured FMA peak and
// streaming read bandwidth (bench/gemm_vs_numpy.py puts numpy's sgemm beside them).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <samebits/lowbit.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/thread_pool.hpp"
#include "numerics/gemm.hpp"
#include "numerics/machine_probe.hpp"
#include "numerics/simd_target.hpp"

namespace {

using samebits::AlignedBuffer;
using samebits::gemm::PackedRhs;
using samebits::simd::Target;

struct Shape {
  std::int64_t m, n, k;
};

constexpr Shape kShapes[] = {{1, 4096, 1024},
                             {64, 1024, 1024},
                             {512, 1024, 1024},
                             {512, 4096, 1024},
                             // SmolLM2-135M prefill of 512 tokens: q/o, k/v, gate/up, down, the tied lm head
                             {512, 576, 576},
                             {512, 192, 576},
                             {512, 1536, 576},
                             {512, 576, 1536},
                             {512, 49152, 576},
                             // batched decode of 8 and 32 sequences through SmolLM2's layers
                             {8, 1536, 576},
                             {32, 576, 576},
                             {32, 1536, 576},
                             {32, 576, 1536}};
constexpr int kThreadCounts[] = {1, 2};
// The cold M = 1 variant cycles through weight copies totalling this much, far beyond any L3, so
// every call streams its weight from DRAM as a model with many layers would.
constexpr std::int64_t kColdFootprintBytes = std::int64_t{256} << 20;
constexpr std::size_t kDramProbeBytes = std::size_t{256} << 20;
constexpr double kProbeSeconds = 0.3;

// Deterministic values in [-1, 1): a 64-bit LCG, top 24 bits.
void fill_deterministic(float* data, std::int64_t count, std::uint64_t seed) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    data[i] = static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
}

// Operands per shape, built once: Google Benchmark calls a benchmark body several times.
struct Operands {
  AlignedBuffer<float> a;
  AlignedBuffer<float> c;
  std::vector<PackedRhs> weights;  // one packed weight, or several copies for the cold variant
};

Operands& operands_for(const Shape& s, int copies) {
  static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, Operands> cache;
  Operands& ops = cache[{s.m, s.n, s.k, copies}];
  if (ops.weights.empty()) {
    ops.a.resize_uninitialized(static_cast<std::size_t>(s.m * s.k));
    fill_deterministic(ops.a.data(), s.m * s.k, 1);
    ops.c.assign_zero(static_cast<std::size_t>(s.m * s.n));
    AlignedBuffer<float> w(static_cast<std::size_t>(s.n * s.k));
    fill_deterministic(w.data(), s.n * s.k, 2);
    ops.weights.push_back(PackedRhs::from_transposed(w.data(), s.n, s.k));
    for (int i = 1; i < copies; ++i) ops.weights.push_back(ops.weights.front().clone());
  }
  return ops;
}

std::int64_t packed_bytes(const PackedRhs& rhs) { return static_cast<std::int64_t>(rhs.bytes()); }

// The measured per-core FMA peak of a target (FLOP/s), measured once.
double fma_peak(Target target) {
  static std::map<Target, double> measured;
  auto it = measured.find(target);
  if (it == measured.end())
    it = measured.emplace(target, samebits::machine_probe::measure_fma_peak_flops(target, kProbeSeconds))
             .first;
  return it->second;
}

void run_gemm(benchmark::State& state, Target target, Shape s, int threads, int copies) {
  Operands& ops = operands_for(s, copies);
  const double peak = s.m > 1 ? fma_peak(target) : 0.0;
  samebits::simd::set_target(target);
  samebits::set_num_threads(threads);
  std::size_t next = 0;
  for (auto _ : state) {
    const PackedRhs& w = ops.weights[next];
    next = next + 1 == ops.weights.size() ? 0 : next + 1;
    samebits::gemm::gemm_packed(samebits::gemm::LhsView{ops.a.data(), s.k, 1}, s.m, w, ops.c.data());
    benchmark::DoNotOptimize(ops.c.data());
    benchmark::ClobberMemory();
  }
  samebits::simd::reset_target();
  state.SetLabel(samebits::simd::target_name(target));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0e-9 * static_cast<double>(s.m * s.n * s.k),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  // The fraction of the target's measured FMA peak on `threads` cores (1.0 = every FMA port busy).
  if (peak > 0.0)
    state.counters["peak"] = benchmark::Counter(2.0 * static_cast<double>(s.m * s.n * s.k) / (peak * threads),
                                                benchmark::Counter::kIsIterationInvariantRate);
  if (s.m == 1)
    state.counters["GB/s"] =
        benchmark::Counter(1.0e-9 * static_cast<double>(packed_bytes(ops.weights.front())),
                           benchmark::Counter::kIsIterationInvariantRate);
}

// ---- packed decode: one row times a weight held in each storage, streamed cold from DRAM ----

enum class DecodeFormat { Float32, BFloat16, Int8, Q8_0, Q4_1 };
const char* decode_format_name(DecodeFormat f) {
  constexpr const char* kNames[] = {"f32", "bf16", "int8", "q8_0", "q4_1"};
  return kNames[static_cast<int>(f)];
}

// SmolLM2-135M-Instruct's weights (embedding included): the tokens/s-equivalent column is the rate of
// decode steps that read this many weights stored like the benchmark's one.
constexpr double kModelWeights = 134.5e6;

// Random GGUF blocks of Q8_0 (d, 32 int8) or Q4_1 (d, m, 16 nibble pairs) with small finite fp16 scales.
std::vector<unsigned char> random_ggml_rows(DecodeFormat f, std::int64_t n, std::int64_t k) {
  const std::int64_t block_bytes = f == DecodeFormat::Q8_0 ? 34 : 20;
  std::vector<unsigned char> bytes(static_cast<std::size_t>(n * k / 32 * block_bytes));
  std::uint64_t state = 7;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    bytes[i] = static_cast<unsigned char>(state >> 56);
  }
  for (std::size_t b = 0; b < bytes.size(); b += static_cast<std::size_t>(block_bytes)) {
    bytes[b + 1] = static_cast<unsigned char>(0x20 | (bytes[b + 1] & 0x03));  // d ~ 2^-7
    if (f == DecodeFormat::Q4_1) bytes[b + 3] = static_cast<unsigned char>(0xA0 | (bytes[b + 3] & 0x03));
  }
  return bytes;
}

PackedRhs decode_weight(DecodeFormat f, std::int64_t n, std::int64_t k) {
  if (f == DecodeFormat::Q8_0 || f == DecodeFormat::Q4_1) {
    const auto bytes = random_ggml_rows(f, n, k);
    return PackedRhs::from_ggml("bench", f == DecodeFormat::Q8_0 ? 8 : 3, bytes.data(), n, k,
                                samebits::Placement::kHeap);
  }
  std::vector<float> w(static_cast<std::size_t>(n * k));
  fill_deterministic(w.data(), n * k, 2);
  if (f == DecodeFormat::Float32) return PackedRhs::from_transposed(w.data(), n, k);
  const auto format = f == DecodeFormat::BFloat16 ? samebits::lowbit::WeightFormat::BFloat16
                                                  : samebits::lowbit::WeightFormat::Int8;
  const auto values = samebits::lowbit::materialize(samebits::lowbit::pack_matrix(
      w.data(), static_cast<std::size_t>(n), static_cast<std::size_t>(k), format));
  return *PackedRhs::from_transposed_as(
      values.data(), n, k,
      f == DecodeFormat::BFloat16 ? samebits::gemm::PanelStorage::BF16 : samebits::gemm::PanelStorage::Codes8,
      samebits::Placement::kHeap);
}

double dram_bandwidth(int threads) {
  static std::map<int, double> measured;
  auto it = measured.find(threads);
  if (it == measured.end())
    it = measured
             .emplace(threads, samebits::machine_probe::measure_read_bandwidth(kDramProbeBytes, kProbeSeconds,
                                                                               threads))
             .first;
  return it->second;
}

// hot: every call reads the same weight, which stays in cache when it fits (the kernels' own speed, their
// instruction bound, apart from memory; a shared machine's other loads disturb it far less than a cold row).
void run_packed_decode(benchmark::State& state, DecodeFormat f, Shape s, int threads, Target target,
                       bool hot) {
  // Only the latest weight's copies are kept (rows of one weight are registered side by side): every
  // format's 256 MiB at once would be gigabytes.
  static std::tuple<int, std::int64_t, std::int64_t> held{-1, 0, 0};
  static std::vector<PackedRhs> weights;
  if (held != std::make_tuple(static_cast<int>(f), s.n, s.k)) {
    weights.clear();
    held = {static_cast<int>(f), s.n, s.k};
    weights.push_back(decode_weight(f, s.n, s.k));
    const auto copies =
        std::max<std::int64_t>(2, kColdFootprintBytes / static_cast<std::int64_t>(weights[0].bytes()));
    for (std::int64_t i = 1; i < copies; ++i) weights.push_back(weights.front().clone());
  }
  AlignedBuffer<float> a(static_cast<std::size_t>(s.k)), c(static_cast<std::size_t>(s.n));
  fill_deterministic(a.data(), s.k, 1);
  samebits::simd::set_target(target);
  samebits::set_num_threads(threads);
  const double bandwidth = dram_bandwidth(threads);
  std::size_t next = 0;
  for (auto _ : state) {
    samebits::gemm::gemm_packed(samebits::gemm::LhsView{a.data(), s.k, 1}, 1, weights[next], c.data());
    next = hot || next + 1 == weights.size() ? 0 : next + 1;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  samebits::simd::reset_target();
  const double bytes = static_cast<double>(weights.front().bytes());
  state.SetLabel(std::string(samebits::simd::target_name(target)) + " " + decode_format_name(f));
  state.counters["GB/s"] = benchmark::Counter(1.0e-9 * bytes, benchmark::Counter::kIsIterationInvariantRate);
  // Bytes actually read per call / measured DRAM read bandwidth at this thread count, over the call's time.
  state.counters["roofline"] =
      benchmark::Counter(bytes / bandwidth, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tok/s_eq"] = benchmark::Counter(static_cast<double>(s.n * s.k) / kModelWeights,
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bits/weight"] = 8.0 * bytes / static_cast<double>(s.n * s.k);
}

void run_fma_peak(benchmark::State& state, Target target) {
  double flops = 0.0;
  for (auto _ : state) flops = samebits::machine_probe::measure_fma_peak_flops(target, kProbeSeconds);
  state.SetLabel(samebits::simd::target_name(target));
  state.counters["GFLOP/s"] = flops * 1.0e-9;  // per core: the probe runs on one thread
}

void run_read_bandwidth(benchmark::State& state, std::size_t bytes, int threads) {
  double rate = 0.0;
  for (auto _ : state) rate = samebits::machine_probe::measure_read_bandwidth(bytes, kProbeSeconds, threads);
  state.counters["GB/s"] = rate * 1.0e-9;
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["threads"] = threads;
}

// SAMEBITS_PROBE_BYTES=N (a positive integer): the footprint of a decode step, for the end-to-end benches
// to read their step against (bench/bench_samba.py sets it to the bytes a step must read).
std::size_t footprint_from_environment() {
  const char* text = std::getenv("SAMEBITS_PROBE_BYTES");
  if (text == nullptr) return 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  return end != text && *end == '\0' ? static_cast<std::size_t>(value) : 0;
}

std::string shape_suffix(const Shape& s, int threads) {
  std::string suffix;
  for (std::int64_t part : {s.m, s.n, s.k, static_cast<std::int64_t>(threads)}) {
    suffix += '/';
    suffix += std::to_string(part);
  }
  return suffix;
}

void register_all() {
  const std::vector<Target>& targets = samebits::simd::available_targets();
  for (Target t : targets)
    benchmark::RegisterBenchmark((std::string("BM_FmaPeak/") + samebits::simd::target_name(t)).c_str(),
                                 run_fma_peak, t)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_ReadBandwidth/256MiB", run_read_bandwidth, kDramProbeBytes, 1)
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  // The M = 1 weight size: shows where a 16 MiB weight actually sits (L3 on most servers).
  benchmark::RegisterBenchmark("BM_ReadBandwidth/16MiB", run_read_bandwidth, std::size_t{16} << 20, 1)
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  // A decode step's own footprint, re-read pass after pass by 1 and 2 threads.
  if (const std::size_t footprint = footprint_from_environment(); footprint > 0)
    for (int threads : kThreadCounts)
      benchmark::RegisterBenchmark(
          ("BM_ReadFootprint/" + std::to_string(footprint) + "/" + std::to_string(threads)).c_str(),
          run_read_bandwidth, footprint, threads)
          ->Iterations(1)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);

  const Target best = targets.back();
  std::vector<std::pair<std::string, Target>> variants{{"BM_GemmNT", best}};
  if (best != Target::Avx2 && static_cast<int>(best) > static_cast<int>(Target::Avx2))
    variants.emplace_back("BM_GemmNT_avx2", Target::Avx2);
  for (const auto& [prefix, target] : variants)
    for (const Shape& s : kShapes)
      for (int threads : kThreadCounts)
        benchmark::RegisterBenchmark((prefix + shape_suffix(s, threads)).c_str(), run_gemm, target, s,
                                     threads, 1)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
  // Packed decode rows: SmolLM2-135M's gate/up projection shape ([3072, 576]) and the M = 1 shape above.
  for (const Shape& s : {Shape{1, 3072, 576}, Shape{1, 4096, 1024}})
    for (DecodeFormat f : {DecodeFormat::Float32, DecodeFormat::BFloat16, DecodeFormat::Int8,
                           DecodeFormat::Q8_0, DecodeFormat::Q4_1})
      for (const auto& [prefix, target] : variants)  // prefix.substr(9): "" or "_avx2" after "BM_GemmNT"
        for (int threads : kThreadCounts)
          benchmark::RegisterBenchmark(("BM_GemmDecodePacked" + prefix.substr(9) + "/" +
                                        decode_format_name(f) + shape_suffix(s, threads))
                                           .c_str(),
                                       run_packed_decode, f, s, threads, target, false)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
  // The same at 1 thread from cache (a [1536, 576] weight: at most 3.5 MB as float32, 0.55 MB as Q4_1).
  for (DecodeFormat f : {DecodeFormat::Float32, DecodeFormat::BFloat16, DecodeFormat::Int8,
                         DecodeFormat::Q8_0, DecodeFormat::Q4_1})
    for (const auto& [prefix, target] : variants)
      benchmark::RegisterBenchmark(("BM_GemmDecodePackedHot" + prefix.substr(9) + "/" +
                                    decode_format_name(f) + shape_suffix(Shape{1, 1536, 576}, 1))
                                       .c_str(),
                                   run_packed_decode, f, Shape{1, 1536, 576}, 1, target, true)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  for (const Shape& s : kShapes) {
    if (s.m != 1) continue;
    const std::int64_t weight_bytes = s.n * s.k * static_cast<std::int64_t>(sizeof(float));
    const int copies = static_cast<int>(std::max<std::int64_t>(2, kColdFootprintBytes / weight_bytes));
    for (int threads : kThreadCounts)
      benchmark::RegisterBenchmark(("BM_GemmNTCold" + shape_suffix(s, threads)).c_str(), run_gemm, best, s,
                                   threads, copies)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
