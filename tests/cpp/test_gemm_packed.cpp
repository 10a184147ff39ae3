// Packed right operands (docs/numerics.md §3.6): the GEMM reading bfloat16, int8 and GGUF codes in their
// stored form equals the scalar twin on the materialized float32 values, bit for bit, on every target and
// thread count, for decode and prefill shapes with ragged panels and depths across leaf and block seams.
#include <gtest/gtest.h>

#include <samebits/lowbit.hpp>
#include <string>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/gguf_quants.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using gemm::Orientation;
using gemm::PackedRhs;
using gemm::PanelStorage;
using testing::for_each_target_and_threads;
using testing::Rng;

using gemm::storage_name;

// gemm_packed on `packed` equals gemm_reference on W ([n, k], the values it widens to) for every row count
// in `rows`, target and thread count; the operand also gives W back bit for bit.
void expect_packed_equals_twin(const PackedRhs& packed, const std::vector<float>& W, std::int64_t n,
                               std::int64_t k, Rng& rng, const std::string& label) {
  ASSERT_EQ(testing::first_difference(packed.unpack_transposed().data(), W.data(), n * k), -1) << label;
  for (std::int64_t m : {1, 2, 3, 5, 9}) {
    const auto a = rng.uniform_vector(static_cast<std::size_t>(m * k));
    std::vector<float> want(static_cast<std::size_t>(m * n));
    gemm::gemm_reference(Orientation::NT, a.data(), W.data(), want.data(), m, n, k);
    for_each_target_and_threads([&](const std::string& where) {
      std::vector<float> got(want.size(), -1.0f);
      gemm::gemm_packed({a.data(), k, 1}, m, packed, got.data());
      ASSERT_EQ(testing::first_difference(want.data(), got.data(), m * n), -1)
          << label << " " << storage_name(packed.storage()) << " m=" << m << " " << where;
    });
  }
}

const int kWidths[] = {1, 31, 33, 70, 129};
const int kDepths[] = {1, 2, 31, 128, 129, 300};

// samebits' lowbit weights, materialized: a model weight keeps them in their own width.
// `tiny` scales one row down: subnormal bfloat16 patterns, or an int8 row whose scale is near FLT_MIN.
void check_lowbit(lowbit::WeightFormat format, PanelStorage expected, float tiny, std::uint64_t seed) {
  Rng rng(seed);
  for (int k : kDepths) {
    for (int n : kWidths) {
      auto w = rng.uniform_vector(static_cast<std::size_t>(n) * k, 3.0f);
      if (n > 2)
        for (int p = 0; p < k; ++p) w[static_cast<std::size_t>(k + p)] *= tiny;
      const std::vector<float> W = lowbit::materialize(
          lowbit::pack_matrix(w.data(), static_cast<std::size_t>(n), static_cast<std::size_t>(k), format));
      const PackedRhs packed = PackedRhs::from_transposed(W.data(), n, k, Placement::kWeightPool);
      // A handful of bfloat16 values can happen to be int8 codes of one scale: the narrower storage wins.
      if (n * k >= 64 || packed.storage() != PanelStorage::Codes8) {
        ASSERT_EQ(packed.storage(), expected) << "n=" << n << " k=" << k;
      }
      expect_packed_equals_twin(packed, W, n, k, rng, "n=" + std::to_string(n) + " k=" + std::to_string(k));
    }
  }
}

TEST(GemmPacked, LowbitBfloat16EqualsTwin) {
  check_lowbit(lowbit::WeightFormat::BFloat16, PanelStorage::BF16, 1e-38f, 5);
}

TEST(GemmPacked, LowbitInt8EqualsTwin) {
  check_lowbit(lowbit::WeightFormat::Int8, PanelStorage::Codes8, 1e-35f, 6);
}

