// SHA-256 through OpenSSL's EVP digest interface, and hex output.
#include "io/sha256.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <new>

namespace samebits::io {

void Sha256::ContextFree::operator()(evp_md_ctx_st* context) const noexcept { EVP_MD_CTX_free(context); }

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}

Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
Sha256::~Sha256() = default;

void Sha256::update(const void* data, std::size_t size) noexcept {
  // With SHA-256 set up, an update only feeds the compression function: it cannot fail.
  if (size > 0) EVP_DigestUpdate(context_.get(), data, size);
}

Sha256Digest Sha256::finish() noexcept {
  Sha256Digest digest{};
  unsigned int written = 0;
  EVP_DigestFinal_ex(context_.get(), digest.data(), &written);
  // Ready for the next message: re-initializing a context that already holds SHA-256 allocates nothing.
  EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr);
  return digest;
}

Sha256Digest sha256(const void* data, std::size_t size) noexcept {
  Sha256Digest digest{};
  SHA256(static_cast<const unsigned char*>(data), size, digest.data());  // one-shot, no context allocated
  return digest;
}

std::string digest_hex(const Sha256Digest& digest) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * digest.size());
  for (std::uint8_t byte : digest) {
    text.push_back(kHexDigits[byte >> 4]);
    text.push_back(kHexDigits[byte & 15]);
  }
  return text;
}

std::string sha256_hex(const void* data, std::size_t size) { return digest_hex(sha256(data, size)); }

}  // namespace samebits::io
