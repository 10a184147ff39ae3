// The ggml tensor types of GGUF files (docs/gguf.md §5): their ids, names and block sizes, and the scalar
// twin of each supported type's dequantization, which gives every stored element its one exact float32
// value (docs/gguf.md §6, §7).
#pragma once

#include <cstddef>
#include <cstdint>

namespace samebits::numerics {

// What samebits knows of a ggml type id: its name ("removed" and "unknown" ids included, for refusals),
// and, for the supported types, the elements and bytes of one block.
struct GgmlTypeInfo {
  const char* name = "unknown";
  std::uint32_t block_elements = 0;  // 0 for a type samebits does not decode
  std::uint32_t block_bytes = 0;
  bool supported = false;
};

// The table row of `id` (any u32; ids ggml never had are "unknown").
GgmlTypeInfo ggml_type_info(std::uint32_t id) noexcept;

// Whether block `block` of a supported type holds a non-finite fp16 scale or minimum, or a non-finite F32,
// F16 or BF16 value (docs/gguf.md §7.2). `in` points at the block's first byte.
bool ggml_block_nonfinite(std::uint32_t id, const unsigned char* block) noexcept;

// One element of a quantized block: its value is fl(code) * scale, then + offset when the type has one
// (docs/gguf.md §7.1): the product is exact, the addition is the one rounding.
struct GgmlElement {
  int code = 0;
  float scale = 0.0f;
  float offset = 0.0f;
};

// How a quantized type's elements share their scales: `scale_run` consecutive elements of a block have one
// (scale, offset); every code lies in [code_min, code_max]. quantized is false for F32/F16/BF16 and others.
struct GgmlCodeLayout {
  bool quantized = false;
  std::uint32_t scale_run = 0;
  bool has_offset = false;
  int code_min = 0;
  int code_max = 0;
};
GgmlCodeLayout ggml_code_layout(std::uint32_t id) noexcept;

// Block `block` of quantized type `id` as block_elements (code, scale, offset) triples, in the reference
// order; the scalar twin computes every value from them. The block's scales must be finite.
void ggml_block_codes(std::uint32_t id, const unsigned char* block, GgmlElement* out) noexcept;

// The scalar twin: dequantizes `blocks` whole blocks of supported type `id` from `in` into
// `blocks * block_elements` floats at `out`, in the reference order of docs/gguf.md §6. Returns -1, or the
// index of the first block that holds a non-finite scale or value (its outputs and those after it are
// unspecified). An unsupported id returns 0 and writes nothing.
std::int64_t ggml_dequantize_twin(std::uint32_t id, const unsigned char* in, std::uint64_t blocks,
                                  float* out) noexcept;

}  // namespace samebits::numerics
