// SHA-256 against the FIPS 180-4 / NIST example vectors, padding edges and split incremental updates.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/sha256.hpp"

using samebits::io::digest_hex;
using samebits::io::Sha256;
using samebits::io::sha256;
using samebits::io::sha256_hex;

namespace {

// Deterministic bytes for the split tests: (7 i + 3) mod 256.
std::string pattern_bytes(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7 + 3) & 0xFF);
  return bytes;
}

}  // namespace

// The first five digests are the NIST/FIPS 180-4 published examples.
TEST(Sha256, NistEmptyMessage) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, NistAbc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, Nist448BitMessage) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, Nist896BitMessage) {
  EXPECT_EQ(
      sha256_hex(
          "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
          "mnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, NistOneMillionA) {
  const std::string expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  EXPECT_EQ(sha256_hex(std::string(1'000'000, 'a')), expected);
  // The same message fed in 1000 uneven pieces.
  Sha256 hasher;
  std::size_t fed = 0;
  for (std::size_t piece = 1; fed < 1'000'000; piece = piece % 997 + 1) {
    std::size_t take = std::min(piece, 1'000'000 - fed);
    hasher.update(std::string(take, 'a'));
    fed += take;
  }
  EXPECT_EQ(digest_hex(hasher.finish()), expected);
}

// Lengths around the padding boundaries (55/56 bytes need one or two final blocks).
// Expected digests computed once with Python's hashlib.sha256(b'x' * n).hexdigest().
TEST(Sha256, PaddingBoundaries) {
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"},
      {119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
      {120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98"},
  };
  for (const auto& [size, expected] : cases) EXPECT_EQ(sha256_hex(std::string(size, 'x')), expected) << size;
}

// Every two-way split of a 1000-byte message, across all block offsets, equals the one-shot digest
// (computed once with Python: hashlib.sha256(bytes((i*7+3) & 0xff for i in range(1000))).hexdigest()).
TEST(Sha256, IncrementalSplitsAcrossBlockBoundaries) {
  const std::string message = pattern_bytes(1000);
  const std::string expected = "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371";
  ASSERT_EQ(sha256_hex(message), expected);
  for (std::size_t split = 0; split <= message.size(); ++split) {
    Sha256 hasher;
    hasher.update(message.data(), split);
    hasher.update(message.data() + split, message.size() - split);
    ASSERT_EQ(digest_hex(hasher.finish()), expected) << "split at " << split;
  }
  // Three pieces with zero-length updates in between.
  for (std::size_t first : {0u, 1u, 63u, 64u, 65u, 128u, 500u}) {
    for (std::size_t second : {0u, 1u, 55u, 56u, 64u, 200u}) {
      Sha256 hasher;
      hasher.update(message.data(), first);
      hasher.update(message.data(), 0);
      hasher.update(message.data() + first, second);
      hasher.update(message.data() + first + second, message.size() - first - second);
      ASSERT_EQ(digest_hex(hasher.finish()), expected) << first << "+" << second;
    }
  }
}

TEST(Sha256, FinishResetsForReuse) {
  Sha256 hasher;
  hasher.update("abc");
  auto first = hasher.finish();
  hasher.update("abc");
  EXPECT_EQ(hasher.finish(), first);
  EXPECT_EQ(digest_hex(hasher.finish()), sha256_hex(""));
}

TEST(Sha256, OneShotBytesMatchHex) {
  auto digest = sha256("abc", 3);
  EXPECT_EQ(digest[0], 0xba);
  EXPECT_EQ(digest[31], 0xad);
  EXPECT_EQ(digest_hex(digest), sha256_hex("abc"));
}
