// Regressions of bugs the libFuzzer harnesses found (fuzz/): each input is the fuzzer's, reduced to its
// point.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <samebits/errors.hpp>
#include <samebits/lowbit.hpp>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "test_samba_support.hpp"
#include "test_transformer_support.hpp"

namespace samebits {
namespace {

namespace lb = lowbit;

// fuzz_lowbit: materialize allocated rows * cols floats before comparing the vectors with the shape, so
// a hand-assembled matrix claiming 2^40 rows threw std::bad_alloc (or ran out of memory) instead of the
// value error; and rows * cols wrapped in size_t, so a 2^62 x 4 matrix with no values was accepted as
// an empty one. (fuzz/corpus/lowbit/regression_materialize_allocated_before_checking)
TEST(FuzzRegression, MaterializeChecksSizesBeforeAllocating) {
  lb::PackedMatrix huge;
  huge.format = lb::WeightFormat::BFloat16;
  huge.rows = std::size_t{1} << 40;
  huge.cols = 1;
  EXPECT_THROW(lb::materialize(huge), Error);
  huge.format = lb::WeightFormat::Int8;
  EXPECT_THROW(lb::materialize(huge), Error);
}

TEST(FuzzRegression, MaterializeRefusesAShapeWhoseProductWraps) {
  lb::PackedMatrix wrapping;
  wrapping.format = lb::WeightFormat::Float32;
  wrapping.rows = std::size_t{1} << 62;
  wrapping.cols = 4;  // rows * cols == 2^64 == 0 in size_t
  EXPECT_THROW(lb::materialize(wrapping), Error);
  wrapping.format = lb::WeightFormat::BFloat16;
  EXPECT_THROW(lb::materialize(wrapping), Error);
}

TEST(FuzzRegression, MaterializeStillTakesConsistentMatrices) {
  const float w[6] = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -0.25f};
  for (lb::WeightFormat format :
       {lb::WeightFormat::Float32, lb::WeightFormat::BFloat16, lb::WeightFormat::Int8})
    EXPECT_EQ(lb::materialize(lb::pack_matrix(w, 2, 3, format)).size(), 6u);
  lb::PackedMatrix no_columns = lb::pack_matrix(nullptr, 5, 0, lb::WeightFormat::Int8);
  EXPECT_TRUE(lb::materialize(no_columns).empty());
}

// fuzz_state: allocate_state(batch) multiplied batch by the per-row size in int64 (signed overflow, UB)
// and a wrapped product could allocate a state far smaller than its batch claims; a huge batch now is a
// value error before any allocation. (fuzz/corpus/state/regression_mamba2_state_size_overflow*,
// regression_mamba3_state_huge_batch)
TEST(FuzzRegression, StatesRefuseSizesPastTheAddressableBound) {
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 2;
  EXPECT_THROW(blocks::Mamba1State(huge, 8), Error);
  EXPECT_THROW(blocks::Mamba2State(1598673414111897088, blocks::Mamba2Dims::for_d_model(32)), Error);
  EXPECT_THROW(blocks::Mamba3State(std::int64_t{1} << 50, 1), Error);
  EXPECT_THROW(TransformerState(std::int64_t{1} << 40, 1, 2, std::int64_t{1} << 30, 0), Error);
}

TEST(FuzzRegression, AllocateStateRefusesAHugeBatch) {
  const TransformerBlockInference block = testing::make_block({4, 2, 1, 4, 0}, 7);
  EXPECT_THROW(block.allocate_state(std::int64_t{1} << 40, std::int64_t{1} << 30), Error);
  EXPECT_EQ(block.allocate_state(2, 3).cache_floats(), 2 * 1 * 3 * 2);
}

// fuzz_weights: the config does not range-check intermediate, so intermediate = -2 gives registry entries
// of shape (-2, d_model). A weight dict (or a flat vector) whose shapes echoed the registry was accepted,
// and copying a tensor of -2 * d_model floats read before its buffer. Such an entry is now refused by
// name on every construction path. (fuzz/corpus/weights/regression_negative_intermediate)
TEST(FuzzRegression, SambaRefusesARegistryThatWantsANegativeDimension) {
  const models::SambaConfig config(testing::samba_args(4, 4, {"attention"}, 2, -2));
  const models::SambaRegistry registry = config.registry();
  std::vector<std::vector<float>> buffers;
  SambaInference::NamedWeights weights;
  std::string unfillable;
  for (const auto& entry : registry.entries) {
    buffers.emplace_back(static_cast<std::size_t>(entry.size > 0 ? entry.size : 0), 0.5f);
    weights.push_back(
        {entry.name, TensorView{entry.size > 0 ? buffers.back().data() : nullptr, entry.shape}});
    if (entry.size < 0 && unfillable.empty()) unfillable = entry.name;
  }
  ASSERT_FALSE(unfillable.empty());
  try {
    SambaInference model(config, weights);
    FAIL() << "accepted a tensor with a negative dimension";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_NE(std::string(e.what()).find(unfillable), std::string::npos) << e.what();
  }
  // The flat vector path: a vector as long as the (negative-including) total must not be cut up.
  if (registry.total >= 0) {
    EXPECT_THROW(SambaInference(config, std::vector<float>(static_cast<std::size_t>(registry.total), 0.5f)),
                 Error);
  }
  EXPECT_THROW(SambaInference(config, std::move(buffers)), Error);
}

// fuzz_state: a SambaState whose attention layer claims cached_tokens = INT64_MAX made the stack's KV
// pre-check add the call's length to it (signed overflow, UB). The sum is now checked for overflow; the
// messages are unchanged. (fuzz/corpus/state/regression_samba_cached_tokens_overflow)
TEST(FuzzRegression, SambaKvCheckDoesNotOverflowOnAHugeCachedTokens) {
  const models::SambaConfig config(testing::samba_args(8, 32, {"mamba3", "attention"}, 2, 8));
  std::vector<float> flat(static_cast<std::size_t>(config.registry().total), 0.01f);
  const SambaInference model(config, std::move(flat));
  const std::int32_t ids[2] = {1, 2};
  auto refusal = [&](std::int64_t cached) {
    SambaState state = model.allocate_state(1, 8);
    state.attention(1)->set_cached_tokens(cached);
    try {
      model.forward(IdsView{ids, 1, 2}, state);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(std::numeric_limits<std::int64_t>::max())
                .find("would use more than 9223372036854775807 KV slots and the cache holds 8"),
            std::string::npos);
  EXPECT_NE(refusal(7).find("this call would use 9 KV slots and the cache holds 8"), std::string::npos);
  EXPECT_NE(refusal(-1).find("cached_tokens must be in [0, 8]"), std::string::npos);
}

}  // namespace
}  // namespace samebits
