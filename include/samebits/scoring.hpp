// Scoring a text under a model's logits: the negative log-likelihood of each target token, computed with
// the engine's portable exp and log (docs/numerics.md §2.1, §2.2), so a score is the same on every machine.
#pragma once

#include <cstdint>
#include <vector>

namespace samebits {

// -log softmax(logits)[target] in nats for one row of `vocab` logits: top + log(sum exp(l - top)) -
// l[target], the sum taken in double in index order. target must be in [0, vocab).
double token_nll(const float* logits, std::int64_t vocab, std::int32_t target);

// token_nll of every row of a [rows, vocab] block against targets[rows], spread over the worker threads;
// the values do not depend on the thread count.
std::vector<double> token_nlls(const float* logits, std::int64_t rows, std::int64_t vocab,
                               const std::int32_t* targets);

}  // namespace samebits
