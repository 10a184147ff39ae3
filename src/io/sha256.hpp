// SHA-256 (FIPS 180-4), implemented here so checkpoint digests need no crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace samebits::io {

using Sha256Digest = std::array<std::uint8_t, 32>;

// Incremental hasher: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256() noexcept;
  void update(const void* data, std::size_t size) noexcept;
  void update(std::string_view bytes) noexcept { update(bytes.data(), bytes.size()); }
  // Pads, returns the digest and resets the hasher so it can be reused for a new message.
  Sha256Digest finish() noexcept;

 private:
  void compress(const std::uint8_t* block) noexcept;
  void reset() noexcept;

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> pending_;
  std::size_t pending_size_ = 0;
  std::uint64_t total_bytes_ = 0;
};

Sha256Digest sha256(const void* data, std::size_t size) noexcept;
inline Sha256Digest sha256(std::string_view bytes) noexcept { return sha256(bytes.data(), bytes.size()); }

// Lowercase hexadecimal, as Python's hashlib hexdigest() spells it.
std::string digest_hex(const Sha256Digest& digest);
std::string sha256_hex(const void* data, std::size_t size);
inline std::string sha256_hex(std::string_view bytes) { return sha256_hex(bytes.data(), bytes.size()); }

}  // namespace samebits::io
