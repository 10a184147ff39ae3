// Fuzzes lowbit::materialize on hand-assembled packed matrices (format, shape, codes, exponents, bits) and
// the pack -> materialize round trip; accepted results are checked element by element against the formulas.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <samebits/lowbit.hpp>
#include <vector>

#include "fuzz_support.hpp"
#include "numerics/fp.hpp"

namespace {

using namespace samebits;
using lowbit::WeightFormat;

constexpr std::size_t kMaxElements = 4096;  // every vector the harness fills stays this small

// code * 2^e as docs/formats.md §5 defines it, computed independently of lowbit.cpp: exact in double for
// -126 <= e <= 127, +-inf when that leaves float32, the NaN of 0 * inf above 127, signed zero below -126.
bool matches_dequantized(std::int8_t code, std::int32_t e, float got) {
  if (e > 127) return code == 0 ? std::isnan(got) : std::isinf(got) && (got > 0) == (code > 0);
  if (e < -126) return got == 0.0f && std::signbit(got) == (code < 0);
  const double exact = std::ldexp(static_cast<double>(code), e);
  if (std::fabs(exact) >= 0x1p128) return std::isinf(got) && (got > 0) == (exact > 0);
  return fp::bits(got) == fp::bits(static_cast<float>(exact));
}

// A shape: mostly small, sometimes anything (products that overflow, rows without elements).
std::size_t dimension(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<std::size_t>(0, 64) : in.ConsumeIntegral<std::size_t>();
}

// A vector length: the one the shape implies when that is small, else a fuzzed small count.
std::size_t length(FuzzedDataProvider& in, std::size_t implied, bool implied_ok) {
  if (implied_ok && in.ConsumeBool()) return implied;
  return in.ConsumeIntegralInRange<std::size_t>(0, kMaxElements);
}

template <typename T>
std::vector<T> fill(FuzzedDataProvider& in, std::size_t count) {
  std::vector<T> out(count);
  for (T& v : out) v = in.ConsumeIntegral<T>();
  return out;
}

void check_materialize(FuzzedDataProvider& in) {
  lowbit::PackedMatrix packed;
  packed.format = in.PickValueInArray({WeightFormat::Float32, WeightFormat::BFloat16, WeightFormat::Int8});
  packed.rows = dimension(in);
  packed.cols = dimension(in);
  const unsigned __int128 product = static_cast<unsigned __int128>(packed.rows) * packed.cols;
  const bool small = product <= kMaxElements;
  const std::size_t elements = length(in, static_cast<std::size_t>(small ? product : 0), small);
  switch (packed.format) {
    case WeightFormat::Float32: {
      std::vector<std::uint32_t> words = fill<std::uint32_t>(in, elements);
      for (std::uint32_t w : words) packed.f32.push_back(fp::from_bits(w));
      break;
    }
    case WeightFormat::BFloat16:
      packed.bf16_bits = fill<std::uint16_t>(in, elements);
      break;
    case WeightFormat::Int8:
      packed.codes = fill<std::int8_t>(in, elements);
      packed.exponents = fill<std::int32_t>(in, length(in, packed.rows, packed.rows <= kMaxElements));
      break;
  }
  std::vector<float> out;
  if (!fuzz::accepted([&] { out = lowbit::materialize(packed); })) return;
  fuzz::require(out.size() == product, "materialize accepted vectors that do not match rows * cols");
  for (std::size_t i = 0; i < out.size(); ++i) {
    switch (packed.format) {
      case WeightFormat::Float32:
        fuzz::require(fp::bits(out[i]) == fp::bits(packed.f32[i]), "float32 materialize changed a value");
        break;
      case WeightFormat::BFloat16:
        fuzz::require(fp::bits(out[i]) == static_cast<std::uint32_t>(packed.bf16_bits[i]) << 16,
                      "bf16 widening is not a 16-bit shift");
        break;
      case WeightFormat::Int8:
        fuzz::require(matches_dequantized(packed.codes[i], packed.exponents[i / packed.cols], out[i]),
                      "int8 materialize is not code * 2^exponent");
        break;
    }
  }
}

// pack -> materialize on finite float32 weights: codes in [-127, 127], every result finite, and each
// within half a quantization step (int8; a whole one where the code is clamped to +-127) or half a bf16 ulp
// (relative 2^-8) of the flushed input.
void check_round_trip(FuzzedDataProvider& in) {
  const std::size_t rows = in.ConsumeIntegralInRange<std::size_t>(0, 16);
  const std::size_t cols = in.ConsumeIntegralInRange<std::size_t>(0, 16);
  std::vector<float> w(rows * cols);
  for (float& v : w) {
    v = fp::from_bits(in.ConsumeIntegral<std::uint32_t>());
    if (!fp::is_finite(v)) v = 0.0f;
  }
  const WeightFormat format = in.PickValueInArray({WeightFormat::BFloat16, WeightFormat::Int8});
  const lowbit::PackedMatrix packed = lowbit::pack_matrix(w.data(), rows, cols, format);
  std::vector<float> out;
  fuzz::require(fuzz::accepted([&] { out = lowbit::materialize(packed); }),
                "materialize refused pack_matrix's output");
  fuzz::require(out.size() == w.size(), "round trip changed the element count");
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double x = fp::F(w[i]);
    if (format == WeightFormat::BFloat16) {
      // Past the largest bf16 a value rounds to infinity, as the contract says.
      if (std::isinf(out[i])) {
        fuzz::require(std::fabs(x) >= 0x1.fefp127, "bf16 overflowed below its largest value");
        continue;
      }
      fuzz::require(std::fabs(out[i] - x) <= std::fabs(x) * 0x1p-8, "bf16 rounding error above half an ulp");
    } else {
      fuzz::require(packed.codes[i] >= -127, "int8 quantization produced -128");
      const std::int32_t e = packed.exponents[i / cols];
      fuzz::require(fp::is_finite(out[i]), "int8 round trip of a finite weight is not finite");
      // A row whose absmax is below 2^-120 has e < -126: 2^e is +0 there (contract L-3), so the row
      // materializes to zeros, an error below 2^-120.
      // A value in [127.5, 128) * 2^e is clamped to code 127: up to one step off, not half.
      const int half_steps = packed.codes[i] == 127 || packed.codes[i] == -127 ? 2 : 1;
      const double bound = e >= -126 ? std::ldexp(half_steps, e - 1) : 0x1p-120;
      fuzz::require(std::fabs(out[i] - x) <= bound, "int8 error above half a step");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool())
    check_materialize(in);
  else
    check_round_trip(in);
  return 0;
}
