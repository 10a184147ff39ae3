// The Mamba kernels of numerics/selective_scan and numerics/ssd against their scalar twins on every SIMD
// target: random data and operands drawn from awkward classes (subnormals of both signs, values that make
// products land in or leave the subnormal range, signed zeros), over sizes with vector tails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/selective_scan.hpp"
#include "numerics/simd_target.hpp"
#include "numerics/ssd.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using testing::Rng;

// A value from one of several classes chosen to exercise every flush seam.
float awkward(Rng& rng, float typical) {
  switch (rng.next() % 10) {
    case 0:
      return fp::from_bits(static_cast<std::uint32_t>(rng.next() % 0x007FFFFFu) + 1u);  // +subnormal
    case 1:
      return fp::from_bits(0x80000000u | (static_cast<std::uint32_t>(rng.next() % 0x007FFFFFu) + 1u));
    case 2:
      return (rng.next() & 1) ? 0.0f : -0.0f;
    case 3:
      return rng.uniform() * 1.5e-38f;  // near FLT_MIN
    case 4:
      return rng.uniform() * 1e-20f;
    case 5:
      return rng.uniform() * 80.0f;
    default:
      return rng.uniform() * typical;
  }
}

std::vector<float> awkward_vector(Rng& rng, std::size_t n, float typical) {
  std::vector<float> v(n);
  for (float& x : v) x = awkward(rng, typical);
  return v;
}

void for_each_target(const std::function<void(const char*)>& body) {
  for (simd::Target target : simd::available_targets()) {
    simd::set_target(target);
    body(simd::target_name(target));
  }
  simd::reset_target();
}

// The scan of `rows` rows from h0 on every target equals the twin's y and final h.
void expect_scan_matches_twin(const std::vector<float>& u, const std::vector<float>& delta, const float* B,
                              const float* C, std::int64_t bc_stride, const std::vector<float>& A,
                              const std::vector<float>& h0, std::int64_t channels, std::int64_t rows,
                              const std::string& what) {
  std::vector<float> want_h = h0, want_y(static_cast<std::size_t>(rows * channels));
  const selective_scan::ScanArgs args{u.data(),  channels, delta.data(),  channels,      B,        C,
                                      bc_stride, A.data(), want_h.data(), want_y.data(), channels, rows};
  selective_scan::selective_scan_reference(args, 0, channels);
  for_each_target([&](const char* where) {
    std::vector<float> h = h0, y(want_y.size(), 9.0f);
    selective_scan::ScanArgs fast = args;
    fast.h = h.data();
    fast.y = y.data();
    selective_scan::selective_scan(fast, 0, channels);
    ASSERT_TRUE(testing::same_bits(want_y, y)) << where << " " << what;
    ASSERT_TRUE(testing::same_bits(want_h, h)) << where << " " << what;
  });
}

TEST(SelectiveScanKernels, ConvMatchesTwin) {
  Rng rng(1);
  for (std::int64_t channels : {1, 7, 16, 33, 64}) {
    for (std::int64_t rows : {1, 2, 3, 4, 9}) {
      for (int awkward_data = 0; awkward_data < 2; ++awkward_data) {
        const float s = 2.0f;
        auto make = [&](std::size_t n) {
          return awkward_data ? awkward_vector(rng, n, s) : rng.uniform_vector(n, s);
        };
        const std::int64_t stride = channels + 5;
        const std::vector<float> head = make(static_cast<std::size_t>(3 * channels));
        const std::vector<float> body = make(static_cast<std::size_t>(rows * stride));
        const std::vector<float> weight = make(static_cast<std::size_t>(4 * channels));
        const std::vector<float> bias = make(static_cast<std::size_t>(channels));
        std::vector<float> want(static_cast<std::size_t>(rows * channels));
        selective_scan::Conv4Args args{head.data(), body.data(), stride, weight.data(), bias.data(),
                                       want.data(), channels,    rows,   channels};
        selective_scan::conv4_silu_reference(args, 0, channels);
        for_each_target([&](const char* where) {
          std::vector<float> got(want.size(), 7.0f);
          selective_scan::Conv4Args fast = args;
          fast.out = got.data();
          selective_scan::conv4_silu(fast, 0, channels);
          ASSERT_TRUE(testing::same_bits(want, got)) << where << " channels=" << channels << " rows=" << rows;
        });
      }
    }
  }
}

