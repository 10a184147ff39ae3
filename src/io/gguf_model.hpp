// A GGUF model file seen as a CausalLM checkpoint (docs/gguf.md §10-§11): the plan its metadata defines for
// the `llama`, `qwen2`, `qwen3` and `phi3` architectures, and its tensors under their Hugging Face names,
// as exact float32 rows with the Q/K row permutation of `llama` undone. This is the one place where GGUF
// weights are built for the model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/gguf.hpp"
#include "io/hf_config.hpp"
#include "numerics/gemm.hpp"

namespace samebits::io {

class GgufModel {
 public:
  // Opens and checks `path`: the architecture (mamba/mamba2 and every other one refused by name), the
  // hyper-parameters, and the tensor set (every tensor one the plan reads, none missing).
  explicit GgufModel(const std::string& path);
  // The same checks on a file's bytes already in memory (`name` stands for the path in messages).
  GgufModel(std::string name, std::string bytes);

  const GgufFile& file() const { return file_; }
  const HFPlan& plan() const { return plan_; }
  // The checkpoint names present (Hugging Face spelling), and whether one is.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return by_name_.count(name) != 0; }
  // The GGUF tensor a checkpoint name reads.
  const std::string& gguf_name(const std::string& name) const;
  // The row-major float32 values of checkpoint tensor `name` and its shape (docs/gguf.md §10.3, §11).
  std::vector<float> read(const std::string& name, std::vector<std::int64_t>& shape) const;
  // Rows [row_begin, row_end) of checkpoint matrix `name` (every row when row_end is 0) as a GEMM operand
  // part in the file's own codes, with llama's Q/K row order undone by the part's row order (docs/gguf.md
  // §12); `cols` receives the row width. Refuses a tensor that is not 2-D or holds a non-finite block.
  gemm::GgmlPart packed_part(const std::string& name, std::int64_t row_begin, std::int64_t row_end,
                             std::int64_t& cols) const;

 private:
  void map_tensors();
  // The head count whose per-head row order the converter permuted in checkpoint tensor `name` (`rows`
  // rows), or 0 when it kept the order (docs/gguf.md §11).
  std::int64_t permuted_heads(const std::string& name, std::int64_t rows) const;

  GgufFile file_;
  HFPlan plan_;
  std::map<std::string, const GgufTensor*> by_name_;
};

// Undoes the `llama` converter's Q/K row order in place (docs/gguf.md §11): `values` holds rows of `cols`
// floats, `heads` blocks of `head_rows` rows each; head row j comes from stored row 2*(j mod half) + j div
// half.
// The stored row of each row of the original order, over `heads` blocks of `head_rows` rows: head row j
// comes from stored row 2*(j mod half) + j div half (docs/gguf.md §11).
std::vector<std::int64_t> rope_row_order(std::int64_t heads, std::int64_t head_rows);
void unpermute_rope_rows(std::vector<float>& values, std::int64_t heads, std::int64_t head_rows,
                         std::int64_t cols);

}  // namespace samebits::io
