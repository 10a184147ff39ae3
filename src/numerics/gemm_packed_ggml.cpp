// PackedRhs::from_ggml: GGUF tensors' own codes and scales laid out as GEMM panels (docs/numerics.md §3.6),
// so that the kernels widen what the file stores instead of reading expanded float32 weights.
#include <algorithm>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "numerics/gemm.hpp"
#include "numerics/gguf_quants.hpp"

namespace samebits::gemm {

namespace {

// The narrowest panel storage that holds every code of a type: 4-bit codes when they fit a nibble (with
// the bias of 8 where the type has no offset), int8 codes otherwise.
PanelStorage storage_for(const numerics::GgmlCodeLayout& layout) {
  if (layout.has_offset)
    return layout.code_min >= 0 && layout.code_max <= 15 ? PanelStorage::Codes4Min : PanelStorage::Codes8Min;
  return layout.code_min >= -8 && layout.code_max <= 7 ? PanelStorage::Codes4 : PanelStorage::Codes8;
}

std::string what_of(const GgmlPart& part) {
  return "samebits: GGUF tensor '" + part.name + "' (" + numerics::ggml_type_info(part.type).name + ")";
}

// Refuses a part that cannot be read as `rows` rows of k elements; returns its type's description.
numerics::GgmlTypeInfo checked_info(const GgmlPart& part, std::int64_t k) {
  const numerics::GgmlTypeInfo info = numerics::ggml_type_info(part.type);
  if (!info.supported) throw_value_error(what_of(part) + ": this type cannot be read");
  if (part.rows < 0 || k <= 0 || k % info.block_elements != 0)
    throw_value_error(what_of(part) + ": a row of " + std::to_string(k) +
                      " elements is not a whole number of " + std::to_string(info.block_elements) +
                      "-element blocks");
  return info;
}

// Whether every scale and offset the panels would hold is an fp16 value (GGUF's Q4_0, Q4_1, Q5_0, Q5_1 and
// Q8_0 store them as fp16): the panels then keep them as fp16, as many bytes per weight as the file.
bool all_scales_are_halves(const std::vector<GgmlPart>& parts, std::int64_t k, std::int64_t block_depth,
                           std::vector<numerics::GgmlElement>& elements) {
  for (const GgmlPart& part : parts) {
    const numerics::GgmlTypeInfo info = numerics::ggml_type_info(part.type);
    const bool has_offset = numerics::ggml_code_layout(part.type).has_offset;
    const std::int64_t blocks = part.rows * (k / info.block_elements);
    for (std::int64_t b = 0; b < blocks; ++b) {
      const unsigned char* block = part.bytes + b * info.block_bytes;
      if (numerics::ggml_block_nonfinite(part.type, block)) return false;  // refused while packing
      numerics::ggml_block_codes(part.type, block, elements.data());
      for (std::uint32_t e = 0; e < info.block_elements; e += static_cast<std::uint32_t>(block_depth))
        if (!exact_half(elements[e].scale) || (has_offset && !exact_half(elements[e].offset))) return false;
    }
  }
  return true;
}

}  // namespace

PackedRhs PackedRhs::from_ggml(const std::string& name, std::uint32_t type, const unsigned char* bytes,
                               std::int64_t n, std::int64_t k, Placement placement) {
  return from_ggml({GgmlPart{name, type, bytes, n, {}}}, k, placement);
}

PackedRhs PackedRhs::from_ggml(const std::vector<GgmlPart>& parts, std::int64_t k, Placement placement) {
  std::int64_t n = 0;
  bool all_quantized = true;
  for (const GgmlPart& part : parts) {
    checked_info(part, k);
    if (!part.row_order.empty() && static_cast<std::int64_t>(part.row_order.size()) != part.rows)
      throw_value_error(what_of(part) + ": the row order names " + std::to_string(part.row_order.size()) +
                        " rows, the part has " + std::to_string(part.rows));
    for (std::int64_t stored : part.row_order)
      if (stored < 0 || stored >= part.rows)
        throw_value_error(what_of(part) + ": the row order names row " + std::to_string(stored));
    n += part.rows;
    all_quantized = all_quantized && numerics::ggml_code_layout(part.type).quantized;
  }
  // One storage for the whole operand: a single quantized type (or several that share a layout) keeps its
  // own; a mix of types takes int8 codes with offsets in 16-row blocks, which holds every quantized type
  // (an offset of -0.0 adds nothing, not even to a -0.0); float types are decoded to float32 panels.
  PanelStorage storage = PanelStorage::F32;
  std::int64_t block_depth = 0;
  if (all_quantized && !parts.empty()) {
    const numerics::GgmlCodeLayout first = numerics::ggml_code_layout(parts.front().type);
    storage = storage_for(first);
    block_depth = first.scale_run;
    for (const GgmlPart& part : parts) {
      const numerics::GgmlCodeLayout layout = numerics::ggml_code_layout(part.type);
      if (storage_for(layout) != storage || layout.scale_run != first.scale_run) {
        storage = PanelStorage::Codes8Min;
        block_depth = 16;
      }
    }
  }
  if (!all_quantized || parts.empty()) {
    std::vector<float> values(static_cast<std::size_t>(n * k));
    bool all_bf16 = !parts.empty();
    std::int64_t row0 = 0;
    for (const GgmlPart& part : parts) {
      const numerics::GgmlTypeInfo info = checked_info(part, k);
      all_bf16 = all_bf16 && info.name == std::string("BF16");
      std::vector<float> part_values(static_cast<std::size_t>(part.rows * k));
      const std::uint64_t blocks = static_cast<std::uint64_t>(part.rows * k / info.block_elements);
      const std::int64_t bad =
          numerics::ggml_dequantize_twin(part.type, part.bytes, blocks, part_values.data());
      if (bad >= 0) throw_value_error(what_of(part) + ": block " + std::to_string(bad) + " is not finite");
      for (std::int64_t r = 0; r < part.rows; ++r) {
        const std::int64_t stored = part.row_order.empty() ? r : part.row_order[static_cast<std::size_t>(r)];
        std::copy_n(part_values.data() + stored * k, k, values.data() + (row0 + r) * k);
      }
      row0 += part.rows;
    }
    if (all_bf16)
      if (auto packed = from_transposed_as(values.data(), n, k, PanelStorage::BF16, placement))
        return std::move(*packed);
    return *from_transposed_as(values.data(), n, k, PanelStorage::F32, placement);
  }
  std::vector<numerics::GgmlElement> elements(256);
  PackedRhs packed(n, k, storage, block_depth, placement,
                   all_scales_are_halves(parts, k, block_depth, elements));
  std::vector<std::int32_t> run_codes(static_cast<std::size_t>(block_depth));
  std::int64_t row0 = 0;
  for (const GgmlPart& part : parts) {
    const numerics::GgmlTypeInfo info = numerics::ggml_type_info(part.type);
    const numerics::GgmlCodeLayout layout = numerics::ggml_code_layout(part.type);
    const std::int64_t row_blocks = k / info.block_elements;
    const float no_offset = -0.0f;  // x + (-0.0) is x for every x
    for (std::int64_t r = 0; r < part.rows; ++r) {
      const std::int64_t stored = part.row_order.empty() ? r : part.row_order[static_cast<std::size_t>(r)];
      const std::int64_t j = row0 + r;
      for (std::int64_t b = 0; b < row_blocks; ++b) {
        const unsigned char* block = part.bytes + (stored * row_blocks + b) * info.block_bytes;
        if (numerics::ggml_block_nonfinite(part.type, block))
          throw_value_error(what_of(part) + ": block " + std::to_string(stored * row_blocks + b) +
                            " has a non-finite scale");
        numerics::ggml_block_codes(part.type, block, elements.data());
        // A panel block starts at every block_depth-th element (block_depth divides the type's block).
        for (std::uint32_t e = 0; e < info.block_elements; e += static_cast<std::uint32_t>(block_depth)) {
          const std::int64_t p = b * info.block_elements + e;
          packed.set_scale(p, j, elements[e].scale, layout.has_offset ? elements[e].offset : no_offset);
          for (std::int64_t d = 0; d < block_depth; ++d) run_codes[d] = elements[e + d].code;
          packed.set_code_run(p, j, run_codes.data(), block_depth);
        }
      }
    }
    row0 += part.rows;
  }
  return packed;  // no value of these types is subnormal (docs/numerics.md §3.6): nothing to remember
}

}  // namespace samebits::gemm