TEST(SelectiveScanKernels, ScanMatchesTwin) {
  Rng rng(2);
  for (std::int64_t channels : {1, 8, 16, 17, 40}) {
    for (std::int64_t rows : {1, 3, 12}) {
      for (int awkward_data = 0; awkward_data < 2; ++awkward_data) {
        auto make = [&](std::size_t n, float s) {
          return awkward_data ? awkward_vector(rng, n, s) : rng.uniform_vector(n, s);
        };
        std::vector<float> u = make(static_cast<std::size_t>(rows * channels), 3.0f);
        std::vector<float> delta = make(static_cast<std::size_t>(rows * channels), 1.0f);
        for (float& d : delta) d = d < 0 ? -d : d;  // softplus output is never negative
        const std::int64_t bc_stride = 40;
        std::vector<float> bc = make(static_cast<std::size_t>(rows * bc_stride), 2.0f);
        std::vector<float> A = make(static_cast<std::size_t>(channels * 16), 5.0f);
        for (float& a : A) a = a > 0 ? -a : a;
        const std::vector<float> h0 = make(static_cast<std::size_t>(channels * 16), 1.0f);
        expect_scan_matches_twin(u, delta, bc.data() + 3, bc.data() + 19, bc_stride, A, h0, channels, rows,
                                 "channels=" + std::to_string(channels) + " rows=" + std::to_string(rows));
      }
    }
  }
}

TEST(SelectiveScanKernels, ScanFlushesASubnormalDiscretizedB) {
  // dl = 2e-38 (normal) and B = 0.25 make dB = 5e-39 (subnormal): it must flush to zero before u = 100
  // would lift it back to 5e-37. The twin's h therefore stays exactly zero; hand-checked from the step list.
  const std::int64_t channels = 16;
  std::vector<float> u(channels, 100.0f), delta(channels, 2e-38f), bc(32, 0.25f), A(channels * 16, -1.0f);
  std::vector<float> h(channels * 16, 0.0f), y(channels, 1.0f);
  for_each_target([&](const char* where) {
    std::fill(h.begin(), h.end(), 0.0f);
    selective_scan::ScanArgs args{u.data(), channels, delta.data(), channels, bc.data(), bc.data() + 16,
                                  32,       A.data(), h.data(),     y.data(), channels,  1};
    selective_scan::selective_scan(args, 0, channels);
    for (float v : h) ASSERT_EQ(fp::bits(v), 0u) << where;
    for (float v : y) ASSERT_EQ(fp::bits(v), 0u) << where;
  });
}

// Ordinary data with one awkward value planted per trial (in u, delta, B, C, A or the incoming h): the
// groups it touches need the flushing pass, the others stand without it, and both equal the twin.
TEST(SelectiveScanKernels, ScanWithOnePlantedValueMatchesTwin) {
  Rng rng(5);
  const std::int64_t channels = 48, bc_stride = 32;
  for (int trial = 0; trial < 120; ++trial) {
    const std::int64_t rows = 1 + trial % 3;
    std::vector<float> u = rng.uniform_vector(static_cast<std::size_t>(rows * channels), 3.0f);
    std::vector<float> delta = rng.uniform_vector(static_cast<std::size_t>(rows * channels), 1.0f);
    for (float& d : delta) d = d < 0 ? -d : d;
    std::vector<float> bc = rng.uniform_vector(static_cast<std::size_t>(rows * bc_stride), 2.0f);
    std::vector<float> A = rng.uniform_vector(static_cast<std::size_t>(channels * 16), 5.0f);
    for (float& a : A) a = a > 0 ? -a : a;
    std::vector<float> h0 = rng.uniform_vector(static_cast<std::size_t>(channels * 16), 1.0f);
    std::vector<float>* targets[] = {&u, &delta, &bc, &A, &h0};
    std::vector<float>& target = *targets[trial % 5];
    const float planted = awkward(rng, 1.0f);
    target[rng.next() % target.size()] = &target == &delta || &target == &A
                                             ? (&target == &A ? -std::abs(planted) : std::abs(planted))
                                             : planted;
    expect_scan_matches_twin(u, delta, bc.data(), bc.data() + 16, bc_stride, A, h0, channels, rows,
                             "trial=" + std::to_string(trial));
  }
}

