// Scalar twins of the GGUF tensor types (docs/gguf.md §6): one block at a time, each element in the order
// of the reference dequantization. Every product is exact in float32 and at most one rounding (the final
// add or subtract of the minimum) happens, so the value is the one of docs/gguf.md §7.1 whatever the order.
#include "numerics/gguf_quants.hpp"

#include <cstring>
#include <samebits/lowbit.hpp>

namespace samebits::numerics {
namespace {

enum : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// Names of ids 0..42 (docs/gguf.md §5); "removed" marks ids whose types ggml dropped.
constexpr const char* kNames[] = {
    "F32",     "F16",     "Q4_0",    "Q4_1",  "removed", "removed", "Q5_0",    "Q5_1",    "Q8_0",
    "Q8_1",    "Q2_K",    "Q3_K",    "Q4_K",  "Q5_K",    "Q6_K",    "Q8_K",    "IQ2_XXS", "IQ2_XS",
    "IQ3_XXS", "IQ1_S",   "IQ4_NL",  "IQ3_S", "IQ2_S",   "IQ4_XS",  "I8",      "I16",     "I32",
    "I64",     "F64",     "IQ1_M",   "BF16",  "removed", "removed", "removed", "TQ1_0",   "TQ2_0",
    "removed", "removed", "removed", "MXFP4", "NVFP4",   "Q1_0",    "Q2_0",
};
constexpr std::uint32_t kTypeCount = sizeof(kNames) / sizeof(kNames[0]);
static_assert(kTypeCount == 43);

std::uint16_t u16(const unsigned char* at) { return static_cast<std::uint16_t>(at[0] | (at[1] << 8)); }
std::uint32_t u32(const unsigned char* at) {
  return static_cast<std::uint32_t>(at[0]) | (static_cast<std::uint32_t>(at[1]) << 8) |
         (static_cast<std::uint32_t>(at[2]) << 16) | (static_cast<std::uint32_t>(at[3]) << 24);
}
bool f16_nonfinite(const unsigned char* at) { return (u16(at) & 0x7C00u) == 0x7C00u; }
float h16(const unsigned char* at) { return lowbit::f32_from_f16(u16(at)); }

// The exact float32 of a small integer (every |q| here is below 2^24).
float fl(int q) { return static_cast<float>(q); }

// The (scale, min) pair of sub-block k of a Q4_K / Q5_K block from its 12 packed bytes.
void scale_min_k4(int k, const unsigned char* s, int& sc, int& mn) {
  if (k < 4) {
    sc = s[k] & 63;
    mn = s[k + 4] & 63;
  } else {
    sc = (s[k + 4] & 0xF) | ((s[k - 4] >> 6) << 4);
    mn = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

// Each quantized type's decomposition of one block into (code, scale, offset) per element, in the reference
// order. The value of an element is fl(code) * scale, then + offset for the types with a minimum (a
// subtracted minimum is added negated: x - m and x + (-m) are one IEEE operation).
void q4_0(const unsigned char* b, GgmlElement* y) {
  const float d = h16(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = {(b[2 + j] & 0xF) - 8, d, 0.0f};
    y[j + 16] = {(b[2 + j] >> 4) - 8, d, 0.0f};
  }
}

void q4_1(const unsigned char* b, GgmlElement* y) {
  const float d = h16(b), m = h16(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = {b[4 + j] & 0xF, d, m};
    y[j + 16] = {b[4 + j] >> 4, d, m};
  }
}

void q5_0(const unsigned char* b, GgmlElement* y) {
  const float d = h16(b);
  const std::uint32_t qh = u32(b + 2);
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4, h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = {((b[6 + j] & 0xF) | h0) - 16, d, 0.0f};
    y[j + 16] = {((b[6 + j] >> 4) | h1) - 16, d, 0.0f};
  }
}

void q5_1(const unsigned char* b, GgmlElement* y) {
  const float d = h16(b), m = h16(b + 2);
  const std::uint32_t qh = u32(b + 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4, h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = {(b[8 + j] & 0xF) | h0, d, m};
    y[j + 16] = {(b[8 + j] >> 4) | h1, d, m};
  }
}

void q8_0(const unsigned char* b, GgmlElement* y) {
  const float d = h16(b);
  for (int j = 0; j < 32; ++j) y[j] = {static_cast<std::int8_t>(b[2 + j]), d, 0.0f};
}

void q2_k(const unsigned char* b, GgmlElement* y) {
  const unsigned char* scales = b;
  const unsigned char* qs = b + 16;
  const float d = h16(b + 80), dmin = h16(b + 82);
  for (int e = 0; e < 256; ++e) {
    const int n = e >> 7, j = (e >> 5) & 3, l = e & 31;
    const int sc = scales[e >> 4];
    const float dl = d * fl(sc & 0xF), ml = dmin * fl(sc >> 4);
    y[e] = {(qs[32 * n + l] >> (2 * j)) & 3, dl, -ml};
  }
}

void q3_k(const unsigned char* b, GgmlElement* y) {
  const unsigned char* hmask = b;
  const unsigned char* qs = b + 32;
  const unsigned char* s = b + 96;
  const float d = h16(b + 108);
  for (int e = 0; e < 256; ++e) {
    const int n = e >> 7, j = (e >> 5) & 3, l = e & 31, k = e >> 4;
    const int low4 = k < 8 ? (s[k] & 0xF) : (s[k - 8] >> 4);
    const int high2 = (s[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
    const float dl = d * fl((low4 | (high2 << 4)) - 32);
    const int q2 = (qs[32 * n + l] >> (2 * j)) & 3;
    const int hbit = (hmask[l] >> (4 * n + j)) & 1;
    y[e] = {q2 - (hbit ? 0 : 4), dl, 0.0f};
  }
}

void q4_k(const unsigned char* b, GgmlElement* y) {
  const float d = h16(b), dmin = h16(b + 2);
  const unsigned char* s = b + 4;
  const unsigned char* qs = b + 16;
  for (int e = 0; e < 256; ++e) {
    int sc = 0, mn = 0;
    scale_min_k4(e >> 5, s, sc, mn);
    const float d1 = d * fl(sc), m1 = dmin * fl(mn);
    const int c = e >> 6, l = e & 63;
    const int q = l < 32 ? (qs[32 * c + l] & 0xF) : (qs[32 * c + l - 32] >> 4);
    y[e] = {q, d1, -m1};
  }
}

void q5_k(const unsigned char* b, GgmlElement* y) {
  const float d = h16(b), dmin = h16(b + 2);
  const unsigned char* s = b + 4;
  const unsigned char* qh = b + 16;
  const unsigned char* qs = b + 48;
  for (int e = 0; e < 256; ++e) {
    const int k = e >> 5;
    int sc = 0, mn = 0;
    scale_min_k4(k, s, sc, mn);
    const float d1 = d * fl(sc), m1 = dmin * fl(mn);
    const int c = e >> 6, l = e & 63;
    const int low4 = l < 32 ? (qs[32 * c + l] & 0xF) : (qs[32 * c + l - 32] >> 4);
    const int hbit = (qh[l & 31] >> k) & 1;
    y[e] = {low4 + 16 * hbit, d1, -m1};
  }
}

void q6_k(const unsigned char* b, GgmlElement* y) {
  const unsigned char* ql = b;
  const unsigned char* qh = b + 128;
  const unsigned char* sc = b + 192;
  const float d = h16(b + 208);
  for (int e = 0; e < 256; ++e) {
    const int n = e >> 7, g = (e >> 5) & 3, l = e & 31;
    const int byte = ql[64 * n + l + 32 * (g & 1)];
    const int low4 = g < 2 ? (byte & 0xF) : (byte >> 4);
    const int high2 = (qh[32 * n + l] >> (2 * g)) & 3;
    const float dl = d * fl(static_cast<std::int8_t>(sc[e >> 4]));
    y[e] = {(low4 | (high2 << 4)) - 32, dl, 0.0f};
  }
}

}  // namespace

bool ggml_block_nonfinite(std::uint32_t id, const unsigned char* b) noexcept {
  switch (id) {
    case kF32:
      return (u32(b) & 0x7FFFFFFFu) >= 0x7F800000u;
    case kF16:
      return f16_nonfinite(b);
    case kBF16:
      return (u16(b) & 0x7FFFu) >= 0x7F80u;
    case kQ4_0:
    case kQ5_0:
    case kQ8_0:
      return f16_nonfinite(b);
    case kQ4_1:
    case kQ5_1:
    case kQ4_K:
    case kQ5_K:
      return f16_nonfinite(b) || f16_nonfinite(b + 2);
    case kQ2_K:
      return f16_nonfinite(b + 80) || f16_nonfinite(b + 82);
    case kQ3_K:
      return f16_nonfinite(b + 108);
    case kQ6_K:
      return f16_nonfinite(b + 208);
    default:
      return false;
  }
}

namespace {

// A quantized type's code layout and its decomposition (docs/gguf.md §6).
struct QuantizedType {
  GgmlCodeLayout layout;
  void (*codes)(const unsigned char* block, GgmlElement* out) = nullptr;
};

// Each supported type once: the elements and bytes of one block, then (quantized types only) the code
// layout (quantized, rows per scale, has offset, least code, greatest code) and the decomposition.
struct SupportedType {
  std::uint32_t id;
  std::uint32_t block_elements;
  std::uint32_t block_bytes;
  QuantizedType quantized;
};
const SupportedType kSupported[] = {
    {kF32, 1, 4, {}},
    {kF16, 1, 2, {}},
    {kBF16, 1, 2, {}},
    {kQ4_0, 32, 18, {{true, 32, false, -8, 7}, &q4_0}},
    {kQ4_1, 32, 20, {{true, 32, true, 0, 15}, &q4_1}},
    {kQ5_0, 32, 22, {{true, 32, false, -16, 15}, &q5_0}},
    {kQ5_1, 32, 24, {{true, 32, true, 0, 31}, &q5_1}},
    {kQ8_0, 32, 34, {{true, 32, false, -128, 127}, &q8_0}},
    {kQ2_K, 256, 84, {{true, 16, true, 0, 3}, &q2_k}},
    {kQ3_K, 256, 110, {{true, 16, false, -4, 3}, &q3_k}},
    {kQ4_K, 256, 144, {{true, 32, true, 0, 15}, &q4_k}},
    {kQ5_K, 256, 176, {{true, 32, true, 0, 31}, &q5_k}},
    {kQ6_K, 256, 210, {{true, 16, false, -32, 31}, &q6_k}},
};

const SupportedType* supported_type(std::uint32_t id) noexcept {
  for (const SupportedType& type : kSupported)
    if (type.id == id) return &type;
  return nullptr;
}

QuantizedType quantized_type(std::uint32_t id) noexcept {
  const SupportedType* type = supported_type(id);
  return type != nullptr ? type->quantized : QuantizedType{};
}

}  // namespace

GgmlTypeInfo ggml_type_info(std::uint32_t id) noexcept {
  GgmlTypeInfo info;
  if (id >= kTypeCount) return info;
  info.name = kNames[id];
  if (const SupportedType* type = supported_type(id))
    info = {info.name, type->block_elements, type->block_bytes, true};
  return info;
}

GgmlCodeLayout ggml_code_layout(std::uint32_t id) noexcept { return quantized_type(id).layout; }

void ggml_block_codes(std::uint32_t id, const unsigned char* block, GgmlElement* out) noexcept {
  if (const QuantizedType type = quantized_type(id); type.codes != nullptr) type.codes(block, out);
}

std::int64_t ggml_dequantize_twin(std::uint32_t id, const unsigned char* in, std::uint64_t blocks,
                                  float* out) noexcept {
  const SupportedType* type = supported_type(id);
  if (type == nullptr) return 0;
  const QuantizedType& quantized = type->quantized;
  GgmlElement elements[256];
  for (std::uint64_t i = 0; i < blocks; ++i) {
    const unsigned char* b = in + i * type->block_bytes;
    float* y = out + i * type->block_elements;
    if (ggml_block_nonfinite(id, b)) return static_cast<std::int64_t>(i);
    switch (id) {
      case kF32:
        std::memcpy(y, b, 4);
        break;  // the bits as stored, subnormals included
      case kF16:
        *y = lowbit::f32_from_f16(u16(b));
        break;
      case kBF16:
        *y = lowbit::f32_from_bf16(u16(b));
        break;
      default:
        quantized.codes(b, elements);
        for (std::uint32_t e = 0; e < type->block_elements; ++e) {
          const float product = fl(elements[e].code) * elements[e].scale;  // exact
          y[e] = quantized.layout.has_offset ? product + elements[e].offset : product;
        }
        break;
    }
  }
  return -1;
}

}  // namespace samebits::numerics
