// The safetensors reader: every dtype read back exactly, every header refusal with its sentence, and
// checkpoint directories (single file, sharded index, one lone shard) with theirs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <samebits/errors.hpp>
#include <samebits/lowbit.hpp>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "numerics/fp.hpp"
#include "safetensors_support.hpp"

namespace samebits {
namespace {

namespace fs = std::filesystem;

using Tensor = testing::StoredTensor;
using testing::safetensors_bytes;

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A scratch directory per test, removed afterwards.
class Scratch : public testing::ScratchDir {
 public:
  Scratch() : ScratchDir("samebits_safetensors_") {}
};

std::string message_of(const std::function<void()>& call, ErrorKind kind) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(Safetensors, EveryDtypeReadsBackExactly) {
  const std::vector<float> f32 = {1.5f, -0.0f, fp::from_bits(0x00000001u), fp::from_bits(0x7FC01234u)};
  const std::vector<std::uint16_t> bf16 = {0x3F80u, 0x8001u, 0x7F81u, 0xFF80u};
  const std::vector<std::uint16_t> f16 = {0x3C00u, 0x0001u, 0x7C01u, 0xFBFFu};
  const std::vector<std::int32_t> i32 = {-7, 2147483647};
  const std::vector<std::int64_t> i64 = {-1, std::int64_t{1} << 40};
  Scratch scratch;
  const std::string path = scratch.write(
      "all.safetensors", safetensors_bytes({{"a.f32", {"F32", {2, 2}, bytes_of(f32)}},
                                            {"b.bf16", {"BF16", {4}, bytes_of(bf16)}},
                                            {"c.f16", {"F16", {1, 4}, bytes_of(f16)}},
                                            {"d.i32", {"I32", {2}, bytes_of(i32)}},
                                            {"e.i64", {"I64", {2}, bytes_of(i64)}},
                                            {"f.scalar", {"F32", {}, bytes_of(std::vector<float>{3.0f})}},
                                            {"g.empty", {"F32", {0, 5}, ""}}},
                                           "\"__metadata__\":{\"format\":\"pt\"}"));
  const io::SafetensorsFile file(path);
  ASSERT_EQ(file.entries().size(), 7u);
  EXPECT_TRUE(file.metadata().is_object());
  const std::vector<float> a = file.read_float32("a.f32");
  ASSERT_EQ(a.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(fp::bits(a[i]), fp::bits(f32[i]));
  const std::vector<float> b = file.read_float32("b.bf16");
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(fp::bits(b[i]), std::uint32_t{bf16[i]} << 16);  // unflushed
  EXPECT_EQ(file.read_bf16_bits("b.bf16"), bf16);
  const std::vector<float> c = file.read_float32("c.f16");
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(fp::bits(c[i]), fp::bits(lowbit::f32_from_f16(f16[i])));
  EXPECT_EQ(fp::bits(c[1]), 0x33800000u);  // the smallest f16 subnormal, exactly 2^-24
  EXPECT_EQ(file.read_integers("d.i32"), (std::vector<std::int64_t>{-7, 2147483647}));
  EXPECT_EQ(file.read_integers("e.i64"), i64);
  EXPECT_EQ(file.read_float32("f.scalar"), std::vector<float>{3.0f});
  EXPECT_TRUE(file.read_float32("g.empty").empty());

  EXPECT_EQ(message_of([&] { file.read_float32("d.i32"); }, ErrorKind::Type),
            "samebits.models.safetensors: tensor 'd.i32' in " + path +
                " is I32; a weight must be F32, F16 or BF16");
  EXPECT_EQ(message_of([&] { file.read_float32("nope"); }, ErrorKind::Key),
            "samebits.models.safetensors: " + path + " holds no tensor 'nope'");
  EXPECT_EQ(message_of([&] { file.read_bf16_bits("a.f32"); }, ErrorKind::Type),
            "samebits.models.safetensors: tensor 'a.f32' in " + path +
                " is F32; its bf16 bits exist only for a BF16 tensor");
}

TEST(Safetensors, UnknownDtypesOpenButAreRefusedByNameWhenRead) {
  Scratch scratch;
  const std::string path =
      scratch.write("f64.safetensors", safetensors_bytes({{"z.f64", {"F64", {1}, std::string(8, '\0')}}}));
  const io::SafetensorsFile file(path);
  EXPECT_EQ(message_of([&] { file.read_float32("z.f64"); }, ErrorKind::Type),
            "samebits.models.safetensors: tensor 'z.f64' in " + path +
                " has dtype F64, which this reader refuses by name; it reads ['BF16', 'F16', 'F32', 'I32', "
                "'I64'] and downcasts nothing");
}

TEST(Safetensors, PythonJsonRulesInTheHeader) {
  // A repeated key keeps the last value (Python's json.loads); metadata may hold NaN.
  const std::string one = bytes_of(std::vector<float>{1.0f});
  std::string header =
      "{\"__metadata__\":{\"x\":NaN},\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::string bytes(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  const io::SafetensorsFile file("mem", bytes + header + one);
  ASSERT_EQ(file.entries().size(), 1u);
  EXPECT_EQ(file.read_float32("t"), std::vector<float>{1.0f});
}

TEST(Safetensors, HeaderRefusalsNameTheFileAndTheProblem) {
  const std::string prefix = "samebits.models.safetensors: mem";
  auto refusal = [&](const std::string& bytes) {
    return message_of([&] { io::SafetensorsFile("mem", bytes); }, ErrorKind::Value);
  };
  auto with_header = [](const std::string& header, const std::string& data = "") {
    std::string out(8, '\0');
    const std::uint64_t n = header.size();
    std::memcpy(out.data(), &n, 8);
    return out + header + data;
  };
  EXPECT_EQ(refusal("1234567"), prefix + " is shorter than its 8-byte header length");
  std::string huge(8, '\0');
  const std::uint64_t too_long = 104857601;
  std::memcpy(huge.data(), &too_long, 8);
  EXPECT_EQ(refusal(huge), prefix + ": header length 104857601 exceeds 104857600");
  const std::uint64_t absurd = ~std::uint64_t{0};
  std::memcpy(huge.data(), &absurd, 8);
  EXPECT_EQ(refusal(huge), prefix + ": header length 18446744073709551615 exceeds 104857600");
  std::string truncated(8, '\0');
  const std::uint64_t ten = 10;
  std::memcpy(truncated.data(), &ten, 8);
  EXPECT_EQ(refusal(truncated + "{}"), prefix + ": header is truncated (2 of 10 bytes)");
  EXPECT_EQ(refusal(with_header("{\"a\":")).rfind(prefix + ": the header is not JSON: ", 0), 0u);
  EXPECT_EQ(refusal(with_header("[1]")), prefix + ": the header is not a JSON object");
  EXPECT_EQ(refusal(with_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}")),
            prefix + ": tensor 't' lacks dtype/shape/data_offsets");
  EXPECT_EQ(refusal(with_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", "abcd")),
            prefix + ": tensor 't' offsets [0, 8) fall outside the 4-byte data section");
  EXPECT_EQ(refusal(with_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[3,2]}}", "abcd")),
            prefix + ": tensor 't' offsets [3, 2) fall outside the 4-byte data section");
  EXPECT_EQ(
      refusal(with_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,4]}}", "abcd")),
      prefix + ": tensor 't' of F32 shape (2, 3) needs 24 bytes, the offsets give 4");
  EXPECT_EQ(refusal(with_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "abcd")),
            prefix + ": tensor 't': shape must be a list of non-negative integers");
  // Extents whose product passes 2^64 are refused before anything is allocated from them.
  EXPECT_EQ(refusal(with_header("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                                "\"data_offsets\":[0,4]}}",
                                "abcd")),
            prefix +
                ": tensor 't' of F32 shape (4294967296, 4294967296) needs more than 2^64 bytes, the offsets "
                "give 4");
}