// An exact subnormal raises no MXCSR flag: y's last FMA, 1.5 * FLT_MIN - FLT_MIN = 0.5 * FLT_MIN exactly,
// must still leave as the twin's +0.0 (delta 0 keeps h = h0: dA = 1, dB = 0).
TEST(SelectiveScanKernels, ScanFlushesAnExactSubnormalOutput) {
  const std::int64_t channels = 16;
  std::vector<float> u(channels, 1.0f), delta(channels, 0.0f), A(channels * 16, -1.0f), bc(32, 0.0f);
  bc[16 + 14] = 1.0f;  // C[14]
  bc[16 + 15] = 1.0f;  // C[15]
  std::vector<float> h0(channels * 16, 0.0f);
  for (std::int64_t d = 0; d < channels; ++d) {
    h0[d * 16 + 14] = fp::from_bits(0x00C00000);  // 1.5 * FLT_MIN
    h0[d * 16 + 15] = -fp::flt_min();
  }
  for_each_target([&](const char* where) {
    std::vector<float> h = h0, y(channels, 9.0f);
    selective_scan::ScanArgs args{u.data(), channels, delta.data(), channels, bc.data(), bc.data() + 16,
                                  32,       A.data(), h.data(),     y.data(), channels,  1};
    selective_scan::selective_scan(args, 0, channels);
    for (float v : y) ASSERT_EQ(fp::bits(v), 0u) << where;
    ASSERT_TRUE(testing::same_bits(h0, h)) << where;
  });
}

TEST(SsdKernels, RowGemmCellsMatchTheGemmTwin) {
  Rng rng(3);
  for (std::int64_t k : {1, 5, 128, 129, 256, 300}) {
    for (std::int64_t n : {1, 9, 16, 64, 70}) {
      for (int awkward_data = 0; awkward_data < 2; ++awkward_data) {
        auto make = [&](std::size_t count) {
          return awkward_data ? awkward_vector(rng, count, 1.0f) : rng.uniform_vector(count, 1.0f);
        };
        const std::vector<float> a = make(static_cast<std::size_t>(k));
        const std::int64_t ld_nt = k + 3, ld_nn = n + 2;
        const std::vector<float> b_nt = make(static_cast<std::size_t>(n * ld_nt));
        const std::vector<float> b_nn = make(static_cast<std::size_t>(k * ld_nn));
        // The GEMM twin on dense copies defines the cells.
        std::vector<float> dense_nt(static_cast<std::size_t>(n * k)),
            dense_nn(static_cast<std::size_t>(k * n));
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t p = 0; p < k; ++p) dense_nt[j * k + p] = b_nt[j * ld_nt + p];
        for (std::int64_t p = 0; p < k; ++p)
          for (std::int64_t j = 0; j < n; ++j) dense_nn[p * n + j] = b_nn[p * ld_nn + j];
        std::vector<float> want_nt(static_cast<std::size_t>(n)), want_nn(static_cast<std::size_t>(n));
        gemm::gemm_reference(gemm::Orientation::NT, a.data(), dense_nt.data(), want_nt.data(), 1, n, k);
        gemm::gemm_reference(gemm::Orientation::NN, a.data(), dense_nn.data(), want_nn.data(), 1, n, k);
        std::vector<float> ref(static_cast<std::size_t>(n));
        ssd::row_gemm_nt_reference(a.data(), b_nt.data(), ld_nt, n, k, ref.data());
        ASSERT_TRUE(testing::same_bits(want_nt, ref)) << "k=" << k << " n=" << n;
        ssd::row_gemm_nn_reference(a.data(), b_nn.data(), ld_nn, n, k, ref.data());
        ASSERT_TRUE(testing::same_bits(want_nn, ref)) << "k=" << k << " n=" << n;
        for_each_target([&](const char* where) {
          std::vector<float> got(static_cast<std::size_t>(n), 5.0f);
          ssd::row_gemm_nt(a.data(), b_nt.data(), ld_nt, n, k, got.data());
          ASSERT_TRUE(testing::same_bits(want_nt, got)) << where << " NT k=" << k << " n=" << n;
          ssd::row_gemm_nn(a.data(), b_nn.data(), ld_nn, n, k, got.data());
          ASSERT_TRUE(testing::same_bits(want_nn, got)) << where << " NN k=" << k << " n=" << n;
        });
      }
    }
  }
}

