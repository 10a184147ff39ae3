// The whole-buffer non-finite scan every block runs per call: each SIMD target agrees with the literal
// loop at every position and bit pattern, and the block refusal names the first offender at any size and
// thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "blocks/common/block_support.hpp"
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
      ASSERT_TRUE(finite_scan::all_finite(data.data(), count)) << where;
      for (std::int64_t i = 0; i < count; ++i) {
        float& cell = data[static_cast<std::size_t>(i)];
        for (std::uint32_t bad : kNonFinite) {
          cell = fp::from_bits(bad);
          ASSERT_FALSE(finite_scan::all_finite(data.data(), count)) << where << " n=" << count << " at " << i;
          ASSERT_FALSE(finite_scan::all_finite_reference(data.data(), count));
        }
        for (std::uint32_t good : kFinite) {
          cell = fp::from_bits(good);
          ASSERT_TRUE(finite_scan::all_finite(data.data(), count)) << where << " n=" << count << " at " << i;
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
      EXPECT_FALSE(finite_scan::all_finite(data.data() + offset, 200));
      EXPECT_TRUE(finite_scan::all_finite(data.data() + offset, 100));  // stops just before it
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

// A state's arrays are scanned as one pool-split job; the refusal must name the first offending ARRAY in
// list order (then its first offender), whichever thread found what, exactly as one scan per array would.
TEST(FiniteScan, CombinedScanNamesTheFirstOffendingArrayInListOrder) {
  const std::int64_t sizes[] = {70000, 5, 200001, 1, 40000};
  const char* names[] = {"theta", "h", "buffer_qrot", "pending_k", "pending_v"};
  std::vector<std::vector<float>> arrays;
  for (std::int64_t n : sizes) arrays.emplace_back(static_cast<std::size_t>(n), -0.25f);
  auto scan = [&] {
    blocks::ScannedArray list[5];
    for (int a = 0; a < 5; ++a) list[a] = {arrays[a].data(), sizes[a], names[a]};
    blocks::refuse_if_any_non_finite(list, 5, "Mamba3Block.step", "state.");
  };
  auto message = [&]() -> std::string {
    try {
      scan();
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  const int saved = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    EXPECT_EQ(message(), "accepted");
    // A lone offender anywhere (every 997th cell of every array, and each array's last) is found and named.
    for (int a = 0; a < 5; ++a) {
      std::vector<std::int64_t> cells;
      for (std::int64_t i = 0; i < sizes[a]; i += 997) cells.push_back(i);
      cells.push_back(sizes[a] - 1);
      for (std::int64_t i : cells) {
        float& cell = arrays[static_cast<std::size_t>(a)][static_cast<std::size_t>(i)];
        cell = fp::from_bits(0xFFC00001u);
        ASSERT_EQ(message(), std::string("Mamba3Block.step: NaN in state.") + names[a] + " at flat index " +
                                 std::to_string(i) + " REFUSED")
            << threads << " threads";
        cell = -0.25f;
      }
    }
    // Several offenders: the earliest array in the list wins, then its earliest cell.
    arrays[4][39999] = fp::from_bits(0x7F800000u);
    EXPECT_EQ(message(), "Mamba3Block.step: infinity in state.pending_v at flat index 39999 REFUSED");
    arrays[2][60000] = fp::from_bits(0xFFC00001u);
    arrays[2][200000] = fp::from_bits(0x7F800000u);
    EXPECT_EQ(message(), "Mamba3Block.step: NaN in state.buffer_qrot at flat index 60000 REFUSED");
    arrays[1][4] = fp::from_bits(0xFF800000u);
    EXPECT_EQ(message(), "Mamba3Block.step: infinity in state.h at flat index 4 REFUSED");
    arrays[0][20000] = fp::from_bits(0x7FC00000u);
    EXPECT_EQ(message(), "Mamba3Block.step: NaN in state.theta at flat index 20000 REFUSED");
    for (auto& array : arrays) std::fill(array.begin(), array.end(), -0.25f);
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace samebits
