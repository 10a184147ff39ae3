// SHA-256 (FIPS 180-4) for checkpoint digests and state fingerprints, computed by OpenSSL's libcrypto
// (Debian: libssl-dev), whose SHA extension / AVX2 code hashes several times faster than a portable loop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX (opaque here, so callers need no OpenSSL header)

namespace samebits::io {

using Sha256Digest = std::array<std::uint8_t, 32>;

// Incremental hasher: update() any number of times, then finish() once. Movable, not copyable.
class Sha256 {
 public:
  Sha256();  // throws std::bad_alloc when OpenSSL cannot set up a context
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  ~Sha256();
  void update(const void* data, std::size_t size) noexcept;
  void update(std::string_view bytes) noexcept { update(bytes.data(), bytes.size()); }
  // Pads, returns the digest and resets the hasher so it can be reused for a new message.
  Sha256Digest finish() noexcept;

 private:
  struct ContextFree {
    void operator()(evp_md_ctx_st* context) const noexcept;
  };
  std::unique_ptr<evp_md_ctx_st, ContextFree> context_;
};

Sha256Digest sha256(const void* data, std::size_t size) noexcept;
inline Sha256Digest sha256(std::string_view bytes) noexcept { return sha256(bytes.data(), bytes.size()); }

// Lowercase hexadecimal, as Python's hashlib hexdigest() spells it.
std::string digest_hex(const Sha256Digest& digest);
std::string sha256_hex(const void* data, std::size_t size);
inline std::string sha256_hex(std::string_view bytes) { return sha256_hex(bytes.data(), bytes.size()); }

}  // namespace samebits::io
