// The ends of a CausalLM stack (docs/models.md §17): the embedding gather before the blocks, the final
// RMSNorm and the head GEMM after them, and the greedy argmax rule of generate (docs/models.md §19).
#pragma once

#include <cstdint>
#include <vector>

#include "numerics/gemm.hpp"

namespace samebits::models {

// Immutable after construction. The head is held once, as packed panels; a tied model gathers its
// embedding rows from those panels (the table's only copy), as the Samba stack does.
class CausalLMEnds {
 public:
  // embed [vocab, d_model]; norm [d_model]; head [vocab, d_model], or empty when tied (the head is the
  // embedding). Sizes are the caller's to check.
  CausalLMEnds(std::int64_t vocab, std::int64_t d_model, std::vector<float> embed, std::vector<float> norm,
               std::vector<float> head, float norm_eps);
  // The same over a head already packed (a GGUF tensor's own codes, docs/gguf.md §14): `embed` empty
  // when tied (the embedding rows are then gathered from `head`).
  CausalLMEnds(std::int64_t vocab, std::int64_t d_model, std::vector<float> embed, std::vector<float> norm,
               gemm::PackedRhs head, float norm_eps);

  std::int64_t vocab() const { return vocab_; }
  std::int64_t d_model() const { return d_model_; }
  bool tied() const { return tied_; }
  float norm_eps() const { return norm_eps_; }

  // x[count, d_model] = F(table[ids[t]]) (docs/numerics.md §5); ids already checked to lie in [0, vocab).
  void embed(const std::int32_t* ids, std::int64_t count, float* x) const;
  // logits[rows, vocab] = GEMM_NT(rmsnorm(x, norm, eps), head); x is overwritten by its norm.
  void logits(float* x, std::int64_t rows, float* out) const;

  // Copies, bit for bit as given.
  std::vector<float> embed_copy() const;
  const std::vector<float>& norm() const { return norm_; }
  std::vector<float> head_copy() const { return head_.unpack_transposed(); }

 private:
  std::int64_t vocab_;
  std::int64_t d_model_;
  bool tied_;
  float norm_eps_;
  std::vector<float> embed_;  // empty when tied
  std::vector<float> norm_;
  gemm::PackedRhs head_;
};

// The greedy pick of one row: a sequential scan from index 0 with a strict '>', so ties go to the lowest
// index, a NaN never replaces the running best and a NaN at index 0 stays the answer.
std::int32_t greedy_argmax(const float* row, std::int64_t count);

}  // namespace samebits::models