TEST(GemmPacked, Float32WeightsStayFloat32) {
  Rng rng(8);
  const int n = 40, k = 70;
  auto w = rng.uniform_vector(n * k);
  w[3] = fp::from_bits(0x00000123u);  // a subnormal comes back from the panels' remembered bits
  const PackedRhs packed = PackedRhs::from_transposed(w.data(), n, k, Placement::kWeightPool);
  EXPECT_EQ(packed.storage(), PanelStorage::F32);
  EXPECT_EQ(packed.bytes(), static_cast<std::size_t>(2 * 32 * k * 4 + 8));
  expect_packed_equals_twin(packed, w, n, k, rng, "float32");
  // Heap operands (packed for one call) are float32 even when narrower storage would do.
  const std::vector<float> halves(static_cast<std::size_t>(n * k), 0.5f);
  EXPECT_EQ(PackedRhs::from_transposed(halves.data(), n, k).storage(), PanelStorage::F32);
  EXPECT_FALSE(PackedRhs::from_transposed_as(w.data(), n, k, PanelStorage::BF16, Placement::kHeap));
  EXPECT_FALSE(PackedRhs::from_transposed_as(w.data(), n, k, PanelStorage::Codes8, Placement::kHeap));
}

TEST(GemmPacked, NarrowStorageHoldsFewerBytes) {
  Rng rng(9);
  const int n = 64, k = 256;
  auto w = rng.uniform_vector(n * k);
  const auto bf16 = lowbit::materialize(lowbit::pack_matrix(w.data(), n, k, lowbit::WeightFormat::BFloat16));
  const auto int8 = lowbit::materialize(lowbit::pack_matrix(w.data(), n, k, lowbit::WeightFormat::Int8));
  EXPECT_EQ(PackedRhs::from_transposed(bf16.data(), n, k, Placement::kWeightPool).bytes(),
            static_cast<std::size_t>(n * k * 2));
  EXPECT_EQ(PackedRhs::from_transposed(int8.data(), n, k, Placement::kWeightPool).bytes(),
            static_cast<std::size_t>(n * k + 2 * 32 * 4));
}

TEST(GemmPacked, GatherRowsWidensTheStoredValues) {
  Rng rng(10);
  const int n = 50, k = 33;
  auto w = rng.uniform_vector(n * k);
  const auto int8 = lowbit::materialize(lowbit::pack_matrix(w.data(), n, k, lowbit::WeightFormat::Int8));
  const PackedRhs packed = PackedRhs::from_transposed(int8.data(), n, k, Placement::kWeightPool);
  const std::int32_t ids[] = {0, 49, 17, 17, 32};
  std::vector<float> got(5 * k);
  packed.gather_rows_flushed(ids, 5, got.data());
  for (int t = 0; t < 5; ++t)
    for (int p = 0; p < k; ++p)
      ASSERT_EQ(fp::bits(got[t * k + p]), fp::bits(fp::F(int8[ids[t] * k + p]))) << t << " " << p;
}

// Random blocks of a GGUF type with finite scales (fp16 scales of every magnitude, subnormal ones included).
std::vector<unsigned char> random_blocks(std::uint32_t type, std::int64_t blocks, Rng& rng) {
  const numerics::GgmlTypeInfo info = numerics::ggml_type_info(type);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(blocks) * info.block_bytes);
  for (std::int64_t b = 0; b < blocks; ++b) {
    unsigned char* block = bytes.data() + b * info.block_bytes;
    do {
      for (std::uint32_t i = 0; i < info.block_bytes; ++i)
        block[i] = static_cast<unsigned char>(rng.next() >> 13);
    } while (numerics::ggml_block_nonfinite(type, block));
  }
  return bytes;
}

struct GgmlCase {
  std::uint32_t type;
  PanelStorage storage;
  bool half_headers;  // the type's scales and offsets are fp16 values: the panels keep them as fp16
};

