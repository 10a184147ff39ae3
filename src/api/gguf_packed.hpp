// A GGUF model's matrices kept in the file's own codes (docs/gguf.md §14): the transformer layers and the
// head built straight from the mapped bytes, never materialized as float32.
#pragma once

#include <samebits/tensor.hpp>
#include <samebits/transformer.hpp>
#include <string>
#include <vector>

#include "io/gguf_model.hpp"
#include "numerics/gemm.hpp"

namespace samebits::gguf_packed {

// Whether `name` is one of the transformer block's seven projection matrices.
bool is_projection_key(const std::string& key);
// The whole checkpoint matrix `name` as a packed operand (the head, or the tied embedding).
gemm::PackedRhs matrix(const io::GgufModel& gguf, const std::string& name);
// Layer `refs` of the plan: the projections packed from the file (q/k/v and gate/up stacked), the norms
// and optional tensors from `small` (their float32 values by block key), under `options`.
TransformerBlockInference layer(const io::GgufModel& gguf, const std::vector<io::HFTensorRef>& refs,
                                const NamedTensors& small, const TransformerOptions& options,
                                const std::string& weight_format);

}  // namespace samebits::gguf_packed
