// The sampler (docs/api.md §16): penalties on a copy of the logits, then greedy or temperature, top-k,
// top-p, min-p and one draw. Candidates are ordered by logit with the lower id first on ties, and the
// weights use the engine's portable expf (numerics/primitives.hpp), so a seed gives the same token on every
// machine and build.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <samebits/sampler.hpp>

#include <samebits/errors.hpp>
#include "numerics/primitives.hpp"

namespace samebits {

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

void check_sampler_options(const SamplerOptions& o, const std::string& what) {
  const auto refuse = [&](const std::string& rule, double value) {
    throw_value_error(what + ": " + rule + ", got " + std::to_string(value));
  };
  if (!(std::isfinite(o.temperature) && o.temperature >= 0.0))
    refuse("temperature must be >= 0", o.temperature);
  if (o.top_k < 0) refuse("top_k must be >= 0 (0 keeps every token)", static_cast<double>(o.top_k));
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) refuse("top_p must be in (0, 1]", o.top_p);
  if (!(o.min_p >= 0.0 && o.min_p <= 1.0)) refuse("min_p must be in [0, 1]", o.min_p);
  if (!(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0.0))
    refuse("repetition_penalty must be > 0 (1 = off)", o.repetition_penalty);
  if (o.penalty_last_n < 0) refuse("penalty_last_n must be >= 0", static_cast<double>(o.penalty_last_n));
  if (!std::isfinite(o.presence_penalty)) refuse("presence_penalty must be finite", o.presence_penalty);
  if (!std::isfinite(o.frequency_penalty)) refuse("frequency_penalty must be finite", o.frequency_penalty);
}

Sampler::Sampler(const SamplerOptions& options) : options_(options), random_(options.seed) {
  check_sampler_options(options, "samebits Sampler");
}

void Sampler::accept(std::int32_t token) {
  const auto limit = static_cast<std::size_t>(options_.penalty_last_n);
  if (limit == 0) return;
  if (window_.size() == limit) window_.erase(window_.begin());
  window_.push_back(token);
}

std::int32_t Sampler::sample(const float* logits, std::int64_t vocab) {
  if (vocab < 1) throw_value_error("samebits Sampler: vocab must be positive");
  const auto n = static_cast<std::size_t>(vocab);
  const SamplerOptions& o = options_;
  const float* scores = logits;
  const bool penalize = !window_.empty() && (o.repetition_penalty != 1.0 || o.presence_penalty != 0.0 ||
                                             o.frequency_penalty != 0.0);
  if (penalize) {
    // 1. Penalties, once per distinct token of the window, in float (division and subtraction round once).
    scratch_.assign(logits, logits + n);
    std::vector<std::int32_t> seen(window_);
    std::sort(seen.begin(), seen.end());
    const auto repeat = static_cast<float>(o.repetition_penalty);
    const auto presence = static_cast<float>(o.presence_penalty);
    const auto frequency = static_cast<float>(o.frequency_penalty);
    for (std::size_t i = 0; i < seen.size();) {
      std::size_t j = i;
      while (j < seen.size() && seen[j] == seen[i]) ++j;
      const std::int32_t token = seen[i];
      if (token >= 0 && token < vocab) {
        float& l = scratch_[static_cast<std::size_t>(token)];
        if (o.repetition_penalty != 1.0) l = l > 0.0f ? l / repeat : l * repeat;
        const float count = static_cast<float>(j - i);
        l = l - (count * frequency + presence);
      }
      i = j;
    }
    scores = scratch_.data();
  }
  // 2. Temperature 0: the argmax, lowest id on ties.
  if (o.temperature <= 0.0) {
    std::size_t best = 0;
    for (std::size_t u = 1; u < n; ++u)
      if (scores[u] > scores[best]) best = u;
    return static_cast<std::int32_t>(best);
  }
  // 3. Candidates by logit, descending, lower id first on ties; top-k keeps the first k.
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  const auto before = [scores](std::int32_t a, std::int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  std::size_t keep = n;
  if (o.top_k > 0 && static_cast<std::size_t>(o.top_k) < n) {
    keep = static_cast<std::size_t>(o.top_k);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep), order_.end(),
                      before);
  } else {
    std::sort(order_.begin(), order_.end(), before);
  }
  // 4. Softmax weights relative to the best candidate: expf((l - top) / T) in float, summed in double.
  const auto inverse_temperature = static_cast<float>(1.0 / o.temperature);
  const float top = scores[order_[0]];
  weight_.resize(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weight_[i] = primitives::expf((scores[order_[i]] - top) * inverse_temperature);
    total += weight_[i];
  }
  // 5. Top-p: the smallest prefix whose mass reaches top_p of the kept mass.
  if (o.top_p < 1.0) {
    double mass = 0.0;
    std::size_t cut = 0;
    while (cut < keep && mass < o.top_p * total) mass += weight_[cut++];
    keep = std::max<std::size_t>(cut, 1);
    total = mass;
  }
  // 6. Min-p: the prefix whose weights reach min_p times the best one's.
  if (o.min_p > 0.0) {
    const double threshold = o.min_p * weight_[0];
    std::size_t cut = 1;
    double mass = weight_[0];
    while (cut < keep && weight_[cut] >= threshold) mass += weight_[cut++];
    keep = cut;
    total = mass;
  }
  // 7. One draw: u in [0, total), walked over the kept weights in order.
  double u = random_.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    if (u < weight_[i]) return order_[i];
    u -= weight_[i];
  }
  return order_[keep - 1];
}

std::int32_t Sampler::sample_and_accept(const float* logits, std::int64_t vocab) {
  const std::int32_t token = sample(logits, vocab);
  accept(token);
  return token;
}

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStrings::push(char byte) {
  if (stopped_) return {};
  pending_.push_back(byte);
  for (const std::string& s : stops_)
    if (pending_.size() >= s.size() && pending_.compare(pending_.size() - s.size(), s.size(), s) == 0) {
      stopped_ = true;
      std::string out = pending_.substr(0, pending_.size() - s.size());
      pending_.clear();
      return out;
    }
  // Keep the longest suffix that still begins some stop string; everything before it is safe.
  std::size_t hold = 0;
  for (const std::string& s : stops_)
    for (std::size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStrings::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace samebits
