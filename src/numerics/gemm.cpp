// GEMM fast-path driver: packs the right operand into panels, splits output tiles over the thread
// pool, runs the target's leaf kernels and folds leaf partials exactly as the twin does.
#include "numerics/gemm.hpp"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::gemm {
namespace {

using detail::KernelSet;

struct Problem {
  LhsView a;
  std::int64_t m;
  const PackedRhs* rhs;
  float* c;
  std::int64_t leaf;
  std::int64_t leaves;
  const KernelSet* kernels;
};

// The panels one task covers: `count` consecutive panels starting at `first`, run by `fast`/`exact`
// kernels that span exactly `count` panels (1, or the skinny width).
struct PanelGroup {
  std::int64_t first;
  int count;
  const detail::LeafKernel* fast;
  const detail::LeafKernel* exact;
};

void run_leaves(const Problem& pb, const detail::LeafKernel* table, std::int64_t row0, int rows,
                const PanelGroup& group, float* partials) {
  const std::int64_t k = pb.rhs->k();
  const float* panel_data = pb.rhs->panel(group.first);
  const std::int64_t panel_stride = k * kPanelWidth;
  const std::int64_t leaf_stride = group.count * detail::kLeafStride;
  for (std::int64_t t = 0; t < pb.leaves; ++t) {
    const std::int64_t p0 = t * pb.leaf;
    const std::int64_t len = std::min(pb.leaf, k - p0);
    table[rows](pb.a.data + row0 * pb.a.row_stride + p0 * pb.a.depth_stride, pb.a.row_stride,
                pb.a.depth_stride, panel_data + p0 * kPanelWidth, panel_stride, len,
                partials + t * leaf_stride);
  }
}

// One task: a group of column panels times a range of row tiles.
void run_task(const Problem& pb, const PanelGroup& group, int tile_rows, std::int64_t tile_begin,
              std::int64_t tile_end) {
  const std::int64_t n = pb.rhs->n();
  const std::int64_t leaf_stride = group.count * detail::kLeafStride;
  thread_local AlignedBuffer<float> partials;
  const std::size_t need = static_cast<std::size_t>(pb.leaves * leaf_stride);
  if (partials.size() < need) partials.resize_uninitialized(need);

  mxcsr_flags::FlagScope mxcsr;
  // Neighbouring tiles read the same panel and rows of the same kind of data, so a tile that needed the
  // flushing pass predicts that the next one will too: that one then runs it directly instead of after a
  // wasted fast pass. The flushing pass raises the flags where its products went subnormal, so it keeps
  // the prediction while they keep showing up. A wrong guess costs time only: the flushing pass is exact.
  bool flushing_predicted = false;
  for (std::int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const std::int64_t row0 = tile * tile_rows;
    const int rows = static_cast<int>(std::min<std::int64_t>(tile_rows, pb.m - row0));
    mxcsr.clear();
    if (flushing_predicted && group.fast[rows] != group.exact[rows]) {
      run_leaves(pb, group.exact, row0, rows, group, partials.data());
      flushing_predicted = mxcsr_flags::FlagScope::subnormal_seen();
    } else {
      run_leaves(pb, group.fast, row0, rows, group, partials.data());
      if (group.fast[rows] != group.exact[rows] && mxcsr_flags::FlagScope::subnormal_seen()) {
        run_leaves(pb, group.exact, row0, rows, group, partials.data());
        flushing_predicted = true;
      }
    }
    for (int q = 0; q < group.count; ++q) {
      const std::int64_t col0 = (group.first + q) * kPanelWidth;
      const int cols = static_cast<int>(std::min<std::int64_t>(kPanelWidth, n - col0));
      pb.kernels->fold(partials.data() + q * detail::kLeafStride, pb.leaves, leaf_stride, rows,
                       pb.c + row0 * n + col0, n, cols);
    }
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

PackedRhs::PackedRhs(std::int64_t n, std::int64_t k, Placement placement) : n_(n), k_(k) {
  data_.assign_zero(static_cast<std::size_t>(panel_count() * k * kPanelWidth), placement);
}

PackedRhs PackedRhs::from_transposed(const float* W, std::int64_t n, std::int64_t k, Placement placement) {
  PackedRhs packed(n, k, placement);
  for (std::int64_t j = 0; j < n; ++j) {
    float* column = packed.data_.data() + (j / kPanelWidth) * k * kPanelWidth + j % kPanelWidth;
    const float* row = W + j * k;
    for (std::int64_t p = 0; p < k; ++p) {
      column[p * kPanelWidth] = fp::F(row[p]);
      if (fp::bits(column[p * kPanelWidth]) != fp::bits(row[p])) packed.remember_flushed(p, j, row[p]);
    }
  }
  return packed;  // (j, p) order: flushed_ is already sorted
}

PackedRhs PackedRhs::from_row_major(const float* B, std::int64_t k, std::int64_t n, Placement placement) {
  PackedRhs packed(n, k, placement);
  // Each row's run of a panel is contiguous on both sides: a plain loop the compiler vectorizes, with the
  // (rare) flushed cells recorded in a second pass only where the run had one.
  for (std::int64_t p = 0; p < k; ++p) {
    const float* row = B + p * n;
    for (std::int64_t j0 = 0; j0 < n; j0 += kPanelWidth) {
      float* cells = packed.data_.data() + (j0 / kPanelWidth) * k * kPanelWidth + p * kPanelWidth;
      const std::int64_t width = std::min<std::int64_t>(kPanelWidth, n - j0);
      std::uint32_t changed = 0;
      for (std::int64_t j = 0; j < width; ++j) {
        cells[j] = fp::F(row[j0 + j]);
        changed |= fp::bits(cells[j]) ^ fp::bits(row[j0 + j]);
      }
      if (changed != 0)
        for (std::int64_t j = 0; j < width; ++j)
          if (fp::bits(cells[j]) != fp::bits(row[j0 + j])) packed.remember_flushed(p, j0 + j, row[j0 + j]);
    }
  }
  std::sort(packed.flushed_.begin(), packed.flushed_.end());
  return packed;
}

PackedRhs PackedRhs::clone() const {
  PackedRhs copy;
  copy.n_ = n_;
  copy.k_ = k_;
  copy.data_ = data_.clone();
  copy.flushed_ = flushed_;
  return copy;
}

namespace {
constexpr int kMantissaBits = 23;
constexpr std::uint64_t kMantissaMask = (std::uint64_t{1} << kMantissaBits) - 1;
}  // namespace

void PackedRhs::remember_flushed(std::int64_t p, std::int64_t j, float original) {
  // F only changes subnormals (exponent 0), whose sign the packed zero keeps: the mantissa restores it.
  const auto index = static_cast<std::uint64_t>(j * k_ + p);
  flushed_.push_back(index << kMantissaBits | (fp::bits(original) & kMantissaMask));
}

void PackedRhs::restore_flushed(std::int64_t first, std::int64_t count, float* W_out) const {
  const auto lo = static_cast<std::uint64_t>(first * k_) << kMantissaBits;
  const auto hi = static_cast<std::uint64_t>((first + count) * k_) << kMantissaBits;
  for (auto it = std::lower_bound(flushed_.begin(), flushed_.end(), lo); it != flushed_.end() && *it < hi;
       ++it) {
    const std::int64_t index = static_cast<std::int64_t>(*it >> kMantissaBits) - first * k_;
    const std::uint32_t mantissa = static_cast<std::uint32_t>(*it & kMantissaMask);
    W_out[index] = fp::from_bits(fp::bits(W_out[index]) | mantissa);
  }
}

void PackedRhs::unpack_transposed(std::int64_t first, std::int64_t count, float* W_out) const {
  for (std::int64_t j = first; j < first + count; ++j) {
    const float* column = data_.data() + (j / kPanelWidth) * k_ * kPanelWidth + j % kPanelWidth;
    float* row = W_out + (j - first) * k_;
    for (std::int64_t p = 0; p < k_; ++p) row[p] = column[p * kPanelWidth];
  }
  restore_flushed(first, count, W_out);
}

void PackedRhs::gather_rows_flushed(const std::int32_t* ids, std::int64_t count, float* out) const {
  const std::int64_t k = k_;
  // Row j is column j of the packing: panel j / kPanelWidth, slot j % kPanelWidth, stride kPanelWidth.
  parallel_for(
      count,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
          const std::int64_t j = ids[t];
          const float* column = panel(j / kPanelWidth) + j % kPanelWidth;
          for (std::int64_t p = 0; p < k; ++p) out[t * k + p] = column[p * kPanelWidth];
        }
      },
      16);
}

std::vector<float> PackedRhs::unpack_transposed() const {
  std::vector<float> W(static_cast<std::size_t>(n_ * k_));
  unpack_transposed(0, n_, W.data());
  return W;
}

void PackedRhs::unpack_row_major(float* B_out) const {
  for (std::int64_t p = 0; p < k_; ++p)
    for (std::int64_t j = 0; j < n_; ++j) B_out[p * n_ + j] = at(p, j);
  for (std::uint64_t word : flushed_) {
    const auto index = static_cast<std::int64_t>(word >> kMantissaBits);  // j * k + p
    float& cell = B_out[(index % k_) * n_ + index / k_];
    cell = fp::from_bits(fp::bits(cell) | static_cast<std::uint32_t>(word & kMantissaMask));
  }
}

std::size_t PackedRhs::bytes() const {
  return data_.size() * sizeof(float) + flushed_.size() * sizeof(std::uint64_t);
}

void gemm_packed(LhsView A, std::int64_t m, const PackedRhs& rhs, float* C) {
  const std::int64_t n = rhs.n();
  const std::int64_t k = rhs.k();
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::fill(C, C + m * n, 0.0f);  // no leaves: every cell is +0.0
    return;
  }
  Problem pb{A, m, &rhs, C, leaf_length(k), 0, simd::kernels().gemm};
  pb.leaves = (k + pb.leaf - 1) / pb.leaf;
  const KernelSet& ks = *pb.kernels;
  const std::int64_t panels = rhs.panel_count();

