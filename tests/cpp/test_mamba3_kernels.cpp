// The Mamba-3 array kernels equal their scalar twins bit for bit on every SIMD target, over size sweeps
// (odd row counts, lengths that are not a multiple of the lanes, shared and per-row left operands) and
// special values (signed zeros, subnormals, values near FLT_MIN, large magnitudes).
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/mamba3_kernels.hpp"
#include "numerics/simd_target.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

namespace k = mamba3_kernels;
using testing::Rng;
using testing::same_bits;

// Uniform values with every 5th one replaced by a special value; spice = false leaves them plain (the
// kernels' unflushed fast pass then stands, while spiced inputs make it fall back to the flushing pass).
std::vector<float> spiced(std::size_t count, std::uint64_t seed, float scale, bool spice = true) {
  std::vector<float> v = Rng(seed).uniform_vector(count, scale);
  if (!spice) return v;
  const float specials[] = {0.0f,
                            -0.0f,
                            fp::from_bits(0x00000001u),
                            fp::from_bits(0x807FFFFFu),
                            fp::from_bits(0x00800000u),
                            fp::from_bits(0x80800001u),
                            1e30f,
                            -3e-20f};
  for (std::size_t i = 0; i < count; i += 5) v[i] = specials[(i / 5) % 8];
  return v;
}

template <typename Fn>
void for_each_target(Fn&& body) {
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    body(std::string(simd::target_name(target)));
  }
  simd::reset_target();
}

TEST(Mamba3Kernels, DotChainsEqualTwinAndTheGemmCell) {
  for (bool spice : {false, true})
    for (std::int64_t len : {1, 7, 16, 17, 64, 100, 128})
      for (std::int64_t rows : {1, 5, 8, 15, 16, 17, 31, 33, 63, 64, 65})
        for (bool shared : {false, true}) {
          const std::int64_t a_stride = shared ? 0 : len + 3, b_stride = len + 5;
          const auto a =
              spiced(static_cast<std::size_t>(shared ? len : rows * a_stride), 1 + len, 1.0f, spice);
          const auto b = spiced(static_cast<std::size_t>(rows * b_stride), 2 + rows, 1.0f, spice);
          std::vector<float> want(rows);
          k::dot_chains_reference(a.data(), a_stride, b.data(), b_stride, rows, len, want.data());
          // The twin is the GEMM profile's cell: compare with gemm_reference on dense copies.
          std::vector<float> dense_a(rows * len), dense_b(rows * len), cells(rows * rows);
          for (std::int64_t r = 0; r < rows; ++r) {
            std::memcpy(dense_a.data() + r * len, a.data() + r * a_stride, len * sizeof(float));
            std::memcpy(dense_b.data() + r * len, b.data() + r * b_stride, len * sizeof(float));
          }
          gemm::gemm_reference(gemm::Orientation::NT, dense_a.data(), dense_b.data(), cells.data(), rows,
                               rows, len);
          for (std::int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(fp::bits(want[r]), fp::bits(cells[r * rows + r])) << r;
          for_each_target([&](const std::string& where) {
            std::vector<float> got(rows, 7.0f);
            k::dot_chains(a.data(), a_stride, b.data(), b_stride, rows, len, got.data());
            ASSERT_TRUE(same_bits(want, got))
                << where << " rows=" << rows << " len=" << len << " shared=" << shared;
          });
        }
}

TEST(Mamba3Kernels, ScaledDotChainsEqualTwinAndTheScaledGemmCell) {
  for (bool spice : {false, true})
    for (std::int64_t len : {5, 16, 128})
      for (std::int64_t rows : {1, 7, 16, 40, 48, 63, 64, 100}) {  // 1 to 4 groups and a tail
        const std::int64_t b_stride = 3 * len;
        const auto a = spiced(static_cast<std::size_t>(len), 9 + len, 1.0f, spice);
        const auto b = spiced(static_cast<std::size_t>(rows * b_stride), 10 + rows, 1.0f, spice);
        auto scale = spiced(static_cast<std::size_t>(rows), 11, 2.0f, spice);
        if (spice) scale[0] = fp::from_bits(0x00400000u);  // a subnormal product feeds the chain
        std::vector<float> want(rows), scaled(rows * len), cells(rows);
        k::scaled_dot_chains_reference(a.data(), b.data(), b_stride, scale.data(), rows, len, want.data());
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t p = 0; p < len; ++p)
            scaled[r * len + p] = fp::F(fp::MUL(fp::F(b[r * b_stride + p]), scale[r]));
        gemm::gemm_reference(gemm::Orientation::NT, a.data(), scaled.data(), cells.data(), 1, rows, len);
        ASSERT_TRUE(same_bits(want, cells)) << "rows=" << rows << " len=" << len;
        // The same rows stored transposed (a column per row, a padded stride): the same cells.
        const std::int64_t t_stride = rows + 5;
        std::vector<float> b_t(static_cast<std::size_t>(len * t_stride), 9.0f);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t p = 0; p < len; ++p) b_t[p * t_stride + r] = b[r * b_stride + p];
        std::vector<float> by_columns(rows, 7.0f);
        k::scaled_dot_chains_transposed_reference(a.data(), b_t.data(), t_stride, scale.data(), rows, len,
                                                  by_columns.data());
        ASSERT_TRUE(same_bits(want, by_columns)) << "rows=" << rows << " len=" << len;
        for_each_target([&](const std::string& where) {
          std::vector<float> got(rows, 7.0f);
          k::scaled_dot_chains(a.data(), b.data(), b_stride, scale.data(), rows, len, got.data());
          ASSERT_TRUE(same_bits(want, got))
              << where << " rows=" << rows << " len=" << len << " spice=" << spice;
          std::vector<float> got_t(rows, 7.0f);
          k::scaled_dot_chains_transposed(a.data(), b_t.data(), t_stride, scale.data(), rows, len,
                                          got_t.data());
          ASSERT_TRUE(same_bits(want, got_t))
              << where << " transposed rows=" << rows << " len=" << len << " spice=" << spice;
        });
      }
}

