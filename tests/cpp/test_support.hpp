// Shared helpers for the C++ tests: deterministic data, bitwise comparison, target/thread sweeps.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "numerics/simd_target.hpp"

namespace samebits::testing {

// SplitMix64: a tiny deterministic generator so fixtures never depend on the library under test.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float uniform() { return static_cast<float>(static_cast<double>(next() >> 40) / 8388608.0 - 1.0); }
  std::vector<float> uniform_vector(std::size_t count, float scale = 1.0f) {
    std::vector<float> v(count);
    for (auto& x : v) x = uniform() * scale;
    return v;
  }

 private:
  std::uint64_t state_;
};

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Index of the first differing bit pattern, or -1.
inline std::int64_t first_difference(const float* a, const float* b, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return i;
  return -1;
}

// Runs body once for every available SIMD target and each thread count in {1, 2, 3}; restores both.
inline void for_each_target_and_threads(const std::function<void(const std::string&)>& body) {
  const int saved_threads = num_threads();
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      body(std::string(simd::target_name(target)) + "/threads=" + std::to_string(threads));
    }
  }
  simd::reset_target();
  set_num_threads(saved_threads);
}

// The message of the error fn() throws, "<wrong kind> ..." for another kind, "<no error>" for none.
template <typename Fn>
std::string error_of(Fn&& fn, ErrorKind kind) {
  try {
    fn();
  } catch (const Error& e) {
    if (e.kind() != kind) return std::string("<wrong kind> ") + e.what();
    return e.what();
  }
  return "<no error>";
}

// The message of the error fn() throws, with a failed expectation unless it is a Value error;
// "<no error>" for none.
template <typename Fn>
std::string value_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value) << e.what();
    return e.what();
  }
  return "<no error>";
}

}  // namespace samebits::testing
