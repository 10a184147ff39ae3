// The transpose the decode paths keep their row-read copies with (each head's h^T): every SIMD target
// moves every bit pattern to the literal loop's place, over sizes with and without whole blocks.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/simd_target.hpp"
#include "numerics/transpose.hpp"

namespace samebits {
namespace {

TEST(Transpose, EveryTargetMovesEveryValueWhereTheLoopDoes) {
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    const std::string where = simd::target_name(target);
    for (std::int64_t rows : {1, 7, 8, 16, 17, 64, 70})
      for (std::int64_t cols : {1, 5, 8, 16, 33, 128}) {
        // Distinct patterns, NaN payloads, signed zeros and subnormals included: values are moved, never
        // computed.
        std::vector<float> in(static_cast<std::size_t>(rows * cols));
        for (std::size_t i = 0; i < in.size(); ++i)
          in[i] =
              fp::from_bits(static_cast<std::uint32_t>(i * 2654435761u) ^ (i % 3 == 0 ? 0x7FC00000u : 0u));
        std::vector<float> want(in.size(), 0.0f), got(in.size(), 0.0f);
        transpose::transpose_reference(in.data(), rows, cols, want.data());
        transpose::transpose(in.data(), rows, cols, got.data());
        for (std::size_t i = 0; i < in.size(); ++i)
          ASSERT_EQ(fp::bits(want[i]), fp::bits(got[i]))
              << where << " " << rows << "x" << cols << " at " << i;
        for (std::int64_t r = 0; r < rows; ++r)  // and the twin is the transpose
          for (std::int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(fp::bits(want[c * rows + r]), fp::bits(in[r * cols + c]));
      }
  }
  simd::reset_target();
}

}  // namespace
}  // namespace samebits
