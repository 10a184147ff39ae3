// The GGUF reader and the tensor types (docs/gguf.md §3-§8): every supported type against an integer oracle
// that forms each element's exact value as N * 2^-24 and rounds it once, edge blocks included; every
// container check refused with its field and value; truncation at every byte refused, never a crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <samebits/errors.hpp>
#include <samebits/gguf.hpp>
#include <string>
#include <vector>

#include "gguf_builder.hpp"
#include "io/gguf.hpp"
#include "numerics/gguf_quants.hpp"

namespace samebits {
namespace {

using testing::array_head;
using testing::Builder;
using testing::put;
using testing::put_str;

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// ------------------------------------------------------------------ the integer oracle (docs/gguf.md §7.1)

// An exact value N * 2^-24 with the IEEE sign a zero result carries.
struct Exact {
  std::int64_t n = 0;
  bool negative_zero = false;
};

// fp16 bits (finite) as a signed multiple of 2^-24, and its sign bit.
std::int64_t f16_units(std::uint16_t h) {
  const std::int64_t e = (h >> 10) & 31, m = h & 1023;
  const std::int64_t mag = e == 0 ? m : (1024 + m) << (e - 1);
  return (h & 0x8000) ? -mag : mag;
}
bool f16_sign(std::uint16_t h) { return (h & 0x8000) != 0; }

// A product d * k1 * k2 of an fp16 d and integers: zero sign is the XOR of the factor signs (integer 0 is +).
Exact product(std::uint16_t d, std::int64_t k1, std::int64_t k2) {
  return {f16_units(d) * k1 * k2, (f16_sign(d) != (k1 < 0)) != (k2 < 0)};
}
// a + b with IEEE zero signs: -0 only when both are -0; an exact zero of non-zero operands is +0.
Exact add(Exact a, Exact b) {
  const bool a_zero = a.n == 0, b_zero = b.n == 0;
  return {a.n + b.n, a_zero && b_zero && a.negative_zero && b.negative_zero};
}
Exact negate(Exact a) { return {-a.n, a.n == 0 && !a.negative_zero}; }

float round_once(Exact x) {
  if (x.n == 0) return x.negative_zero ? -0.0f : 0.0f;
  // |n| < 2^55: the conversion rounds once (to nearest even); the power-of-two scale is exact (normal).
  return static_cast<float>(x.n) * 0x1p-24f;
}

std::uint16_t le16(const unsigned char* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

// The exact value of element e of one block, written from the formulas of docs/gguf.md §6.
float oracle(std::uint32_t type, const unsigned char* b, int e) {
  switch (type) {
    case 0: {
      float f;
      std::memcpy(&f, b, 4);
      return f;
    }
    case 1:
      return round_once(product(le16(b), 1, 1));
    case 30: {
      const std::uint32_t bits = static_cast<std::uint32_t>(le16(b)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case 2: {  // Q4_0
      const int j = e & 15, q = (e < 16 ? b[2 + j] & 15 : b[2 + j] >> 4) - 8;
      return round_once(product(le16(b), q, 1));
    }
    case 3: {  // Q4_1
      const int j = e & 15, q = e < 16 ? b[4 + j] & 15 : b[4 + j] >> 4;
      return round_once(add(product(le16(b), q, 1), product(le16(b + 2), 1, 1)));
    }
    case 6:
    case 7: {  // Q5_0, Q5_1
      const int o = type == 6 ? 2 : 4, j = e & 15;
      const int hbit = (b[o + (e >> 3)] >> (e & 7)) & 1;
      const int q = (e < 16 ? b[o + 4 + j] & 15 : b[o + 4 + j] >> 4) | (hbit << 4);
      if (type == 6) return round_once(product(le16(b), q - 16, 1));
      return round_once(add(product(le16(b), q, 1), product(le16(b + 2), 1, 1)));
    }
    case 8:
      return round_once(product(le16(b), static_cast<std::int8_t>(b[2 + e]), 1));
    case 10: {  // Q2_K
      const int n = e >> 7, j = (e >> 5) & 3, l = e & 31, sc = b[e >> 4];
      const int q = (b[16 + 32 * n + l] >> (2 * j)) & 3;
      return round_once(add(product(le16(b + 80), sc & 15, q), negate(product(le16(b + 82), sc >> 4, 1))));
    }
    case 11: {  // Q3_K
      const int n = e >> 7, j = (e >> 5) & 3, l = e & 31, k = e >> 4;
      const unsigned char* s = b + 96;
      const int low = k < 8 ? s[k] & 15 : s[k - 8] >> 4, high = (s[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
      const int q = ((b[32 + 32 * n + l] >> (2 * j)) & 3) - (((b[l] >> (4 * n + j)) & 1) ? 0 : 4);
      return round_once(product(le16(b + 108), (low | (high << 4)) - 32, q));
    }
    case 12:
    case 13: {  // Q4_K, Q5_K
      const int k = e >> 5, c = e >> 6, l = e & 63;
      const unsigned char* s = b + 4;
      const int sc = k < 4 ? s[k] & 63 : (s[k + 4] & 15) | ((s[k - 4] >> 6) << 4);
      const int mn = k < 4 ? s[k + 4] & 63 : (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
      const unsigned char* qs = b + (type == 12 ? 16 : 48);
      int q = l < 32 ? qs[32 * c + l] & 15 : qs[32 * c + l - 32] >> 4;
      if (type == 13) q += 16 * ((b[16 + (l & 31)] >> k) & 1);
      return round_once(add(product(le16(b), sc, q), negate(product(le16(b + 2), mn, 1))));
    }
    case 14: {  // Q6_K
      const int n = e >> 7, g = (e >> 5) & 3, l = e & 31;
      const int byte = b[64 * n + l + 32 * (g & 1)];
      const int q = ((g < 2 ? byte & 15 : byte >> 4) | (((b[128 + 32 * n + l] >> (2 * g)) & 3) << 4)) - 32;
      return round_once(product(le16(b + 208), static_cast<std::int8_t>(b[192 + (e >> 4)]), q));
    }
    default:
      ADD_FAILURE() << "no oracle for type " << type;
      return 0.0f;
  }
}

const std::vector<std::uint32_t> kSupported = {0, 1, 30, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14};

// Byte offsets of a type's fp16 scale / min fields.
std::vector<int> fp16_fields(std::uint32_t type) {
  switch (type) {
    case 1:
    case 2:
    case 6:
    case 8:
      return {0};
    case 3:
    case 7:
    case 12:
    case 13:
      return {0, 2};
    case 10:
      return {80, 82};
    case 11:
      return {108};
    case 14:
      return {208};
    default:
      return {};
  }
}

const std::vector<std::uint16_t> kEdgeHalves = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400,
                                                0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x0200, 0x83FF};

// Random blocks (finite fp16 fields, random sign) followed by edge blocks: every pair of edge halves in the
// scale/min fields, with random quants, all-zero quants and all-one quants.
std::string test_blocks(std::uint32_t type, std::mt19937& rng, std::size_t& blocks) {
  // Not a structured binding: clang 14 cannot capture one in the lambdas below.
  const std::size_t bytes = gguf_tensor_type_block(type).second;
  std::string out;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> half(0, 0x7BFF);
  auto random_block = [&] {
    std::string b(bytes, '\0');
    for (auto& c : b) c = static_cast<char>(byte(rng));
    if (type == 0) {  // a finite F32: random bits with the exponent kept below 255
      const std::uint32_t v = (static_cast<std::uint32_t>(rng()) & 0xBFFFFFFFu);
      std::memcpy(b.data(), &v, 4);
    }
    if (type == 30 && ((static_cast<unsigned char>(b[1]) & 0x7F) == 0x7F))
      b[1] = static_cast<char>(b[1] ^ 0x40);
    for (int o : fp16_fields(type)) {
      const auto h = static_cast<std::uint16_t>(half(rng) | ((rng() & 1) ? 0x8000 : 0));
      b[o] = static_cast<char>(h & 0xFF);
      b[o + 1] = static_cast<char>(h >> 8);
    }
    return b;
  };
  blocks = 0;
  for (int i = 0; i < 64; ++i, ++blocks) out += random_block();
  const std::vector<int> fields = fp16_fields(type);
  for (std::uint16_t h0 : kEdgeHalves)
    for (std::uint16_t h1 : kEdgeHalves) {
      if (fields.size() < 2 && h1 != kEdgeHalves[0]) continue;
      for (int fill = 0; fill < 3; ++fill, ++blocks) {
        std::string b = random_block();
        if (fill > 0 && type != 0 && type != 30)
          for (auto& c : b) c = static_cast<char>(fill == 1 ? 0x00 : 0xFF);
        const std::uint16_t hs[2] = {h0, h1};
        for (std::size_t f = 0; f < fields.size(); ++f) {
          b[fields[f]] = static_cast<char>(hs[f] & 0xFF);
          b[fields[f] + 1] = static_cast<char>(hs[f] >> 8);
        }
        out += b;
      }
    }
  return out;
}

TEST(GgufDequantize, EveryTypeEqualsTheExactOracleBitForBit) {
  std::mt19937 rng(2026);
  for (std::uint32_t type : kSupported) {
    std::size_t blocks = 0;
    const std::string data = test_blocks(type, rng, blocks);
    const auto [elems, bytes] = gguf_tensor_type_block(type);
    const std::vector<float> got = gguf_dequantize(type, data.data(), data.size(), blocks * elems);
    ASSERT_EQ(got.size(), blocks * elems);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < blocks; ++i)
      for (std::uint32_t e = 0; e < elems; ++e) {
        const float want = oracle(type, reinterpret_cast<const unsigned char*>(data.data()) + i * bytes,
                                  static_cast<int>(e));
        if (bits_of(want) != bits_of(got[i * elems + e]) && mismatches++ < 5)
          ADD_FAILURE() << gguf_tensor_type_name(type) << " block " << i << " element " << e << ": got "
                        << got[i * elems + e] << " want " << want;
      }
    EXPECT_EQ(mismatches, 0u) << gguf_tensor_type_name(type);
  }
}

TEST(GgufDequantize, SignedZerosAndExtremes) {
  // Q4_0 with d = -1.0 and q = 8 (value 0): -0.0; Q6_K at the tightest exact case 127 * 31 * 65504.
  std::string q4(18, '\0');
  q4[0] = 0x00;
  q4[1] = static_cast<char>(0xBC);
  for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<char>(0x88);
  for (float v : gguf_dequantize(2, q4.data(), q4.size(), 32)) EXPECT_EQ(bits_of(v), 0x80000000u);
  std::string q6(210, '\0');
  for (int i = 0; i < 128; ++i) q6[i] = static_cast<char>(0xFF);    // low nibbles 15
  for (int i = 128; i < 192; ++i) q6[i] = static_cast<char>(0xAA);  // high bits 2 -> q = 47 - 32 = 15
  for (int i = 192; i < 208; ++i) q6[i] = 127;
  q6[208] = static_cast<char>(0xFF);
  q6[209] = 0x7B;
  for (float v : gguf_dequantize(14, q6.data(), q6.size(), 256)) EXPECT_EQ(v, 65504.0f * 127.0f * 15.0f);
}

TEST(GgufDequantize, NonFiniteScalesAndValuesAreRefusedNamingTheBlock) {
  struct Case {
    std::uint32_t type;
    int field;
    std::uint16_t half;
  };
  for (const Case c :
       {Case{2, 0, 0x7C00}, Case{3, 2, 0xFC00}, Case{6, 0, 0x7E00}, Case{7, 2, 0x7C01}, Case{8, 0, 0xFE00},
        Case{10, 82, 0x7C00}, Case{11, 108, 0xFC00}, Case{12, 2, 0x7E00}, Case{13, 0, 0x7C00},
        Case{14, 208, 0xFFFF}, Case{1, 0, 0x7C00}, Case{30, 0, 0x7F80}, Case{30, 0, 0xFFC0}}) {
    const auto [elems, bytes] = gguf_tensor_type_block(c.type);
    std::string data(3 * bytes, '\0');
    data[bytes + c.field] = static_cast<char>(c.half & 0xFF);
    data[bytes + c.field + 1] = static_cast<char>(c.half >> 8);
    try {
      gguf_dequantize(c.type, data.data(), data.size(), 3 * elems);
      ADD_FAILURE() << gguf_tensor_type_name(c.type) << " accepted a non-finite field";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Value);
      EXPECT_NE(std::string(e.what()).find("block 1 of " + gguf_tensor_type_name(c.type)), std::string::npos)
          << e.what();
    }
  }
  for (std::uint32_t bits : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u}) {
    std::string data(8, '\0');
    std::memcpy(data.data() + 4, &bits, 4);
    EXPECT_THROW(gguf_dequantize(0, data.data(), 8, 2), Error);
  }
}

TEST(GgufDequantize, OtherTypesAreRefusedByName) {
  const std::string data(1024, '\0');
  const std::vector<std::pair<std::uint32_t, std::string>> refused = {
      {9, "Q8_1"},     {15, "Q8_K"},    {16, "IQ2_XXS"},
      {20, "IQ4_NL"},  {23, "IQ4_XS"},  {29, "IQ1_M"},
      {34, "TQ1_0"},   {35, "TQ2_0"},   {39, "MXFP4"},
      {40, "NVFP4"},   {41, "Q1_0"},    {42, "Q2_0"},
      {24, "I8"},      {28, "F64"},     {4, "removed"},
      {36, "removed"}, {43, "unknown"}, {0xFFFFFFFF, "unknown"}};
  for (const auto& [type, name] : refused) {
    EXPECT_FALSE(gguf_tensor_type_supported(type));
    EXPECT_EQ(gguf_tensor_type_name(type), name);
    try {
      gguf_dequantize(type, data.data(), 0, 0);
      ADD_FAILURE() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ggml type " + name), std::string::npos) << e.what();
    }
  }
  // Sizes that do not match the blocks.
  EXPECT_THROW(gguf_dequantize(2, data.data(), 18, 16), Error);
  EXPECT_THROW(gguf_dequantize(2, data.data(), 17, 32), Error);
  EXPECT_THROW(gguf_dequantize(2, data.data(), 36, 32), Error);
}

// ------------------------------------------------------------------ the container

std::string f32_payload(std::vector<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

Builder valid_builder() {
  Builder b;
  b.kv_str("general.architecture", "llama").kv_u32("general.quantization_version", 2);
  std::string arr = array_head(5, 3);  // INT32 items
  for (int v : {-1, 0, 7}) put(arr, static_cast<std::uint32_t>(v), 4);
  b.kv("x.ints", 9, arr);
  std::string strs = array_head(8, 2);  // STRING items
  put_str(strs, "a b");
  put_str(strs, "");
  b.kv("x.strings", 9, strs);
  b.kv("x.bool", 7, std::string(1, '\1'));
  std::string f;
  put(f, bits_of(1e-5f), 4);
  b.kv("x.f32", 6, f);
  std::string q8(34, '\0');
  q8[1] = 0x3C;  // d = 1.0
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<char>(j - 16);
  b.tensor("a.f32", {3, 2}, 0, f32_payload({1, 2, 3, 4, 5, 6}));
  b.tensor("b.q8_0", {32}, 8, q8);
  return b;
}

GgufFile open_bytes(const std::string& bytes) { return GgufFile::from_bytes("t.gguf", bytes); }

void expect_refusal(const std::string& bytes, const std::string& fragment) {
  try {
    open_bytes(bytes);
    ADD_FAILURE() << "accepted; wanted a refusal with: " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("t.gguf"), std::string::npos) << e.what();
  }
}

TEST(GgufReader, ReadsMetadataAndTensors) {
  for (std::uint32_t version : {2u, 3u}) {
    Builder b = valid_builder();
    b.version = version;
    const GgufFile file = open_bytes(b.build());
    EXPECT_EQ(file.version(), version);
    EXPECT_EQ(file.metadata().size(), 6u);
    EXPECT_EQ(file.find("general.architecture")->strings.at(0), "llama");
    EXPECT_EQ(file.find("x.ints")->element, GgufValueType::Int32);
    EXPECT_EQ(file.find("x.ints")->ints, (std::vector<std::int64_t>{-1, 0, 7}));
    EXPECT_EQ(file.find("x.strings")->strings, (std::vector<std::string>{"a b", ""}));
    EXPECT_EQ(file.find("x.bool")->uints.at(0), 1u);
    EXPECT_EQ(file.find("x.f32")->floats.at(0), static_cast<double>(1e-5f));
    ASSERT_EQ(file.tensors().size(), 2u);
    EXPECT_EQ(file.tensors()[1].type_name, "Q8_0");
    EXPECT_EQ(file.tensors()[1].offset, 32u);
    EXPECT_EQ(file.dequantize("a.f32"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    const std::vector<float> q = file.dequantize("b.q8_0");
    for (int j = 0; j < 32; ++j) EXPECT_EQ(q[j], static_cast<float>(j - 16));
    EXPECT_EQ(file.data_offset() % 32, 0u);
    try {
      file.dequantize("nope");
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Key);
    }
  }
}

TEST(GgufReader, HeaderRefusals) {
  const std::string good = valid_builder().build();
  expect_refusal(good.substr(0, 23), "shorter than the 24-byte GGUF header");
  std::string bad = good;
  bad[0] = 'X';
  expect_refusal(bad, "magic is 58 47 55 46");
  for (std::uint32_t v : {0u, 1u, 4u, 0xFFFFu}) {
    Builder b = valid_builder();
    b.version = v;
    expect_refusal(b.build(), "GGUF version " + std::to_string(v) + " is not supported");
  }
  Builder be = valid_builder();
  be.version = 0x03000000u;
  expect_refusal(be.build(), "big-endian");
  bad = good;
  put(bad, 0, 0);
  std::string huge;
  put(huge, std::uint64_t{1} << 62, 8);
  bad.replace(8, 8, huge);
  expect_refusal(bad, "tensor_count 4611686018427387904 cannot fit");
  bad = good;
  bad.replace(16, 8, huge);
  expect_refusal(bad, "metadata_kv_count 4611686018427387904 cannot fit");
}

TEST(GgufReader, MetadataRefusals) {
  auto with = [](const std::function<void(Builder&)>& edit) {
    Builder b = valid_builder();
    edit(b);
    return b.build();
  };
  expect_refusal(with([](Builder& b) { b.kv("", 4, std::string(4, '\0')); }), "has an empty key");
  expect_refusal(with([](Builder& b) { b.kv("a\nb", 4, std::string(4, '\0')); }), "is not printable ASCII");
  expect_refusal(with([](Builder& b) { b.kv_u32("x.bool", 1); }), "metadata key 'x.bool' appears twice");
  expect_refusal(with([](Builder& b) { b.kv("k", 13, std::string(4, '\0')); }),
                 "metadata 'k' value type is 13, not a GGUF value type");
  expect_refusal(with([](Builder& b) { b.kv("k", 0xFFFFFFFF, std::string(4, '\0')); }), "is 4294967295");
  expect_refusal(with([](Builder& b) { b.kv("k", 9, array_head(9, 0)); }), "nested arrays are refused");
  expect_refusal(with([](Builder& b) { b.kv("k", 9, array_head(0, (std::uint64_t{1} << 30) + 1)); }),
                 "array count 1073741825 exceeds 2^30");
  expect_refusal(with([](Builder& b) { b.kv("k", 9, array_head(8, 1000000)); }),
                 "array of 1000000 STRING cannot fit");
  expect_refusal(with([](Builder& b) {
                   std::string v;
                   put(v, std::uint64_t{1} << 40, 8);
                   b.kv("k", 8, v);
                 }),
                 "metadata 'k' declares 1099511627776 bytes");
  expect_refusal(with([](Builder& b) { b.kv("k", 7, std::string(1, '\2')); }), "BOOL byte 2, not 0 or 1");
  // alignment
  expect_refusal(with([](Builder& b) { b.kv_u32("general.alignment", 0); }),
                 "general.alignment 0 is not a power of two");
  expect_refusal(with([](Builder& b) { b.kv_u32("general.alignment", 3); }), "alignment 3 is not a power");
  expect_refusal(with([](Builder& b) { b.kv("general.alignment", 10, std::string(8, '\0')); }),
                 "general.alignment is UINT64, not UINT32");
  expect_refusal(with([](Builder& b) { b.kv("general.alignment", 5, std::string(4, '\0')); }),
                 "general.alignment is INT32");
  // model-level keys
  expect_refusal(with([](Builder& b) { b.kv_str("general.type", "adapter"); }), "general.type 'adapter'");
  expect_refusal(with([](Builder& b) { b.kv_u32("split.count", 2); }), "multi-file (split) GGUF");
  Builder unversioned;
  unversioned.tensor("q", {32}, 8, std::string(34, '\0'));
  expect_refusal(unversioned.build(), "no general.quantization_version");
  expect_refusal(with([](Builder& b) { b.kv_u32("general.quantization_version", 1); }), "appears twice");
}

TEST(GgufReader, CustomAlignmentOneIsAccepted) {
  for (std::uint32_t a : {1u, 8u, 64u}) {
    Builder b;
    b.alignment = a;
    b.kv_u32("general.alignment", a);
    b.tensor("t", {3}, 0, f32_payload({1, 2, 3})).tensor("u", {1}, 1, std::string("\x00\x3c", 2));
    const GgufFile f = open_bytes(b.build());
    EXPECT_EQ(f.alignment(), a);
    EXPECT_EQ(f.dequantize("u").at(0), 1.0f);
  }
}

TEST(GgufReader, TensorInfoRefusals) {
  const std::string payload = f32_payload({1, 2, 3, 4});
  auto one = [&](const std::string& name, const std::vector<std::uint64_t>& ne, std::uint32_t type,
                 const std::string& data) {
    Builder b;
    b.kv_u32("general.quantization_version", 2);
    b.tensor(name, ne, type, data);
    return b.build();
  };
  EXPECT_NO_THROW(open_bytes(one(std::string(63, 'n'), {4}, 0, payload)));
  expect_refusal(one(std::string(64, 'n'), {4}, 0, payload), "more than the limit 63");
  expect_refusal(one("", {4}, 0, payload), "tensor info 0 has an empty name");
  expect_refusal(one("t\x01", {4}, 0, payload), "is not printable ASCII");
  expect_refusal(one("t", {}, 0, payload), "tensor 't' has n_dims 0, not 1..4");
  expect_refusal(one("t", {1, 1, 1, 1, 4}, 0, payload), "has n_dims 5");
  expect_refusal(one("t", {4, 0}, 0, payload), "ne[1] is 0, not in [1, 2^62)");
  expect_refusal(one("t", {std::uint64_t{1} << 62}, 0, payload), "ne[0] is 4611686018427387904");
  expect_refusal(one("t", {4194305, 4194305, 211106198978564}, 0, payload), "more than 2^63 elements");
  expect_refusal(one("t", {4}, 43, payload), "tensor 't' has unknown ggml type 43");
  expect_refusal(one("t", {32}, 4, payload), "removed ggml type 4");
  expect_refusal(one("t", {256}, 16, payload), "has type IQ2_XXS (16), which samebits refuses by name");
  expect_refusal(one("t", {256}, 15, payload), "has type Q8_K (15)");
  expect_refusal(one("t", {32}, 39, payload), "has type MXFP4 (39)");
  expect_refusal(one("t", {256}, 34, payload), "has type TQ1_0 (34)");
  expect_refusal(one("t", {16}, 8, payload), "has ne[0] 16, not a multiple of its block of 32");
  expect_refusal(one("t", {16}, 0, payload), "lies beyond the end of the file");
  // duplicate names, wrong offsets, trailing bytes
  Builder dup;
  dup.tensor("t", {4}, 0, payload).tensor("t", {4}, 0, payload);
  expect_refusal(dup.build(), "tensor 't' appears twice");
  Builder two;
  two.tensor("a", {4}, 0, payload).tensor("b", {4}, 0, payload);
  std::string moved = two.build();
  std::string b_name;
  put_str(b_name, "b");
  const std::size_t offset_at = moved.find(b_name) + b_name.size() + 4 + 8 + 4;
  std::string misplaced = moved;
  misplaced[offset_at] = 48;  // b at 48 instead of 32
  expect_refusal(misplaced, "tensor 'b' has offset 48, expected 32");
  misplaced[offset_at] = 0;  // overlapping a
  expect_refusal(misplaced, "tensor 'b' has offset 0, expected 32");
  expect_refusal(moved + std::string(40, '\0'), "trailing bytes after the data section");
  EXPECT_NO_THROW(open_bytes(moved.substr(0, moved.size() - 16)));  // the last padding may be omitted
}

TEST(GgufReader, NonFiniteTensorDataIsRefusedAtUse) {
  Builder b;
  b.kv_u32("general.quantization_version", 2);
  std::string q(36, '\0');
  q[18 + 1] = 0x7C;  // block 1: d = inf
  b.tensor("w", {64}, 2, q);
  const GgufFile f = open_bytes(b.build());
  try {
    f.dequantize("w");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'w' (Q4_0) holds a non-finite scale at block 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(f.check_finite(), Error);
}

TEST(GgufReader, EveryTruncationIsRefusedWithoutACrash) {
  const std::string good = valid_builder().build();
  for (std::size_t n = 0; n < good.size() - 32; ++n) {  // the last tensor's data and padding included
    try {
      open_bytes(good.substr(0, n));
      // Accepted only when the cut falls inside the last tensor's padding.
      ADD_FAILURE() << "a file cut at " << n << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Value);
    }
  }
}

TEST(GgufReader, CommittedFixtureMatchesTheOracle) {
  const std::string path = std::string(SAMEBITS_SOURCE_DIR) + "/tests/fixtures/gguf/types.gguf";
  const GgufFile file = GgufFile::open(path);
  std::size_t seen = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    const auto [elems, bytes] = gguf_tensor_type_block(t.type);
    const std::vector<float> got = file.dequantize(t.name);
    io::GgufFile raw(path);
    const unsigned char* at = raw.tensor_bytes(*raw.find_tensor(t.name));
    for (std::uint64_t i = 0; i < t.elements; ++i)
      ASSERT_EQ(bits_of(got[i]),
                bits_of(oracle(t.type, at + (i / elems) * bytes, static_cast<int>(i % elems))))
          << t.name << " element " << i;
    ++seen;
  }
  EXPECT_EQ(seen, kSupported.size());
  try {
    GgufFile::open(path + ".missing");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
}

}  // namespace
}  // namespace samebits
