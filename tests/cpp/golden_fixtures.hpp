// The deterministic fixtures and digest of docs/goldens.md (hashed_uniform draws, h(...)), for golden tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "io/sha256.hpp"

namespace samebits::testing {

// docs/goldens.md §2: n*d float32 in [0, 1] from a SHA-256 stream keyed by the counter bytes and the seed
// text.
inline std::vector<float> hashed_uniform(std::size_t n, std::size_t d, const std::string& seed) {
  const std::size_t count = n * d;
  io::Sha256 keyer;
  for (std::uint64_t i = 0; i < count; ++i) {
    unsigned char le[8];
    for (int b = 0; b < 8; ++b) le[b] = static_cast<unsigned char>(i >> (8 * b));
    keyer.update(le, 8);
  }
  keyer.update(seed);
  const io::Sha256Digest key = keyer.finish();
  std::vector<float> out(count);
  std::size_t produced = 0;
  for (std::uint64_t block = 0; produced < count; ++block) {
    unsigned char message[40];
    std::memcpy(message, key.data(), 32);
    for (int b = 0; b < 8; ++b) message[32 + b] = static_cast<unsigned char>(block >> (8 * b));
    const io::Sha256Digest chunk = io::sha256(message, sizeof message);
    for (int w = 0; w < 8 && produced < count; ++w) {
      const std::uint32_t u = static_cast<std::uint32_t>(chunk[4 * w]) |
                              (static_cast<std::uint32_t>(chunk[4 * w + 1]) << 8) |
                              (static_cast<std::uint32_t>(chunk[4 * w + 2]) << 16) |
                              (static_cast<std::uint32_t>(chunk[4 * w + 3]) << 24);
      out[produced++] = static_cast<float>(static_cast<double>(u) / 4294967296.0);  // one rounding
    }
  }
  return out;
}

// The "hashed" input draw: hashed_uniform(n, d, seed) * 4 - 2 in float32.
inline std::vector<float> hashed_draw(std::size_t n, std::size_t d, int seed) {
  std::vector<float> v = hashed_uniform(n, d, std::to_string(seed));
  for (float& x : v) x = x * 4.0f - 2.0f;
  return v;
}

// Python's repr of a shape tuple: "(2, 16, 32)", "(1024,)".
inline std::string python_shape(const std::vector<std::size_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

struct DigestPart {
  const float* data;
  std::vector<std::size_t> shape;
};

// h(a1, a2, ...): SHA-256 over dtype name, shape text and raw little-endian bytes of each array; 16 hex.
inline std::string golden_digest(const std::vector<DigestPart>& parts) {
  io::Sha256 hasher;
  for (const auto& part : parts) {
    std::size_t count = 1;
    for (auto s : part.shape) count *= s;
    hasher.update("float32");
    hasher.update(python_shape(part.shape));
    hasher.update(part.data, count * sizeof(float));
  }
  return io::digest_hex(hasher.finish()).substr(0, 16);
}

// h(v) of one float32 array of this shape.
inline std::string digest(const std::vector<float>& v, std::vector<std::size_t> shape) {
  return golden_digest({{v.data(), std::move(shape)}});
}

}  // namespace samebits::testing