  // Decode-sized problems (a row or two) run skinny tiles over several panels at once; any panels left
  // over take the ordinary one-panel kernels. Either way each cell's arithmetic is the same.
  if (m <= ks.skinny_rows && ks.skinny_panels > 1 && panels >= ks.skinny_panels) {
    const std::int64_t wide = panels / ks.skinny_panels;
    const std::int64_t tasks = wide + (panels - wide * ks.skinny_panels);
    parallel_for(tasks, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t task = begin; task < end; ++task) {
        const PanelGroup group =
            task < wide
                ? PanelGroup{task * ks.skinny_panels, ks.skinny_panels, ks.skinny_fast, ks.skinny_exact}
                : PanelGroup{wide * ks.skinny_panels + (task - wide), 1, ks.fast, ks.exact};
        run_task(pb, group, static_cast<int>(m), 0, 1);
      }
    });
    return;
  }

  const std::int64_t tile_rows = ks.tile_rows;
  const std::int64_t tiles = (m + tile_rows - 1) / tile_rows;
  // Up to ~64 rows per task keeps a task's A rows and its panel in L2 while leaving enough tasks.
  const std::int64_t tiles_per_task =
      std::max<std::int64_t>(1, std::min<std::int64_t>(tiles, 64 / tile_rows));
  const std::int64_t groups = (tiles + tiles_per_task - 1) / tiles_per_task;
  parallel_for(panels * groups, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const PanelGroup group{task / groups, 1, ks.fast, ks.exact};
      const std::int64_t first = (task % groups) * tiles_per_task;
      run_task(pb, group, static_cast<int>(tile_rows), first, std::min(tiles, first + tiles_per_task));
    }
  });
}

void gemm_packed_panels(LhsView A, std::int64_t m, const PackedRhs& rhs, std::int64_t first_panel,
                        std::int64_t panel_count, float* C) {
  const std::int64_t n = rhs.n();
  const std::int64_t k = rhs.k();
  const std::int64_t col0 = first_panel * kPanelWidth;
  const std::int64_t col1 = std::min(n, (first_panel + panel_count) * kPanelWidth);
  if (m <= 0 || col0 >= col1) return;
  if (k <= 0) {
    for (std::int64_t i = 0; i < m; ++i) std::fill(C + i * n + col0, C + i * n + col1, 0.0f);
    return;
  }
  Problem pb{A, m, &rhs, C, leaf_length(k), 0, simd::kernels().gemm};
  pb.leaves = (k + pb.leaf - 1) / pb.leaf;
  const KernelSet& ks = *pb.kernels;
  const std::int64_t tiles = (m + ks.tile_rows - 1) / ks.tile_rows;
  for (std::int64_t panel = first_panel; panel * kPanelWidth < col1; ++panel)
    run_task(pb, PanelGroup{panel, 1, ks.fast, ks.exact}, ks.tile_rows, 0, tiles);
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