TEST(GemmPacked, GgufTypesEqualTwin) {
  const GgmlCase cases[] = {
      {2, PanelStorage::Codes4, true},      {3, PanelStorage::Codes4Min, true},
      {6, PanelStorage::Codes8, true},      {7, PanelStorage::Codes8Min, true},
      {8, PanelStorage::Codes8, true},      {10, PanelStorage::Codes4Min, false},
      {11, PanelStorage::Codes4, false},    {12, PanelStorage::Codes4Min, false},
      {13, PanelStorage::Codes8Min, false}, {14, PanelStorage::Codes8, false},
      {0, PanelStorage::F32, false},        {1, PanelStorage::F32, false},
      {30, PanelStorage::BF16, false},
  };
  Rng rng(12);
  for (const GgmlCase& c : cases) {
    const numerics::GgmlTypeInfo info = numerics::ggml_type_info(c.type);
    const std::int64_t be = info.block_elements;
    const std::int64_t depths[] = {be == 1 ? 33 : be, be == 1 ? 130 : 2 * be, be == 1 ? 300 : 5 * be};
    for (std::int64_t k : depths) {
      for (std::int64_t n : {1, 33, 70}) {
        const std::int64_t blocks = n * k / be;
        const auto bytes = random_blocks(c.type, blocks, rng);
        std::vector<float> W(static_cast<std::size_t>(n * k));
        ASSERT_EQ(numerics::ggml_dequantize_twin(c.type, bytes.data(), static_cast<std::uint64_t>(blocks),
                                                 W.data()),
                  -1);
        const PackedRhs packed = PackedRhs::from_ggml("w", c.type, bytes.data(), n, k);
        ASSERT_EQ(packed.storage(), c.storage) << info.name;
        // The K-quants' sub-block scales (an fp16 times a 4- or 6-bit integer) are rarely fp16 values.
        if (c.half_headers || n * k >= 1024) {
          ASSERT_EQ(packed.half_headers(), c.half_headers) << info.name;
        }
        expect_packed_equals_twin(
            packed, W, n, k, rng,
            std::string(info.name) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
      }
    }
  }
}

// q, k and v (or gate and up) stacked as one operand, with a row order: one layout keeps its storage,
// mixed types share int8 codes with offsets.
TEST(GemmPacked, GgufPartsStackInOrder) {
  struct Stack {
    std::uint32_t types[3];
    PanelStorage storage;
  };
  const Stack stacks[] = {{{3, 3, 3}, PanelStorage::Codes4Min},  {{3, 14, 8}, PanelStorage::Codes8Min},
                          {{2, 11, 2}, PanelStorage::Codes8Min}, {{12, 12, 12}, PanelStorage::Codes4Min},
                          {{30, 30, 30}, PanelStorage::BF16},    {{0, 1, 30}, PanelStorage::F32}};
  Rng rng(15);
  const std::int64_t k = 512;
  const std::int64_t rows[3] = {40, 8, 23};
  for (const Stack& stack : stacks) {
    std::vector<std::vector<unsigned char>> bytes;
    std::vector<gemm::GgmlPart> parts;
    std::vector<float> W;
    for (int i = 0; i < 3; ++i) {
      const numerics::GgmlTypeInfo info = numerics::ggml_type_info(stack.types[i]);
      const std::int64_t blocks = rows[i] * k / info.block_elements;
      bytes.push_back(random_blocks(stack.types[i], blocks, rng));
      std::vector<float> values(static_cast<std::size_t>(rows[i] * k));
      ASSERT_EQ(numerics::ggml_dequantize_twin(stack.types[i], bytes.back().data(),
                                               static_cast<std::uint64_t>(blocks), values.data()),
                -1);
      std::vector<std::int64_t> order;
      if (i < 2)  // the first two parts reversed, as a Q/K permutation would be undone
        for (std::int64_t r = 0; r < rows[i]; ++r) order.push_back(rows[i] - 1 - r);
      for (std::int64_t r = 0; r < rows[i]; ++r) {
        const std::int64_t stored = order.empty() ? r : order[static_cast<std::size_t>(r)];
        W.insert(W.end(), values.begin() + stored * k, values.begin() + (stored + 1) * k);
      }
      parts.push_back({"part" + std::to_string(i), stack.types[i], bytes.back().data(), rows[i], order});
    }
    const PackedRhs packed = PackedRhs::from_ggml(parts, k);
    ASSERT_EQ(packed.storage(), stack.storage) << stack.types[1];
    expect_packed_equals_twin(packed, W, 71, k, rng, "stack of type " + std::to_string(stack.types[1]));
  }
}

TEST(GemmPacked, GgufQ4_1KeepsItsBytes) {
  Rng rng(13);
  const std::int64_t n = 64, k = 576;
  const auto bytes = random_blocks(3, n * k / 32, rng);
  const PackedRhs packed = PackedRhs::from_ggml("w", 3, bytes.data(), n, k);
  // 4-bit codes plus an fp16 scale and offset per 32 values: the file's own 5 bits a weight.
  EXPECT_TRUE(packed.half_headers());
  EXPECT_EQ(packed.bytes(), bytes.size());
  EXPECT_EQ(packed.bytes(), static_cast<std::size_t>(n * k * 5 / 8));
}

TEST(GemmPacked, ExactHalfKeepsOnlyFp16Values) {
  EXPECT_EQ(gemm::exact_half(1.0f), std::uint16_t{0x3C00});
  EXPECT_EQ(gemm::exact_half(-2.5f), std::uint16_t{0xC100});
  EXPECT_EQ(gemm::exact_half(65504.0f), std::uint16_t{0x7BFF});
  EXPECT_EQ(gemm::exact_half(0x1p-14f), std::uint16_t{0x0400});
  EXPECT_EQ(gemm::exact_half(0x1p-24f), std::uint16_t{0x0001});
  EXPECT_EQ(gemm::exact_half(-1023 * 0x1p-24f), std::uint16_t{0x83FF});
  EXPECT_EQ(gemm::exact_half(0.0f), std::uint16_t{0x0000});
  EXPECT_EQ(gemm::exact_half(-0.0f), std::uint16_t{0x8000});
  for (float no : {65520.0f, 1.0f + 0x1p-11f, 0x1p-25f, 3 * 0x1p-25f, 0.1f, 1e-30f, 1e30f,
                   fp::from_bits(0x7F800000u), fp::from_bits(0x7FC00000u)})
    EXPECT_FALSE(gemm::exact_half(no)) << no;
}

TEST(GemmPacked, GgufRefusalsNameTheTensor) {
  Rng rng(14);
  auto bytes = random_blocks(3, 4, rng);
  EXPECT_EQ(
      testing::error_of([&] { PackedRhs::from_ggml("blk.0.ffn_up.weight", 3, bytes.data(), 2, 48); },
                        ErrorKind::Value),
      "samebits: GGUF tensor 'blk.0.ffn_up.weight' (Q4_1): a row of 48 elements is not a whole number of "
      "32-element blocks");
  bytes[20 + 2] = 0x00;
  bytes[20 + 3] = 0x7C;  // block 1's minimum: +inf in fp16
  EXPECT_EQ(testing::error_of([&] { PackedRhs::from_ggml("t", 3, bytes.data(), 2, 64); }, ErrorKind::Value),
            "samebits: GGUF tensor 't' (Q4_1): block 1 has a non-finite scale");
  EXPECT_EQ(testing::error_of([&] { PackedRhs::from_ggml("t", 15, bytes.data(), 1, 256); }, ErrorKind::Value),
            "samebits: GGUF tensor 't' (Q8_K): this type cannot be read");
  const auto finite = random_blocks(3, 2, rng);
  const std::vector<gemm::GgmlPart> misordered{{"q", 3, finite.data(), 2, {1, 2}}};
  EXPECT_EQ(testing::error_of([&] { PackedRhs::from_ggml(misordered, 32); }, ErrorKind::Value),
            "samebits: GGUF tensor 'q' (Q4_1): the row order names row 2");
  const std::vector<gemm::GgmlPart> short_order{{"q", 3, finite.data(), 2, {0}}};
  EXPECT_EQ(testing::error_of([&] { PackedRhs::from_ggml(short_order, 32); }, ErrorKind::Value),
            "samebits: GGUF tensor 'q' (Q4_1): the row order names 1 rows, the part has 2");
}

}  // namespace
}  // namespace samebits
