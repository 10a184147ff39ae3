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

// The scalar twin: dequantizes `blocks` whole blocks of supported type `id` from `in` into
// `blocks * block_elements` floats at `out`, in the reference order of docs/gguf.md §6. Returns -1, or the
// index of the first block that holds a non-finite scale or value (its outputs and those after it are
// unspecified). An unsupported id returns 0 and writes nothing.
std::int64_t ggml_dequantize_twin(std::uint32_t id, const unsigned char* in, std::uint64_t blocks,
                                  float* out) noexcept;

}  // namespace samebits::numerics
