// The ends of a CausalLM stack: embedding, final norm, head and the greedy argmax.
#include "models/causal_lm.hpp"

#include <utility>

#include "core/thread_pool.hpp"
#include "numerics/rmsnorm.hpp"

namespace samebits::models {

CausalLMEnds::CausalLMEnds(std::int64_t vocab, std::int64_t d_model, std::vector<float> embed,
                           std::vector<float> norm, std::vector<float> head, float norm_eps)
    : vocab_(vocab), d_model_(d_model), tied_(head.empty()), norm_eps_(norm_eps), norm_(std::move(norm)) {
  std::vector<float>& table = tied_ ? embed : head;
  head_ = gemm::PackedRhs::from_transposed(table.data(), vocab_, d_model_, Placement::kWeightPool);
  if (tied_)
    std::vector<float>().swap(embed);
  else
    embed_ = std::move(embed);
}

CausalLMEnds::CausalLMEnds(std::int64_t vocab, std::int64_t d_model, std::vector<float> embed,
                           std::vector<float> norm, gemm::PackedRhs head, float norm_eps)
    : vocab_(vocab),
      d_model_(d_model),
      tied_(embed.empty()),
      norm_eps_(norm_eps),
      embed_(std::move(embed)),
      norm_(std::move(norm)),
      head_(std::move(head)) {}

std::vector<float> CausalLMEnds::embed_copy() const { return tied_ ? head_.unpack_transposed() : embed_; }

void CausalLMEnds::embed(const std::int32_t* ids, std::int64_t count, float* x) const {
  const std::int64_t d = d_model_;
  if (!tied_) {
    rmsnorm::embedding(embed_.data(), d, ids, count, x);
    return;
  }
  head_.gather_rows_flushed(ids, count, x);  // the table is the packed head, flushed (F(embed[j][p]))
}

void CausalLMEnds::logits(float* x, std::int64_t rows, float* out) const {
  rmsnorm::rmsnorm(x, norm_.data(), x, rows, d_model_, norm_eps_);
  gemm::gemm_packed({x, d_model_, 1}, rows, head_, out);
}

std::int32_t greedy_argmax(const float* row, std::int64_t count) {
  std::int64_t best = 0;
  for (std::int64_t j = 1; j < count; ++j)
    if (row[j] > row[best]) best = j;
  return static_cast<std::int32_t>(best);
}

}  // namespace samebits::models
