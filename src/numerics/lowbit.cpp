// Exact bf16 / int8 weight storage: scalar integer constructions, run once at load time.
#include <array>
#include <samebits/errors.hpp>
#include <samebits/lowbit.hpp>
#include <string>
#include <utility>

#include "numerics/fp.hpp"

namespace samebits::lowbit {

namespace {

constexpr std::uint32_t kExponentField = 0x7F800000u;
constexpr std::uint32_t kMantissaField = 0x007FFFFFu;
constexpr std::uint16_t kBf16QuietBit = 0x0040u;
constexpr std::int32_t kInt8TargetExponent = 6;  // absmax * 2^-e lands in [2^6, 2^7)
constexpr std::int8_t kInt8Max = 127;

// Each format's name once: what format_name returns and format_from_name accepts.
constexpr std::array<std::pair<WeightFormat, const char*>, 3> kFormatNames{{
    {WeightFormat::Float32, "float32"},
    {WeightFormat::BFloat16, "bfloat16"},
    {WeightFormat::Int8, "int8"},
}};

// Ties-to-even rounding to an integer for |s| <= 2^22: adding 1.5 * 2^23 pushes every fraction bit out
// of the significand, so the hardware's own round-to-nearest-even does the rounding.
float round_half_even_small(float s) noexcept {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return s >= 0.0f ? (s + kMagic) - kMagic : (s - kMagic) + kMagic;
}

// A PackedMatrix assembled by hand whose vectors disagree with its shape: refuse rather than read
// out of bounds.
[[noreturn]] void refuse_inconsistent(const PackedMatrix& packed, std::size_t held, const char* what) {
  std::string message = "samebits.lowbit: a ";
  message += format_name(packed.format);
  message += " matrix of shape (";
  message += std::to_string(packed.rows);
  message += ", ";
  message += std::to_string(packed.cols);
  message += ") holds ";
  message += std::to_string(held);
  message += " ";
  message += what;
  throw_value_error(message);
}

}  // namespace

std::uint16_t bf16_from_f32(float x) noexcept {
  std::uint32_t b = fp::bits(fp::F(x));
  if ((b & kExponentField) == kExponentField && (b & kMantissaField) != 0) {
    return static_cast<std::uint16_t>((b >> 16) | kBf16QuietBit);
  }
  // No uint32 overflow: the largest non-NaN pattern is 0xFF800000 (-inf), far below 2^32 - 0x8000.
  std::uint32_t rounding_bias = 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>((b + rounding_bias) >> 16);
}

float f32_from_bf16(std::uint16_t bits) noexcept {
  return fp::from_bits(static_cast<std::uint32_t>(bits) << 16);
}

void bf16_from_f32_array(const float* in, std::size_t count, std::uint16_t* out) noexcept {
  for (std::size_t i = 0; i < count; ++i) out[i] = bf16_from_f32(in[i]);
}

void f32_from_bf16_array(const std::uint16_t* in, std::size_t count, float* out) noexcept {
  for (std::size_t i = 0; i < count; ++i) out[i] = f32_from_bf16(in[i]);
}

float f32_from_f16(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 31) return fp::from_bits(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN (payload kept)
  if (exponent != 0) return fp::from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return fp::from_bits(sign);  // signed zero
  // A subnormal, mantissa * 2^-24: normalize so the leading one moves to bit 10 (the implicit bit).
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  const auto biased = static_cast<std::uint32_t>(113 - shift);  // the value is 1.f * 2^(-14 - shift)
  return fp::from_bits(sign | (biased << 23) | ((mantissa & 0x3FFu) << 13));
}

void f32_from_f16_array(const std::uint16_t* in, std::size_t count, float* out) noexcept {
  for (std::size_t i = 0; i < count; ++i) out[i] = f32_from_f16(in[i]);
}

float pow2(std::int32_t e) noexcept {
  if (e > 127) return fp::from_bits(fp::kInfBits);
  if (e < -126) return 0.0f;
  return fp::from_bits(static_cast<std::uint32_t>(e + 127) << 23);
}

std::int32_t int8_row_exponent(const float* row, std::size_t cols) noexcept {
  // The absmax as a bit pattern: for non-NaN magnitudes the integer order is the float order, and a
  // NaN (pattern above the infinity) is skipped, so it never wins; the maximum is order-free.
  std::uint32_t absmax = 0;
  for (std::size_t c = 0; c < cols; ++c) {
    std::uint32_t magnitude = fp::bits(fp::F(row[c])) & fp::kAbsMask;
    if (magnitude <= fp::kInfBits && magnitude > absmax) absmax = magnitude;
  }
  if (absmax == 0) return 0;
  return (static_cast<std::int32_t>(absmax >> 23) - 127) - kInt8TargetExponent;
}

std::int8_t quantize_int8_value(float x, std::int32_t exponent) noexcept {
  if (fp::is_nan(x)) return 0;
  float s = fp::F(fp::MUL(fp::F(x), pow2(-exponent)));
  if (fp::is_nan(s)) return 0;  // 0 * inf in a row scaled by the infinity
  if (fp::is_inf(s)) return s > 0.0f ? kInt8Max : static_cast<std::int8_t>(-kInt8Max);
  // A finite s satisfies |s| < 128 (absmax * 2^-e < 128), well inside the magic-number range.
  float r = round_half_even_small(s);
  if (r > 127.0f) r = 127.0f;
  if (r < -127.0f) r = -127.0f;
  return static_cast<std::int8_t>(r);
}

void quantize_int8_row(const float* row, std::size_t cols, std::int8_t* codes,
                       std::int32_t* exponent) noexcept {
  std::int32_t e = int8_row_exponent(row, cols);
  *exponent = e;
  for (std::size_t c = 0; c < cols; ++c) codes[c] = quantize_int8_value(row[c], e);
}

float dequantize_int8(std::int8_t code, std::int32_t exponent) noexcept {
  return fp::F(fp::MUL(static_cast<float>(code), pow2(exponent)));
}

void quantize_int8_matrix(const float* w, std::size_t rows, std::size_t cols, std::int8_t* codes,
                          std::int32_t* exponents) noexcept {
  for (std::size_t r = 0; r < rows; ++r)
    quantize_int8_row(w + r * cols, cols, codes + r * cols, exponents + r);
}

void dequantize_int8_matrix(const std::int8_t* codes, const std::int32_t* exponents, std::size_t rows,
                            std::size_t cols, float* out) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c)
      out[r * cols + c] = dequantize_int8(codes[r * cols + c], exponents[r]);
  }
}

