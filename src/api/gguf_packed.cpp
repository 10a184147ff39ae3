// GGUF layers and heads packed in the file's own codes (docs/gguf.md §14).
#include "api/gguf_packed.hpp"

#include <memory>
#include <samebits/errors.hpp>
#include <utility>

#include "api/api_access.hpp"
#include "api/transformer_options.hpp"
#include "blocks/transformer/transformer.hpp"

namespace samebits::gguf_packed {
namespace {

const std::string kBlock = "samebits TransformerBlock";

// The parts of `keys` (in order) as the plan's refs name them, all `k` wide.
gemm::PackedRhs stacked(const io::GgufModel& gguf, const std::vector<io::HFTensorRef>& refs,
                        const std::vector<std::string>& keys, std::int64_t k) {
  std::vector<gemm::GgmlPart> parts;
  for (const std::string& key : keys) {
    const io::HFTensorRef* ref = nullptr;
    for (const io::HFTensorRef& r : refs)
      if (r.key == key) ref = &r;
    if (ref == nullptr) throw_value_error(kBlock + ": the layer has no " + key);
    std::int64_t cols = 0;
    parts.push_back(gguf.packed_part(ref->name, ref->row_begin, ref->row_end, cols));
    if (cols != k)
      throw_value_error(kBlock + ": " + key + " (" + gguf.gguf_name(ref->name) + ") has rows of " +
                        std::to_string(cols) + " elements and the config wants " + std::to_string(k));
  }
  return gemm::PackedRhs::from_ggml(parts, k);
}

}  // namespace

bool is_projection_key(const std::string& key) {
  for (const char* p : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                        "gate_proj.weight", "up_proj.weight", "down_proj.weight"})
    if (key == p) return true;
  return false;
}

gemm::PackedRhs matrix(const io::GgufModel& gguf, const std::string& name) {
  std::int64_t cols = 0;
  gemm::GgmlPart part = gguf.packed_part(name, 0, 0, cols);
  return gemm::PackedRhs::from_ggml({std::move(part)}, cols);
}

TransformerBlockInference layer(const io::GgufModel& gguf, const std::vector<io::HFTensorRef>& refs,
                                const NamedTensors& small, const TransformerOptions& options,
                                const std::string& weight_format) {
  blocks::BlockOptions block = transformer_options::block_options(options, kBlock);  // docs/models.md §2
  const TensorView* norm = nullptr;
  for (const auto& entry : small)
    if (entry.first == "input_layernorm.weight") norm = &entry.second;
  if (norm == nullptr || norm->shape.size() != 1 || norm->shape[0] < 1)
    throw_value_error(kBlock + ": input_layernorm.weight must be 1-D (d_model,)");
  blocks::TransformerDims d;
  d.d_model = norm->shape[0];
  d.n_heads = options.n_heads;
  d.head_dim = options.head_dim ? *options.head_dim : d.d_model / d.n_heads;
  d.n_kv_heads = options.n_kv_heads ? *options.n_kv_heads : d.n_heads;
  d.window = options.window;
  block.rope_dim = transformer_options::check_rope_dim(options, d.head_dim, kBlock);
  blocks::TransformerProjections packed;
  packed.qkv = stacked(gguf, refs, {"q_proj.weight", "k_proj.weight", "v_proj.weight"}, d.d_model);
  packed.o = stacked(gguf, refs, {"o_proj.weight"}, d.n_heads * d.head_dim);
  packed.gate_up = block.gated() ? stacked(gguf, refs, {"gate_proj.weight", "up_proj.weight"}, d.d_model)
                                 : stacked(gguf, refs, {"up_proj.weight"}, d.d_model);
  d.intermediate = packed.gate_up.n() / (block.gated() ? 2 : 1);
  packed.down = stacked(gguf, refs, {"down_proj.weight"}, d.intermediate);
  // The norms and optional tensors by their block names; sizes and finiteness are the block's to check.
  blocks::TransformerWeights values;
  const auto optional = blocks::optional_tensors(block, d.d_model, d.n_heads * d.head_dim,
                                                 d.n_kv_heads * d.head_dim, d.intermediate, d.head_dim);
  for (const auto& [key, view] : small) {
    std::vector<float>* slot = nullptr;
    if (key == "input_layernorm.weight") slot = &values.input_norm;
    if (key == "post_attention_layernorm.weight") slot = &values.post_norm;
    for (std::size_t o = 0; slot == nullptr && o < optional.size(); ++o)
      if (key == optional[o].name) slot = &values.optional(o);
    if (slot == nullptr) throw_value_error(kBlock + ": unknown weight " + key);
    slot->assign(view.data, view.data + view.elements());
  }
  return ApiAccess::wrap(std::make_shared<const blocks::TransformerBlock>(d, std::move(values),
                                                                          std::move(packed), kBlock, block),
                         weight_format);
}

}  // namespace samebits::gguf_packed