// A decode step's Ydiag row over the open chunk's kept Xd rows: equal to padding the real rows with +0.0
// rows up to k and running the plain NN twin, for any count of real rows; the rows past `real` are never
// read (they hold NaN here).
TEST(SsdKernels, RowsGemmMatchesZeroPaddedTwin) {
  Rng rng(13);
  for (std::int64_t k : {1, 64, 129, 256}) {
    for (std::int64_t real : {std::int64_t{0}, std::int64_t{1}, k / 2 + 1, k - 1, k}) {
      if (real < 0 || real > k) continue;
      for (std::int64_t n : {1, 16, 17, 64, 70}) {
        for (int awkward_data = 0; awkward_data < 2; ++awkward_data) {
          auto make = [&](std::size_t count, float scale) {
            return awkward_data ? awkward_vector(rng, count, scale) : rng.uniform_vector(count, scale);
          };
          const std::vector<float> a = make(static_cast<std::size_t>(k), 1.0f);
          const std::int64_t ldb = n + 37;
          std::vector<float> b = make(static_cast<std::size_t>(k * ldb), 2.0f);
          std::fill(b.begin() + real * ldb, b.end(), std::numeric_limits<float>::quiet_NaN());
          std::vector<float> padded(static_cast<std::size_t>(k * n), 0.0f), want(static_cast<std::size_t>(n));
          for (std::int64_t p = 0; p < real; ++p)
            for (std::int64_t j = 0; j < n; ++j) padded[p * n + j] = b[p * ldb + j];
          ssd::row_gemm_nn_reference(a.data(), padded.data(), n, n, k, want.data());
          const std::string where0 = "k=" + std::to_string(k) + " real=" + std::to_string(real) +
                                     " n=" + std::to_string(n) + " awkward=" + std::to_string(awkward_data);
          std::vector<float> ref(static_cast<std::size_t>(n), 7.0f);
          ssd::row_gemm_nn_rows_reference(a.data(), b.data(), ldb, real, n, k, ref.data());
          ASSERT_TRUE(testing::same_bits(want, ref)) << where0;
          for_each_target([&](const char* where) {
            std::vector<float> got(static_cast<std::size_t>(n), 5.0f);
            ssd::row_gemm_nn_rows(a.data(), b.data(), ldb, real, n, k, got.data());
            ASSERT_TRUE(testing::same_bits(want, got)) << where << " " << where0;
          });
        }
      }
    }
  }
}

// The padding rows still take part in each chain: a leaf whose real rows end at a flushed -0.0 turns +0.0
// on the padding's first +0.0 product, as it does in the zero-padded GEMM.
TEST(SsdKernels, RowsGemmRunsThePaddingRows) {
  const std::int64_t k = 64, n = 16, real = 1;
  std::vector<float> a(static_cast<std::size_t>(k), 1.0f);
  a[0] = -1e-20f;
  const std::vector<float> x(static_cast<std::size_t>(n), 1e-20f);  // product -1e-40: subnormal, flushed
  std::vector<float> want(static_cast<std::size_t>(n));
  ssd::row_gemm_nn_rows_reference(a.data(), x.data(), n, real, n, k, want.data());
  for (float v : want) ASSERT_EQ(fp::bits(v), 0u);  // +0.0, not -0.0
  for_each_target([&](const char* where) {
    std::vector<float> got(static_cast<std::size_t>(n), 5.0f);
    ssd::row_gemm_nn_rows(a.data(), x.data(), n, real, n, k, got.data());
    ASSERT_TRUE(testing::same_bits(want, got)) << where;
  });
}

// The kernels skip the padding's +0.0 rows only where that is provably inert: a tail of a that keeps a
// -0.0 chain at -0.0 (no clear sign bit), one that lifts it, and a non-finite a there (inf * 0 = NaN, so
// every step runs). Each against the zero-padded twin.
TEST(SsdKernels, RowsGemmSkipsOnlyInertPadding) {
  const std::int64_t n = 32;
  // k = 128 is one leaf, so the chain's own sign is the result (a fold with a +0.0 leaf would lift it).
  for (const auto& [k_, real_] :
       {std::pair<std::int64_t, std::int64_t>{128, 1}, {128, 100}, {256, 100}, {256, 129}}) {
    const std::int64_t k = k_, real = real_;  // clang 14 lambdas cannot capture structured bindings
    const std::vector<float> x(static_cast<std::size_t>(real * n), 1e-20f);
    for (int tail = 0; tail < 4; ++tail) {
      std::vector<float> a(static_cast<std::size_t>(k), -2.0f);  // all-negative tail: -0.0 stays
      for (std::int64_t p = 0; p < real; ++p) a[p] = p + 1 == real ? -1e-20f : 0.0f;  // chain ends at -0.0
      if (tail == 1) a[k - 1] = 3.0f;  // the last leaf lifts it
      if (tail == 2) a[real + 3] = std::numeric_limits<float>::infinity();
      if (tail == 3) a[k - 2] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> want(static_cast<std::size_t>(n));
      ssd::row_gemm_nn_rows_reference(a.data(), x.data(), n, real, n, k, want.data());
      for_each_target([&](const char* where) {
        std::vector<float> got(static_cast<std::size_t>(n), 5.0f);
        ssd::row_gemm_nn_rows(a.data(), x.data(), n, real, n, k, got.data());
        ASSERT_TRUE(testing::same_bits(want, got))
            << where << " k=" << k << " real=" << real << " tail=" << tail;
      });
    }
  }
}

