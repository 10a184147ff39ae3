// Where a Samba forward's time goes: the benchmark model (vocab 256, d 384, [mamba3, attention] x 2) run
// stateless at B x L, its wall time split by stage_clock into projection GEMMs, Mamba-3 scans (everything
// between a block's in_proj and out_proj) and attention (scores, softmax, values, RoPE and the KV cache),
// the rest (norms, residuals, SwiGLU, embedding) by difference. Prints one JSON object per thread count.
//
//   bench_samba_split [--threads 1 2] [--repeats 5] [--batch 2] [--length 512]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <samebits/engine.hpp>
#include <samebits/json.hpp>
#include <samebits/samba.hpp>
#include <string>
#include <vector>

#include "core/stage_clock.hpp"
#include "numerics/simd_target.hpp"

namespace {

using samebits::stage_clock::kStageCount;

// A deterministic uniform stream in [-1, 1) (SplitMix64).
float next_uniform(std::uint64_t& seed) {
  std::uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<float>(static_cast<double>((z ^ (z >> 31)) >> 40) / 8388608.0 - 1.0);
}

// Weights in the Python benchmark's ranges: matrices ~ 1/sqrt(fan_in), norms and vectors near one.
std::vector<std::vector<float>> weights_for(const samebits::SambaConfig& config) {
  std::vector<std::vector<float>> out;
  std::uint64_t seed = 11;
  for (const samebits::SambaTensorEntry& entry : config.registry()) {
    std::vector<float> values(static_cast<std::size_t>(entry.size));
    const bool matrix = entry.shape.size() == 2;
    const float scale = entry.name == "embed.weight" ? 0.1f
                        : matrix                     ? 1.0f / std::sqrt(static_cast<float>(entry.shape[1]))
                                                     : 0.1f;
    for (float& v : values) v = (matrix ? 0.0f : 1.0f) + scale * next_uniform(seed);
    out.push_back(std::move(values));
  }
  return out;
}

struct Split {
  double total = 1e30;
  std::array<double, kStageCount> stages{};
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads;
  int repeats = 5;
  std::int64_t batch = 2, length = 512;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) {
      while (i + 1 < argc && argv[i + 1][0] != '-') threads.push_back(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      batch = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--length") == 0 && i + 1 < argc) {
      length = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--threads N...] [--repeats N] [--batch B] [--length L]\n", argv[0]);
      return 2;
    }
  }
  if (threads.empty()) threads = {1, 2};
  const samebits::SambaConfig config = samebits::SambaConfig::from_json(samebits::json::parse(
      R"({"vocab": 256, "d_model": 384, "layers": ["mamba3", "attention", "mamba3", "attention"],
          "n_heads": 6, "n_kv_heads": 6, "head_dim": 64, "intermediate": 1024, "tie_embeddings": true,
          "norm_eps": 1e-5, "dropout": 0.0})"));
  const samebits::SambaInference model(config, weights_for(config));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * length));
  std::uint64_t seed = 5;
  for (std::int32_t& id : ids) id = static_cast<std::int32_t>((next_uniform(seed) + 1.0f) * 127.5f) % 256;
  const samebits::IdsView view{ids.data(), batch, length};
  for (int t : threads) {
    samebits::set_num_threads(t);
    Split best;
    for (int r = 0; r <= repeats; ++r) {  // the first round warms up and counts like any other
      samebits::stage_clock::enable(true);
      const auto start = std::chrono::steady_clock::now();
      const std::vector<float> logits = model.forward(view);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto stages = samebits::stage_clock::totals();
      samebits::stage_clock::enable(false);
      if (logits.empty()) return 1;
      if (seconds < best.total) best = {seconds, stages};
    }
    std::printf(
        "{\"threads\": %d, \"isa\": \"%s\", \"batch\": %lld, \"length\": %lld, \"seconds\": %.6f, "
        "\"projection\": %.6f, "
        "\"scan\": %.6f, \"attention\": %.6f}\n",
        t, samebits::simd::target_name(samebits::simd::active_target()), static_cast<long long>(batch),
        static_cast<long long>(length), best.total, best.stages[0], best.stages[1], best.stages[2]);
  }
  return 0;
}
