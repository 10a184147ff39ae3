// Next-token choice for `generate`: greedy or temperature / top-k / top-p sampling, deterministic for a
// seed on every machine (own generator, the engine's exact expf, a fixed tie order).
#pragma once

#include <cstdint>
#include <vector>

namespace samebits::cli {

struct SamplingOptions {
  double temperature = 1.0;  // 0 = greedy (argmax, lowest index on ties)
  std::int64_t top_k = 0;    // 0 = no limit
  double top_p = 1.0;        // nucleus mass kept, in (0, 1]
};

// SplitMix64: tiny, seedable, identical everywhere.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();  // [0, 1) with 53 random bits

 private:
  std::uint64_t state_;
};

std::int32_t choose_token(const float* logits, std::int64_t vocab, const SamplingOptions& options,
                          Random& random);

}  // namespace samebits::cli