const char* format_name(WeightFormat format) noexcept {
  for (const auto& [known, name] : kFormatNames)
    if (known == format) return name;
  return "float32";
}

std::optional<WeightFormat> format_from_name(std::string_view name) noexcept {
  for (const auto& [format, known] : kFormatNames)
    if (name == known) return format;
  return std::nullopt;
}

PackedMatrix pack_matrix(const float* w, std::size_t rows, std::size_t cols, WeightFormat format) {
  PackedMatrix packed;
  packed.format = format;
  packed.rows = rows;
  packed.cols = cols;
  const std::size_t count = rows * cols;
  switch (format) {
    case WeightFormat::Float32:
      packed.f32.assign(w, w + count);
      break;
    case WeightFormat::BFloat16:
      packed.bf16_bits.resize(count);
      bf16_from_f32_array(w, count, packed.bf16_bits.data());
      break;
    case WeightFormat::Int8:
      packed.codes.resize(count);
      packed.exponents.resize(rows);
      quantize_int8_matrix(w, rows, cols, packed.codes.data(), packed.exponents.data());
      break;
  }
  return packed;
}

std::vector<float> materialize(const PackedMatrix& packed) {
  // Every size is checked before anything is allocated, and rows * cols is never formed unchecked: a
  // shape whose product wraps size_t must not match a small vector.
  auto holds = [&](std::size_t n) {
    return packed.cols == 0 ? n == 0 : n % packed.cols == 0 && n / packed.cols == packed.rows;
  };
  const std::size_t held = packed.format == WeightFormat::Float32    ? packed.f32.size()
                           : packed.format == WeightFormat::BFloat16 ? packed.bf16_bits.size()
                                                                     : packed.codes.size();
  if (!holds(held))
    refuse_inconsistent(packed, held, packed.format == WeightFormat::Int8 ? "codes" : "values");
  if (packed.format == WeightFormat::Int8 && packed.exponents.size() != packed.rows) {
    refuse_inconsistent(packed, packed.exponents.size(), "exponents");
  }
  const std::size_t count = held;
  std::vector<float> out(count);
  switch (packed.format) {
    case WeightFormat::Float32:
      out = packed.f32;
      break;
    case WeightFormat::BFloat16:
      f32_from_bf16_array(packed.bf16_bits.data(), count, out.data());
      break;
    case WeightFormat::Int8:
      dequantize_int8_matrix(packed.codes.data(), packed.exponents.data(), packed.rows, packed.cols,
                             out.data());
      break;
  }
  return out;
}

}  // namespace samebits::lowbit
