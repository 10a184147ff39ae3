// The whole-buffer non-finite scan every block runs per call: each SIMD target agrees with the literal
// loop at every position and bit pattern, and the block refusal names the first offender at any size and
// thread count.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "blocks/block_support.hpp"
#include "core/errors.hpp"
#include "core/thread_pool.hpp"
#include "numerics/finite_scan.hpp"
#include "numerics/fp.hpp"
#include "numerics/simd_target.hpp"

namespace samebits {
namespace {

// Every non-finite class (both infinities, quiet and signalling NaNs of both signs) and the finite
// extremes that share the most exponent bits with them.
const std::uint32_t kNonFinite[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                    0xFFFFFFFFu, 0x7F800001u, 0xFFC00001u};
const std::uint32_t kFinite[] = {0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000001u, 0x80000000u, 0x007FFFFFu};

TEST(FiniteScan, EveryTargetFindsEveryNonFiniteAtEveryPosition) {
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    const std::string where = simd::target_name(target);
    for (std::int64_t count : {0, 1, 7, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200}) {
      std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
      ASSERT_TRUE(finite::all_finite(data.data(), count)) << where;
      for (std::int64_t i = 0; i < count; ++i) {
        float& cell = data[static_cast<std::size_t>(i)];
        for (std::uint32_t bad : kNonFinite) {
          cell = fp::from_bits(bad);
          ASSERT_FALSE(finite::all_finite(data.data(), count)) << where << " n=" << count << " at " << i;
          ASSERT_FALSE(finite::all_finite_reference(data.data(), count));
        }
        for (std::uint32_t good : kFinite) {
          cell = fp::from_bits(good);
          ASSERT_TRUE(finite::all_finite(data.data(), count)) << where << " n=" << count << " at " << i;
        }
        cell = 1.0f;
      }
    }
  }
  simd::reset_target();
}

TEST(FiniteScan, AnUnalignedStartIsScannedExactly) {
  std::vector<float> data(300, 2.0f);
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    for (std::int64_t offset = 0; offset < 17; ++offset) {
      data[static_cast<std::size_t>(offset + 100)] = fp::from_bits(0x7FC00000u);
      EXPECT_FALSE(finite::all_finite(data.data() + offset, 200));
      EXPECT_TRUE(finite::all_finite(data.data() + offset, 100));  // stops just before it
      data[static_cast<std::size_t>(offset + 100)] = 2.0f;
    }
  }
  simd::reset_target();
}

// The block refusal splits a large buffer over the pool; the message must still name the FIRST offender.
TEST(FiniteScan, BlockRefusalNamesTheFirstOffenderAtEveryThreadCount) {
  const std::int64_t count = (1 << 18) + 37;
  std::vector<float> data(static_cast<std::size_t>(count), 0.5f);
  const int saved = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    EXPECT_NO_THROW(blocks::refuse_if_non_finite(data.data(), count, "m.forward", "h"));
    data[200000] = fp::from_bits(0xFF800000u);
    data[count - 1] = fp::from_bits(0x7FC00000u);
    try {
      blocks::refuse_if_non_finite(data.data(), count, "m.forward", "h");
      FAIL() << "accepted a non-finite buffer";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "m.forward: infinity in h at flat index 200000 REFUSED");
    }
    data[200000] = 0.5f;
    try {
      blocks::refuse_if_non_finite(data.data(), count, "m.forward", "h");
      FAIL() << "accepted a NaN in the last cell";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "m.forward: NaN in h at flat index " + std::to_string(count - 1) + " REFUSED");
    }
    data[count - 1] = 0.5f;
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace samebits