TEST(SafetensorsCheckpoint, ShardedIndexSingleFileAndLoneShard) {
  const std::string one = bytes_of(std::vector<float>{1.0f}), two = bytes_of(std::vector<float>{2.0f});
  {
    Scratch scratch;
    scratch.write("a.safetensors",
                  safetensors_bytes({{"x", {"F32", {1}, one}}, {"extra", {"F32", {1}, one}}}));
    scratch.write("b.safetensors", safetensors_bytes({{"y", {"F32", {1}, two}}}));
    scratch.write("model.safetensors.index.json",
                  "{\"metadata\":{},\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"b.safetensors\"}}");
    const io::SafetensorsCheckpoint checkpoint(scratch.path());
    EXPECT_EQ(checkpoint.names(), (std::vector<std::string>{"extra", "x", "y"}));  // the headers' union
    EXPECT_EQ(checkpoint.read_float32("y"), std::vector<float>{2.0f});
    EXPECT_EQ(checkpoint.files().size(), 2u);
  }
  {
    Scratch scratch;
    scratch.write("model.safetensors", safetensors_bytes({{"x", {"F32", {1}, one}}}));
    scratch.write("stray.safetensors", safetensors_bytes({{"z", {"F32", {1}, one}}}));
    EXPECT_EQ(io::SafetensorsCheckpoint(scratch.path()).names(), std::vector<std::string>{"x"});
  }
  {
    Scratch scratch;
    const std::string lone =
        scratch.write("weights.safetensors", safetensors_bytes({{"x", {"F32", {1}, one}}}));
    EXPECT_EQ(io::SafetensorsCheckpoint(scratch.path()).names(), std::vector<std::string>{"x"});
    EXPECT_EQ(io::SafetensorsCheckpoint(lone).names(), std::vector<std::string>{"x"});
  }
}