// The kernels' fast passes read and clear the MXCSR flags; the caller's modes and the flags it had raised
// must survive (arithmetic may raise more flags, as any computation does, but never clear one).
TEST(Mamba3Kernels, CallerFloatingPointFlagsAreRestored) {
  const auto a = spiced(128, 1, 1.0f), b = spiced(64 * 128, 2, 1.0f);
  std::vector<float> out(64);
  for_each_target([&](const std::string& where) {
    const unsigned before = _mm_getcsr() | 0x20u;  // a sticky precision flag the caller had set
    _mm_setcsr(before);
    k::dot_chains(a.data(), 0, b.data(), 128, 64, 128, out.data());
    const unsigned after = _mm_getcsr();
    EXPECT_EQ(after & ~0x3Fu, before & ~0x3Fu) << where;  // rounding, FTZ/DAZ and masks unchanged
    EXPECT_EQ(after & before & 0x3Fu, before & 0x3Fu) << where;
    _mm_setcsr(before & ~0x3Fu);
  });
}

TEST(Mamba3Kernels, AxpyChainsEqualTwinAndTheGemmRow) {
  for (bool spice : {false, true})
    for (std::int64_t kk : {1, 9, 64, 128})
      for (std::int64_t n : {1, 7, 16, 40, 56, 64, 90, 100, 120, 128, 200}) {  // 1 to 8 vector blocks
        const auto x = spiced(static_cast<std::size_t>(kk), 3 + kk, 1.0f, spice);
        const auto dense = spiced(static_cast<std::size_t>(kk * n), 4 + n, 1.0f, spice);
        std::vector<const float*> rows(kk);
        for (std::int64_t p = 0; p < kk; ++p) rows[p] = dense.data() + p * n;
        std::vector<float> want(n), cells(n);
        k::axpy_chains_reference(x.data(), 1, rows.data(), kk, n, want.data());
        gemm::gemm_reference(gemm::Orientation::NN, x.data(), dense.data(), cells.data(), 1, n, kk);
        ASSERT_TRUE(same_bits(want, cells)) << "k=" << kk << " n=" << n;
        for_each_target([&](const std::string& where) {
          std::vector<float> got(n, 7.0f);
          k::axpy_chains(x.data(), 1, rows.data(), kk, n, got.data());
          ASSERT_TRUE(same_bits(want, got)) << where << " k=" << kk << " n=" << n;
          // A strided x is a column of a row-major matrix: the GEMM_TN row.
          std::vector<float> column(static_cast<std::size_t>(kk * 3), -1.0f), by_column(n, 7.0f);
          for (std::int64_t p = 0; p < kk; ++p) column[p * 3 + 1] = x[p];
          k::axpy_chains(column.data() + 1, 3, rows.data(), kk, n, by_column.data());
          ASSERT_TRUE(same_bits(want, by_column)) << where << " strided k=" << kk << " n=" << n;
        });
      }
}

