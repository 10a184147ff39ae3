// Per-token negative log-likelihood (include/samebits/scoring.hpp): the array exp of numerics/vector_math
// (bit for bit the scalar primitives::expf on every SIMD target) and primitives::logf.
#include <algorithm>
#include <samebits/scoring.hpp>

#include <samebits/errors.hpp>
#include "core/thread_pool.hpp"
#include "numerics/primitives.hpp"
#include "numerics/vector_math.hpp"

namespace samebits {
namespace {

double nll_with(const float* logits, std::int64_t vocab, std::int32_t target, std::vector<float>& scratch) {
  const auto n = static_cast<std::size_t>(vocab);
  float top = logits[0];
  for (std::size_t u = 1; u < n; ++u) top = std::max(top, logits[u]);
  scratch.resize(n);
  for (std::size_t u = 0; u < n; ++u) scratch[u] = logits[u] - top;
  vector_math::exp(scratch.data(), scratch.data(), n);
  double total = 0.0;
  for (std::size_t u = 0; u < n; ++u) total += scratch[u];
  return static_cast<double>(top) - logits[target] + primitives::logf(static_cast<float>(total));
}

void check_target(std::int64_t vocab, std::int32_t target) {
  if (vocab < 1 || target < 0 || target >= vocab)
    throw_value_error("samebits token_nll: target " + std::to_string(target) + " is outside [0, " +
                      std::to_string(vocab) + ")");
}

}  // namespace

double token_nll(const float* logits, std::int64_t vocab, std::int32_t target) {
  check_target(vocab, target);
  std::vector<float> scratch;
  return nll_with(logits, vocab, target, scratch);
}

std::vector<double> token_nlls(const float* logits, std::int64_t rows, std::int64_t vocab,
                               const std::int32_t* targets) {
  for (std::int64_t r = 0; r < rows; ++r) check_target(vocab, targets[r]);
  std::vector<double> out(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)));
  parallel_for(
      rows,
      [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> scratch;
        for (std::int64_t r = begin; r < end; ++r)
          out[static_cast<std::size_t>(r)] = nll_with(logits + r * vocab, vocab, targets[r], scratch);
      },
      64);
  return out;
}

}  // namespace samebits