TEST(SsdKernels, SegsumRowsAndChunkPassMatchTwins) {
  Rng rng(4);
  for (int awkward_data = 0; awkward_data < 2; ++awkward_data) {
    const std::int64_t width = 256;
    std::vector<float> dA = awkward_data ? awkward_vector(rng, width, 0.2f) : rng.uniform_vector(width, 0.2f);
    for (float& v : dA) v = v > 0 ? -v : v;
    const std::vector<float> g =
        awkward_data ? awkward_vector(rng, width * width, 2.0f) : rng.uniform_vector(width * width, 2.0f);
    std::vector<float> want_frontier(width, 3.0f), want_mm(width * width);
    for (std::int64_t i = 0; i < width; ++i)
      ssd::segsum_row_reference(want_frontier.data(), i, dA[i], g.data() + i * width,
                                want_mm.data() + i * width, width);
    for_each_target([&](const char* where) {
      std::vector<float> frontier(width, 3.0f), mm(width * width, 1.0f);
      for (std::int64_t i = 0; i < width; ++i)
        ssd::segsum_row(frontier.data(), i, dA[i], g.data() + i * width, mm.data() + i * width, width);
      ASSERT_TRUE(testing::same_bits(want_mm, mm)) << where;
      ASSERT_TRUE(testing::same_bits(want_frontier, frontier)) << where;
    });
    const std::int64_t n = 8192 + 5;
    const std::vector<float> h = awkward_data ? awkward_vector(rng, n, 1.0f) : rng.uniform_vector(n, 1.0f);
    const std::vector<float> c = awkward_data ? awkward_vector(rng, n, 1.0f) : rng.uniform_vector(n, 1.0f);
    for (float scale : {0.5f, 1e-20f, 0.999f}) {
      std::vector<float> want(n);
      ssd::chunk_pass_reference(scale, h.data(), c.data(), want.data(), n);
      for_each_target([&](const char* where) {
        std::vector<float> got = h;
        ssd::chunk_pass(scale, got.data(), c.data(), got.data(), n);  // in place, as the block runs it
        ASSERT_TRUE(testing::same_bits(want, got)) << where;
      });
    }
  }
}

TEST(SsdKernels, ScaleMatchesTwin) {
  Rng rng(5);
  for (std::int64_t n : {1, 15, 64, 100}) {
    const std::vector<float> x = awkward_vector(rng, static_cast<std::size_t>(n), 3.0f);
    for (float s : {0.5f, 2e-38f, 1e-30f, 7.0f}) {
      std::vector<float> want(static_cast<std::size_t>(n));
      ssd::scale_reference(x.data(), s, want.data(), n);
      for_each_target([&](const char* where) {
        std::vector<float> got(static_cast<std::size_t>(n), 4.0f);
        ssd::scale(x.data(), s, got.data(), n);
        ASSERT_TRUE(testing::same_bits(want, got)) << where << " n=" << n;
      });
    }
  }
}

TEST(SsdKernels, SegsumDiagonalAndColumnStartFollowTheStepList) {
  // Hand-checked: row 2 with dA = -0.5 at rows 1 and 2 and G = 1 everywhere: column 0 holds
  // (0 + -0.5) + -0.5 = -1, column 1 starts fresh at 0 + -0.5; M = expf of those; the diagonal is 1.
  std::vector<float> frontier(4, 0.0f), g(4, 1.0f), mm(4, 9.0f);
  ssd::segsum_row_reference(frontier.data(), 1, -0.5f, g.data(), mm.data(), 4);
  ssd::segsum_row_reference(frontier.data(), 2, -0.5f, g.data(), mm.data(), 4);
  EXPECT_EQ(frontier[0], -1.0f);
  EXPECT_EQ(frontier[1], -0.5f);
  EXPECT_EQ(mm[2], 1.0f);
  EXPECT_EQ(fp::bits(mm[3]), 0u);
  EXPECT_GT(mm[0], 0.36f);  // expf(-1) = 0.3679
  EXPECT_LT(mm[0], 0.37f);
}

}  // namespace
}  // namespace samebits
