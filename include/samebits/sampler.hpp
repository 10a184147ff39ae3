// The next-token sampler shared by the CLI and the Python API: penalties, temperature, top-k, top-p, min-p
// and a seeded draw, in the fixed order of docs/api.md §16, with the same choice on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace samebits {

// SplitMix64: a tiny seedable generator whose sequence is the same on every platform.
class SplitMix64 {
 public:
  // Starts the sequence at `seed`; equal seeds give equal sequences.
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  // The next 64 random bits.
  std::uint64_t next();
  // A double in [0, 1) built from the top 53 bits of next().
  double uniform();

 private:
  std::uint64_t state_;
};

// What the sampler does; the defaults leave the distribution as the model gives it.
struct SamplerOptions {
  // Divides the logits before the softmax; 0 chooses greedily (argmax, lowest id on ties).
  double temperature = 1.0;
  // Keeps only the k most likely tokens; 0 keeps all.
  std::int64_t top_k = 0;
  // Keeps the smallest most-likely prefix whose probability mass reaches top_p, in (0, 1].
  double top_p = 1.0;
  // Drops tokens whose probability is below min_p times the most likely token's, in [0, 1].
  double min_p = 0.0;
  // Divides a positive (multiplies a negative) logit of every token seen in the window; 1 = off.
  double repetition_penalty = 1.0;
  // The window the three penalties look at: the last N accepted tokens (prompt included); 0 = none.
  std::int64_t penalty_last_n = 64;
  // Subtracted once from the logit of every token present in the window.
  double presence_penalty = 0.0;
  // Subtracted from a token's logit once per occurrence in the window.
  double frequency_penalty = 0.0;
  // Seeds the draw; the same seed, options and logits give the same tokens.
  std::uint64_t seed = 0;
};

// Throws samebits::Error (a ValueError in Python) naming the first option out of range; `what` starts the
// message ("samebits generate").
void check_sampler_options(const SamplerOptions& options, const std::string& what);

// Chooses tokens from logits under SamplerOptions; a value type, so a copy continues identically.
class Sampler {
 public:
  // Checks the options (check_sampler_options) and seeds the generator with options.seed.
  explicit Sampler(const SamplerOptions& options);
  // The options this sampler was built with.
  const SamplerOptions& options() const { return options_; }
  // Records a token in the penalty window (feed the prompt's tokens, then every chosen one).
  void accept(std::int32_t token);
  // Chooses the next token from `vocab` finite logits; the caller accepts it (see accept()).
  std::int32_t sample(const float* logits, std::int64_t vocab);
  // sample() then accept() of its result.
  std::int32_t sample_and_accept(const float* logits, std::int64_t vocab);
  // The penalty window, oldest first (at most penalty_last_n tokens).
  const std::vector<std::int32_t>& window() const { return window_; }

 private:
  SamplerOptions options_;
  SplitMix64 random_;
  std::vector<std::int32_t> window_;
  std::vector<float> scratch_;
  std::vector<std::int32_t> order_;
  std::vector<double> weight_;
};

// Stop strings over a byte stream: holds back the bytes that may begin a stop string and reports when one
// is complete (the stop string itself is never released).
class StopStrings {
 public:
  // Empty strings are ignored; no strings means never stopping.
  explicit StopStrings(std::vector<std::string> stops = {});
  // Adds one byte; returns the bytes now safe to release. stopped() turns true once a stop string ends here.
  std::string push(char byte);
  // True once a stop string was completed; later push() calls release nothing.
  bool stopped() const { return stopped_; }
  // The held-back bytes (call at the end of generation when no stop string completed).
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace samebits