// A masked row with the GEMM's padding: x is +0.0 from `nonzero` on. The skipped steps may only turn a
// -0.0 chain into +0.0 (a later v with a clear sign bit); a non-finite later v or a nonzero later x runs
// every step. Columns: 0 all later v negative (stays -0.0), 1 one later v positive (lifts), the rest random.
TEST(Mamba3Kernels, AxpyChainsZeroTailEqualsTheFullChains) {
  const std::int64_t k = 64, n = 40;
  for (std::int64_t nonzero : {0, 1, 17, 63, 64})
    for (int tail = 0; tail < 3; ++tail) {
      Rng rng(90 + nonzero * 3 + tail);
      std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(k), 1.0f);
      std::vector<float> dense = rng.uniform_vector(static_cast<std::size_t>(k * n), 1.0f);
      for (std::int64_t p = 0; p < nonzero; ++p) {  // the first chains end at -0.0 (a flushed -1e-40)
        x[p] = p + 1 == nonzero ? -1e-20f : 0.0f;
        dense[p * n] = dense[p * n + 1] = 1e-20f;
      }
      for (std::int64_t p = nonzero; p < k; ++p) {
        x[p] = 0.0f;
        dense[p * n] = -std::fabs(dense[p * n]) - 0.5f;
        dense[p * n + 1] = -std::fabs(dense[p * n + 1]) - 0.5f;
      }
      if (nonzero < k) dense[(k - 1) * n + 1] = 2.0f;
      if (tail == 1 && nonzero < k) dense[(k - 1) * n + 5] = std::numeric_limits<float>::infinity();
      if (tail == 2 && nonzero + 2 < k) x[nonzero + 2] = 0.25f;
      std::vector<const float*> rows(static_cast<std::size_t>(k));
      for (std::int64_t p = 0; p < k; ++p) rows[p] = dense.data() + p * n;
      std::vector<float> want(n);
      k::axpy_chains_reference(x.data(), 1, rows.data(), k, n, want.data());
      if (nonzero > 0 && nonzero < k && tail == 0) {  // the cases the columns were built for
        ASSERT_EQ(fp::bits(want[0]), fp::kSignMask);
        ASSERT_EQ(fp::bits(want[1]), 0u);
      }
      for_each_target([&](const std::string& where) {
        std::vector<float> got(n, 7.0f);
        k::axpy_chains_zero_tail(x.data(), rows.data(), nonzero, k, n, got.data());
        ASSERT_TRUE(same_bits(want, got)) << where << " nonzero=" << nonzero << " tail=" << tail;
      });
    }
}

TEST(Mamba3Kernels, AngleScanEqualsTwin) {
  for (std::int64_t lanes : {1, 5, 8, 16, 32, 37})
    for (std::int64_t steps : {1, 3, 40}) {
      Rng rng(5 + lanes);
      auto start = rng.uniform_vector(static_cast<std::size_t>(lanes), 7.0f);
      for (float& v : start) v = fp::F(v);
      const std::int64_t rate_stride = lanes + 2, dt_stride = 3, out_stride = lanes + 1;
      auto rates = rng.uniform_vector(static_cast<std::size_t>(steps * rate_stride), 3.2f);
      auto dt = rng.uniform_vector(static_cast<std::size_t>(steps * dt_stride), 40.0f);
      dt[0] = fp::from_bits(0x00000005u);  // a subnormal dt is flushed
      rates[1] = -0.0f;
      std::vector<float> run_want = start, out_want(steps * out_stride, 0.0f);
      k::angle_scan_reference(run_want.data(), lanes, rates.data(), rate_stride, dt.data(), dt_stride, steps,
                              out_want.data(), out_stride);
      for_each_target([&](const std::string& where) {
        std::vector<float> run = start, out(steps * out_stride, 0.0f);
        k::angle_scan(run.data(), lanes, rates.data(), rate_stride, dt.data(), dt_stride, steps, out.data(),
                      out_stride);
        ASSERT_TRUE(same_bits(run_want, run)) << where << " lanes=" << lanes << " steps=" << steps;
        ASSERT_TRUE(same_bits(out_want, out)) << where << " lanes=" << lanes << " steps=" << steps;
      });
    }
}