TEST(SafetensorsCheckpoint, RefusalsNameTheDirectoryAndTheProblem) {
  const std::string one = bytes_of(std::vector<float>{1.0f});
  {
    Scratch scratch;
    const std::string where = "samebits.models.safetensors: " + scratch.path();
    EXPECT_EQ(
        message_of([&] { io::SafetensorsCheckpoint(scratch.path() + "/nothing"); }, ErrorKind::NotFound),
        where + "/nothing does not exist");
    EXPECT_EQ(message_of([&] { io::SafetensorsCheckpoint c(scratch.path()); }, ErrorKind::NotFound),
              where +
                  " holds neither model.safetensors nor model.safetensors.index.json (found []; one unnamed "
                  "shard set is not an index)");
    scratch.write("a.safetensors", safetensors_bytes({{"x", {"F32", {1}, one}}}));
    scratch.write("b.safetensors", safetensors_bytes({{"x", {"F32", {1}, one}}}));
    EXPECT_EQ(
        message_of([&] { io::SafetensorsCheckpoint c(scratch.path()); }, ErrorKind::NotFound),
        where +
            " holds neither model.safetensors nor model.safetensors.index.json (found ['a.safetensors', "
            "'b.safetensors']; one unnamed shard set is not an index)");
    scratch.write("model.safetensors.index.json",
                  "{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"b.safetensors\"}}");
    EXPECT_EQ(message_of([&] { io::SafetensorsCheckpoint c(scratch.path()); }, ErrorKind::Value),
              where + ": tensor 'x' appears in both " + scratch.path() + "/a.safetensors and " +
                  scratch.path() + "/b.safetensors");
    scratch.write("b.safetensors", safetensors_bytes({{"z", {"F32", {1}, one}}}));
    EXPECT_EQ(message_of([&] { io::SafetensorsCheckpoint c(scratch.path()); }, ErrorKind::Value),
              where + ": the index maps 'y' to " + scratch.path() +
                  "/b.safetensors but that shard does not hold it");
    scratch.write("model.safetensors.index.json",
                  "{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"c.safetensors\"}}");
    EXPECT_EQ(message_of([&] { io::SafetensorsCheckpoint c(scratch.path()); }, ErrorKind::NotFound),
              where + " names shards that do not exist: ['c.safetensors']");
    scratch.write("model.safetensors.index.json", "{\"weight_map\":{}}");
    EXPECT_EQ(
        message_of([&] { io::SafetensorsCheckpoint c(scratch.path()); }, ErrorKind::Value),
        "samebits.models.safetensors: " + scratch.path() + "/model.safetensors.index.json has no weight_map");
    scratch.write("model.safetensors.index.json", "{\"weight_map\":{\"x\":\"../a.safetensors\"}}");
    EXPECT_EQ(message_of([&] { io::SafetensorsCheckpoint c(scratch.path()); }, ErrorKind::Value),
              "samebits.models.safetensors: " + scratch.path() +
                  "/model.safetensors.index.json: weight_map names the shard '../a.safetensors', not a file "
                  "name in "
                  "this directory");
  }
}

}  // namespace
}  // namespace samebits
