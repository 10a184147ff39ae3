// Shared fixtures of the Mamba block tests: golden lane weights (docs/goldens.md §3), random weights, slabs.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "golden_fixtures.hpp"
#include "test_support.hpp"

namespace samebits::testing {

// w(shape, seed) of docs/goldens.md §3: hashed_uniform * float32(1/4) rounded, then + float32(-1/8) rounded.
inline std::vector<float> golden_weight(std::int64_t count, const std::string& seed) {
  std::vector<float> u = hashed_uniform(static_cast<std::size_t>(count), 1, seed);
  for (float& v : u) {
    const float scaled = v * 0.25f;
    v = scaled + -0.125f;
  }
  return u;
}

// Values and shapes of one block's weights, in table order; views over them make a NamedTensors.
struct WeightSet {
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::vector<float>> values;
  NamedTensors views() const {
    NamedTensors out;
    for (std::size_t i = 0; i < names.size(); ++i)
      out.push_back({names[i], TensorView{values[i].data(), shapes[i]}});
    return out;
  }
  std::vector<float>& operator[](const std::string& name) {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return values[i];
    throw std::out_of_range(name);
  }
};

template <typename Table>
WeightSet golden_lane(const std::string& lane, const Table& table, const std::vector<std::string>& ones) {
  WeightSet set;
  for (const auto& t : table) {
    set.names.emplace_back(t.name);
    set.shapes.push_back(t.shape);
    bool is_one = false;
    for (const auto& o : ones) is_one = is_one || o == t.name;
    set.values.push_back(is_one ? std::vector<float>(static_cast<std::size_t>(t.elements()), 1.0f)
                                : golden_weight(t.elements(), lane + ":" + t.name));
  }
  return set;
}

// Random weights of moderate scale; norms near one, A_log in [0, 2), dt biases that give dt ~ 0.01..1.
template <typename Table>
WeightSet random_weights(const Table& table, std::uint64_t seed) {
  Rng rng(seed);
  WeightSet set;
  for (const auto& t : table) {
    const std::string name = t.name;
    set.names.push_back(name);
    set.shapes.push_back(t.shape);
    std::vector<float> v = rng.uniform_vector(static_cast<std::size_t>(t.elements()), 0.3f);
    if (name.find("norm") != std::string::npos)
      for (float& e : v) e = 1.0f + e;
    if (name == "A_log")
      for (float& e : v) e = 1.0f + 3.0f * e;
    if (name == "dt_proj.bias" || name == "dt_bias")
      for (float& e : v) e = -2.0f + 6.0f * e;
    set.values.push_back(std::move(v));
  }
  return set;
}

// The first `count` floats of the hashed draw of docs/goldens.md §2.
inline std::vector<float> hashed_slab(int seed, std::size_t count) {
  std::vector<float> draw = hashed_draw(20000, 16, seed);
  return std::vector<float>(draw.begin(), draw.begin() + static_cast<std::ptrdiff_t>(count));
}

// Rows [t0, t0 + len) of every batch row of a (B, L, d) array, as a (B, len, d) array.
inline std::vector<float> time_slice(const std::vector<float>& x, std::int64_t B, std::int64_t L,
                                     std::int64_t d, std::int64_t t0, std::int64_t len) {
  std::vector<float> out(static_cast<std::size_t>(B * len * d));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < len; ++t)
      for (std::int64_t j = 0; j < d; ++j) out[(b * len + t) * d + j] = x[(b * L + t0 + t) * d + j];
  return out;
}

// Batch rows [b0, b0 + count) of a (B, L, d) array.
inline std::vector<float> batch_slice(const std::vector<float>& x, std::int64_t L, std::int64_t d,
                                      std::int64_t b0, std::int64_t count) {
  return std::vector<float>(x.begin() + b0 * L * d, x.begin() + (b0 + count) * L * d);
}

// Writes a (B, len, d) block into rows [t0, t0 + len) of a (B, L, d) array.
inline void put_time_slice(std::vector<float>& x, const std::vector<float>& part, std::int64_t B,
                           std::int64_t L, std::int64_t d, std::int64_t t0, std::int64_t len) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < len; ++t)
      for (std::int64_t j = 0; j < d; ++j) x[(b * L + t0 + t) * d + j] = part[(b * len + t) * d + j];
}

// The (2, 16, 32) slab x through block: forward gives the recorded digest `want`, the scalar twin the same
// bits, and so does decoding token by token from a fresh state (docs/goldens.md §6); returns that state.
template <typename Block>
auto expect_forward_twin_and_decode(const Block& block, const std::vector<float>& x,
                                    const std::string& want) {
  const TensorView xv{x.data(), {2, 16, 32}};
  const std::vector<float> y = block.forward(xv);
  EXPECT_EQ(golden_digest({{y.data(), {2, 16, 32}}}), want);
  EXPECT_TRUE(same_bits(block.forward_reference(xv), y));
  auto state = block.allocate_state(2);
  std::vector<float> decoded(y.size());
  for (std::int64_t t = 0; t < 16; ++t) {
    const std::vector<float> xt = time_slice(x, 2, 16, 32, t, 1);
    put_time_slice(decoded, block.step({xt.data(), {2, 1, 32}}, &state), 2, 16, 32, t, 1);
  }
  EXPECT_TRUE(same_bits(decoded, y));
  return state;
}

}  // namespace samebits::testing
