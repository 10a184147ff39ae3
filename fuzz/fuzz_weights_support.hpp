// Weight dicts for the weights and state harnesses: mostly right (names, shapes, values), sometimes wrong as
// FuzzedDataProvider decides, always backed by exactly the floats each shape claims.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "fuzz_support.hpp"
#include "numerics/fp.hpp"

namespace samebits::fuzz {

// Runs one of `cases` on the rest of the input, the input's next integral in [0, N) choosing which.
template <std::size_t N>
void run_one_of(FuzzedDataProvider& in, void (*const (&cases)[N])(FuzzedDataProvider&)) {
  cases[in.ConsumeIntegralInRange<int>(0, static_cast<int>(N) - 1)](in);
}

// No tensor the harnesses allocate exceeds this many floats, whatever the fuzzed shape says.
inline constexpr std::int64_t kMaxTensorFloats = 1 << 16;

struct WeightSpec {
  std::string name;
  std::vector<std::int64_t> shape;
};

// The floats a shape claims: the product of its dimensions, 0 when one is negative, -1 when over the cap.
inline std::int64_t claimed_floats(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return 0;
    if (d != 0 && count > kMaxTensorFloats / d) return -1;
    count *= d;
  }
  return count;
}

// Deterministic small weights (norm-like tensors near 1) so a right dict builds a model that computes.
inline float default_value(const std::string& name, std::int64_t i) {
  const std::uint32_t mixed =
      static_cast<std::uint32_t>(i) * 2654435761u + static_cast<std::uint32_t>(name.size());
  const float small = static_cast<float>(static_cast<std::int32_t>(mixed % 2001u) - 1000) / 16000.0f;
  return name.find("norm") != std::string::npos ? 1.0f + small : small;
}

// A named weight dict whose views stay valid while this object lives.
class WeightDict {
 public:
  std::vector<std::pair<std::string, TensorView>> views;
  bool non_finite = false;  // some value given is NaN or infinite
  bool poisoned = false;    // some value was replaced (NaN, inf, huge, any bit pattern)

  void add(std::string name, std::vector<std::int64_t> shape, std::vector<float> values) {
    for (float v : values) non_finite = non_finite || !fp::is_finite(v);
    storage_.push_back(std::move(values));
    views.emplace_back(std::move(name), TensorView{storage_.back().data(), std::move(shape)});
  }

 private:
  // Moving an inner vector keeps its heap buffer, so the views stay valid as this grows.
  std::vector<std::vector<float>> storage_;
};

// One shape, perturbed now and then (a dimension off by one or zero, a dimension added or dropped, the
// dimensions reversed), never past kMaxTensorFloats.
inline std::vector<std::int64_t> fuzzed_shape(FuzzedDataProvider& in,
                                              const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> out = shape;
  switch (in.ConsumeIntegralInRange<int>(0, 23)) {
    case 0:
      if (!out.empty())
        out[in.ConsumeIntegralInRange<std::size_t>(0, out.size() - 1)] += in.ConsumeBool() ? 1 : -1;
      break;
    case 1:
      if (!out.empty()) out[in.ConsumeIntegralInRange<std::size_t>(0, out.size() - 1)] = 0;
      break;
    case 2:
      out.push_back(1);
      break;
    case 3:
      if (!out.empty()) out.pop_back();
      break;
    case 4:
      out.assign(shape.rbegin(), shape.rend());
      break;
    case 5:
      if (!out.empty()) out[0] = in.ConsumeIntegral<std::int64_t>();  // anything at all, even negative
      break;
    default:
      break;
  }
  return claimed_floats(out) < 0 ? shape : out;
}

// The dict for `specs`: each tensor now and then missing, renamed or duplicated, an extra name now and
// then, shapes as fuzzed_shape gives, values the defaults with now and then a few poisoned (NaN, +-inf,
// any bit pattern). Order: as listed, or reversed.
inline WeightDict make_weight_dict(FuzzedDataProvider& in, const std::vector<WeightSpec>& specs) {
  WeightDict dict;
  const bool poison = in.ConsumeIntegralInRange<int>(0, 7) == 0;
  for (const WeightSpec& spec : specs) {
    std::string name = spec.name;
    switch (in.ConsumeIntegralInRange<int>(0, 39)) {
      case 0:
        continue;  // missing
      case 1:
        name += in.ConsumeBool() ? "_" : ".weight";
        break;
      case 2:
        name = specs[in.ConsumeIntegralInRange<std::size_t>(0, specs.size() - 1)].name;  // maybe a duplicate
        break;
      default:
        break;
    }
    std::vector<std::int64_t> shape = fuzzed_shape(in, spec.shape);
    std::vector<float> values(static_cast<std::size_t>(claimed_floats(shape)));
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = default_value(spec.name, static_cast<std::int64_t>(i));
    if (poison && !values.empty() && in.ConsumeBool()) {
      const std::size_t at = in.ConsumeIntegralInRange<std::size_t>(0, values.size() - 1);
      dict.poisoned = true;
      values[at] = in.PickValueInArray({std::numeric_limits<float>::quiet_NaN(),
                                        std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(), 3.0e38f, -0.0f, 1e-45f,
                                        fp::from_bits(in.ConsumeIntegral<std::uint32_t>())});
    }
    dict.add(std::move(name), std::move(shape), std::move(values));
  }
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) dict.add("extra.weight", {1}, {0.5f});
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    std::vector<std::pair<std::string, TensorView>> reversed(dict.views.rbegin(), dict.views.rend());
    dict.views = std::move(reversed);
  }
  return dict;
}

// Equal bits, every NaN equal to every NaN (the twins need not agree on a NaN's payload).
inline bool same_results(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (fp::bits(a[i]) != fp::bits(b[i])) return false;
  }
  return true;
}

// Bit-for-bit equality (a NaN equals itself here, as a state snapshot needs).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Tokens x (batch, length, width) with small finite values.
inline std::vector<float> small_inputs(std::int64_t count) {
  std::vector<float> x(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 4.0f;
  return x;
}

}  // namespace samebits::fuzz
