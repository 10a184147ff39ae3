// GEMM fast-path driver: packs the right operand into panels, splits output tiles over the thread
// pool, runs the target's leaf kernels and folds leaf partials exactly as the twin does.
#include <xmmintrin.h>

#include <algorithm>
#include <cstring>

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/gemm_kernels.hpp"
#include "numerics/simd_target.hpp"

namespace samebits::gemm {
namespace {

using detail::KernelSet;

const KernelSet& kernels_for(simd::Target target) {
  switch (target) {
#if defined(SAMEBITS_HAVE_SIMD)
    case simd::Target::Avx512:
      return detail::avx512_kernels();
    case simd::Target::Avx2:
      return detail::avx2_kernels();
#endif
    default:
      return detail::scalar_kernels();
  }
}

// MXCSR status flags: denormal operand (DE) and underflow (UE). A skipped flush could only have acted
// if a subnormal was produced inexactly (UE) or was used as an operand (DE); final values are flushed
// explicitly by the kernels, so these two flags prove the fast result equal to the exact one.
constexpr unsigned kDenormalFlag = 0x0002;
constexpr unsigned kUnderflowFlag = 0x0010;
constexpr unsigned kAllStatusFlags = 0x003F;

// Restores the thread's MXCSR (including its sticky flags) when the tile work ends.
class MxcsrScope {
 public:
  MxcsrScope() : saved_(_mm_getcsr()) {}
  ~MxcsrScope() { _mm_setcsr(saved_); }
  void clear_flags() const { _mm_setcsr(saved_ & ~kAllStatusFlags); }
  static bool subnormal_seen() { return (_mm_getcsr() & (kDenormalFlag | kUnderflowFlag)) != 0; }

 private:
  unsigned saved_;
};

struct Problem {
  LhsView a;
  std::int64_t m;
  const PackedRhs* rhs;
  float* c;
  std::int64_t leaf;
  std::int64_t leaves;
  const KernelSet* kernels;
};

void run_leaves(const Problem& pb, const detail::LeafKernel* table, std::int64_t row0, int rows,
                std::int64_t panel, float* partials) {
  const std::int64_t k = pb.rhs->k();
  const float* panel_data = pb.rhs->panel(panel);
  for (std::int64_t t = 0; t < pb.leaves; ++t) {
    const std::int64_t p0 = t * pb.leaf;
    const std::int64_t len = std::min(pb.leaf, k - p0);
    table[rows](pb.a.data + row0 * pb.a.row_stride + p0 * pb.a.depth_stride, pb.a.row_stride, pb.a.depth_stride,
                panel_data + p0 * kPanelWidth, len, partials + t * detail::kLeafStride);
  }
}

// One task: a column panel times a range of row tiles.
void run_task(const Problem& pb, std::int64_t panel, std::int64_t tile_begin, std::int64_t tile_end) {
  const std::int64_t n = pb.rhs->n();
  const int tile_rows = pb.kernels->tile_rows;
  thread_local AlignedBuffer<float> partials;
  const std::size_t need = static_cast<std::size_t>(pb.leaves) * detail::kLeafStride;
  if (partials.size() < need) partials.resize_uninitialized(need);
  const std::int64_t col0 = panel * kPanelWidth;
  const int cols = static_cast<int>(std::min<std::int64_t>(kPanelWidth, n - col0));

  MxcsrScope mxcsr;
  for (std::int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const std::int64_t row0 = tile * tile_rows;
    const int rows = static_cast<int>(std::min<std::int64_t>(tile_rows, pb.m - row0));
    mxcsr.clear_flags();
    run_leaves(pb, pb.kernels->fast, row0, rows, panel, partials.data());
    if (pb.kernels->fast[rows] != pb.kernels->exact[rows] && MxcsrScope::subnormal_seen())
      run_leaves(pb, pb.kernels->exact, row0, rows, panel, partials.data());
    pb.kernels->fold(partials.data(), pb.leaves, rows, pb.c + row0 * n + col0, n, cols);
  }
}

}  // namespace

bool sabotage_build() {
#if defined(SAMEBITS_SABOTAGE_REVERSED_LEAF)
  return true;
#else
  return false;
#endif
}

PackedRhs PackedRhs::from_transposed(const float* W, std::int64_t n, std::int64_t k) {
  PackedRhs packed;
  packed.n_ = n;
  packed.k_ = k;
  packed.data_.assign_zero(static_cast<std::size_t>(packed.panel_count() * k * kPanelWidth));
  for (std::int64_t j = 0; j < n; ++j) {
    float* column = packed.data_.data() + (j / kPanelWidth) * k * kPanelWidth + j % kPanelWidth;
    const float* row = W + j * k;
    for (std::int64_t p = 0; p < k; ++p) column[p * kPanelWidth] = fp::F(row[p]);
  }
  return packed;
}

PackedRhs PackedRhs::from_row_major(const float* B, std::int64_t k, std::int64_t n) {
  PackedRhs packed;
  packed.n_ = n;
  packed.k_ = k;
  packed.data_.assign_zero(static_cast<std::size_t>(packed.panel_count() * k * kPanelWidth));
  for (std::int64_t p = 0; p < k; ++p) {
    const float* row = B + p * n;
    for (std::int64_t j = 0; j < n; ++j)
      packed.data_[(j / kPanelWidth) * k * kPanelWidth + p * kPanelWidth + j % kPanelWidth] = fp::F(row[j]);
  }
  return packed;
}

PackedRhs PackedRhs::clone() const {
  PackedRhs copy;
  copy.n_ = n_;
  copy.k_ = k_;
  copy.data_ = data_.clone();
  return copy;
}

void gemm_packed(LhsView A, std::int64_t m, const PackedRhs& rhs, float* C) {
  const std::int64_t n = rhs.n();
  const std::int64_t k = rhs.k();
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::fill(C, C + m * n, 0.0f);  // no leaves: every cell is +0.0
    return;
  }
  Problem pb{A, m, &rhs, C, leaf_length(k), 0, &kernels_for(simd::active_target())};
  pb.leaves = (k + pb.leaf - 1) / pb.leaf;
  const std::int64_t tile_rows = pb.kernels->tile_rows;
  const std::int64_t tiles = (m + tile_rows - 1) / tile_rows;
  // Up to ~64 rows per task keeps a task's A rows and its panel in L2 while leaving enough tasks.
  const std::int64_t tiles_per_task = std::max<std::int64_t>(1, std::min<std::int64_t>(tiles, 64 / tile_rows));
  const std::int64_t groups = (tiles + tiles_per_task - 1) / tiles_per_task;
  const std::int64_t tasks = rhs.panel_count() * groups;
  parallel_for(tasks, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t panel = task / groups;
      const std::int64_t first = (task % groups) * tiles_per_task;
      run_task(pb, panel, first, std::min(tiles, first + tiles_per_task));
    }
  });
}

void gemm(Orientation orientation, const float* A, const float* B, float* C, std::int64_t m, std::int64_t n,
          std::int64_t k) {
  if (m <= 0 || n <= 0) return;
  const PackedRhs rhs = orientation == Orientation::NT ? PackedRhs::from_transposed(B, n, k)
                                                       : PackedRhs::from_row_major(B, k, n);
  const LhsView lhs = orientation == Orientation::TN ? LhsView{A, 1, m} : LhsView{A, k, 1};
  gemm_packed(lhs, m, rhs, C);
}

}  // namespace samebits::gemm