TEST(Mamba3Kernels, DecayAccumulateEqualsTwin) {
  for (std::int64_t n : {1, 15, 16, 17, 8192}) {
    const auto h = spiced(static_cast<std::size_t>(n), 6, 2.0f),
               inc = spiced(static_cast<std::size_t>(n), 7, 1e-38f);
    for (float decay : {0.75f, fp::from_bits(0x00800000u), 1.0f}) {
      std::vector<float> want = h;
      k::decay_accumulate_reference(want.data(), decay, inc.data(), n);
      for_each_target([&](const std::string& where) {
        std::vector<float> got = h;
        k::decay_accumulate(got.data(), decay, inc.data(), n);
        ASSERT_TRUE(same_bits(want, got)) << where << " n=" << n;
      });
    }
  }
}

TEST(Mamba3Kernels, ScaledCopyAndGateRowEqualTwins) {
  for (std::int64_t n : {1, 15, 16, 64, 67}) {
    const auto a = spiced(static_cast<std::size_t>(n), 12, 2.0f),
               b = spiced(static_cast<std::size_t>(n), 13, 1e-38f);
    const auto c = spiced(static_cast<std::size_t>(n), 14, 3.0f),
               d = spiced(static_cast<std::size_t>(n), 15, 1.0f);
    for (float scale : {0.5f, -3.0f, fp::from_bits(0x00800003u), -0.0f}) {
      std::vector<float> want(n), got(n);
      k::scaled_copy_reference(a.data(), scale, want.data(), n);
      std::vector<float> gate_want(n), gate_got(n);
      k::gate_row_reference(a.data(), b.data(), scale, 1.5f, c.data(), d.data(), gate_want.data(), n);
      for_each_target([&](const std::string& where) {
        k::scaled_copy(a.data(), scale, got.data(), n);
        ASSERT_TRUE(same_bits(want, got)) << where << " n=" << n;
        k::gate_row(a.data(), b.data(), scale, 1.5f, c.data(), d.data(), gate_got.data(), n);
        ASSERT_TRUE(same_bits(gate_want, gate_got)) << where << " n=" << n;
      });
    }
  }
}

TEST(Mamba3Kernels, BiasRotateEqualsTwin) {
  for (std::int64_t pairs : {0, 1, 7, 32})
    for (std::int64_t n : {64, 128}) {
      const auto normed = spiced(static_cast<std::size_t>(n), 16, 2.0f),
                 bias = spiced(static_cast<std::size_t>(n), 17, 1.0f);
      const auto angles = Rng(18).uniform_vector(static_cast<std::size_t>(pairs) + 1, 3.2f);
      std::vector<float> c(pairs + 1), s(pairs + 1);
      for (std::int64_t j = 0; j <= pairs; ++j) c[j] = std::cos(angles[j]), s[j] = std::sin(angles[j]);
      if (pairs > 0) s[0] = fp::from_bits(0x00000009u);  // a subnormal sine is flushed
      std::vector<float> biased_want(n), rotated_want(n);
      k::bias_rotate_reference(normed.data(), bias.data(), c.data(), s.data(), pairs, n, biased_want.data(),
                               rotated_want.data());
      for_each_target([&](const std::string& where) {
        std::vector<float> biased(n), rotated(n);
        k::bias_rotate(normed.data(), bias.data(), c.data(), s.data(), pairs, n, biased.data(),
                       rotated.data());
        ASSERT_TRUE(same_bits(biased_want, biased)) << where;
        ASSERT_TRUE(same_bits(rotated_want, rotated)) << where << " pairs=" << pairs << " n=" << n;
      });
    }
}

}  // namespace
}  // namespace samebits
