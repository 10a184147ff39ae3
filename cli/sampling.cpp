// Sampling for `generate`: candidates sorted by logit (index breaks ties), softmax with the exact expf.
#include "sampling.hpp"

#include <algorithm>
#include <numeric>
#include <samebits/engine.hpp>

namespace samebits::cli {

std::uint64_t Random::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Random::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::int32_t choose_token(const float* logits, std::int64_t vocab, const SamplingOptions& options,
                          Random& random) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  if (options.temperature <= 0.0) return order[0];
  std::size_t keep = order.size();
  if (options.top_k > 0) keep = std::min<std::size_t>(keep, static_cast<std::size_t>(options.top_k));
  // Softmax over the kept candidates, in float with the engine's portable expf so that the same seed gives
  // the same text on every machine.
  const float inverse_temperature = static_cast<float>(1.0 / options.temperature);
  const float top = logits[order[0]];
  std::vector<double> weight(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weight[i] = exact_exp((logits[order[i]] - top) * inverse_temperature);
    total += weight[i];
  }
  if (options.top_p < 1.0) {  // the smallest prefix whose mass reaches top_p
    double mass = 0.0;
    std::size_t cut = 0;
    while (cut < keep && mass < options.top_p * total) mass += weight[cut++];
    keep = std::max<std::size_t>(cut, 1);
    total = mass;
  }
  double u = random.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    if (u < weight[i]) return order[i];
    u -= weight[i];
  }
  return order[keep - 1];
}

}  // namespace samebits::cli
