// Exact bf16 / int8 weight storage (docs/formats.md §5): narrowing, quantization and exact materialization to
// fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace samebits::lowbit {

// ---- bf16 (contract L-1, L-2) ----

// Narrow one float32 to bf16 bits: flush a subnormal to its signed zero first; a NaN keeps its sign and
// top payload bits and is forced quiet; everything else rounds to nearest even on the low 16 bits, so a
// finite value past the largest bf16 rounds to infinity.
std::uint16_t bf16_from_f32(float x) noexcept;

// Widen bf16 bits to float32: a 16-bit left shift, exact.
float f32_from_bf16(std::uint16_t bits) noexcept;

void bf16_from_f32_array(const float* in, std::size_t count, std::uint16_t* out) noexcept;
void f32_from_bf16_array(const std::uint16_t* in, std::size_t count, float* out) noexcept;

// ---- f16 (IEEE binary16), as checkpoints store it ----

// Widen f16 bits to float32 exactly: the sign kept; a subnormal becomes the normal float32 of the same value
// (mantissa * 2^-24); infinities and NaNs keep their sign and payload (mantissa << 13, not re-quieted).
float f32_from_f16(std::uint16_t bits) noexcept;
void f32_from_f16_array(const std::uint16_t* in, std::size_t count, float* out) noexcept;

// ---- int8 with one power-of-two exponent per row (contract L-3, L-4, L-6) ----

// 2^e for -126 <= e <= 127, +inf above, +0.0 below.
float pow2(std::int32_t e) noexcept;

// The row exponent: absmax over the flushed row ignoring NaN (an infinity wins); 0 when that absmax is
// 0 (or every element is NaN), else (biased exponent field of absmax - 127) - 6, so absmax * 2^-e lies
// in [64, 128). An infinite absmax reads field 255, giving 122.
std::int32_t int8_row_exponent(const float* row, std::size_t cols) noexcept;

// One code for x in a row with exponent e: NaN -> 0; s = F(F(x) * pow2(-e)); NaN s -> 0; +-inf s ->
// +-127; else s rounded half to even, clamped to [-127, 127]. -128 is never produced.
std::int8_t quantize_int8_value(float x, std::int32_t exponent) noexcept;

void quantize_int8_row(const float* row, std::size_t cols, std::int8_t* codes,
                       std::int32_t* exponent) noexcept;

// F(float32(code * pow2(e))): exact unless it overflows (inf); a zero code with e > 127 gives the NaN
// of 0 * inf, as the formula does.
float dequantize_int8(std::int8_t code, std::int32_t exponent) noexcept;

// Row-major [rows, cols] weights; exponents has one entry per row.
void quantize_int8_matrix(const float* w, std::size_t rows, std::size_t cols, std::int8_t* codes,
                          std::int32_t* exponents) noexcept;
void dequantize_int8_matrix(const std::int8_t* codes, const std::int32_t* exponents, std::size_t rows,
                            std::size_t cols, float* out) noexcept;

// ---- a packed matrix for the C++ API ----

enum class WeightFormat { Float32, BFloat16, Int8 };

// "float32", "bfloat16" or "int8" (the values of weight_format).
const char* format_name(WeightFormat format) noexcept;

// The format with that name, or nothing for an unknown name.
std::optional<WeightFormat> format_from_name(std::string_view name) noexcept;

// A row-major [rows, cols] weight in one storage format; only the vectors of that format are filled.
struct PackedMatrix {
  WeightFormat format = WeightFormat::Float32;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<std::uint16_t> bf16_bits;  // BFloat16: rows * cols
  std::vector<std::int8_t> codes;        // Int8: rows * cols
  std::vector<std::int32_t> exponents;   // Int8: rows
  std::vector<float> f32;                // Float32: rows * cols (a copy)
};

PackedMatrix pack_matrix(const float* w, std::size_t rows, std::size_t cols, WeightFormat format);

// The exact float32 values of a packed matrix (row-major). Throws a value error when the vectors do not
// match rows and cols.
std::vector<float> materialize(const PackedMatrix& packed);

}  // namespace samebits::lowbit
