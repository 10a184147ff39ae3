// Internal contract between the GEMM driver and its per-target leaf kernels (not a public header).
#pragma once

#include <cstdint>

namespace samebits::gemm::detail {

// One leaf of a register tile: for rows r < R (R fixed per function) and the 32 columns c of one panel,
//   acc = +0.0; for q in [0, len): acc = F(FMA(F(a[r*a_row + q*a_depth]), panel[q*32 + c], acc));
//   out[r*32 + c] = F(acc).
// `exact` kernels apply every flush; `fast` kernels skip the per-step flushes (the driver proves with
// the MXCSR flags that none would have acted and reruns with `exact` otherwise). The final F is
// applied by both.
// A kernel may cover several panels side by side (panel q at panel + q * panel_stride, its partials at
// out + q * kLeafStride).
using LeafKernel = void (*)(const float* a, std::int64_t a_row, std::int64_t a_depth, const float* panel,
                            std::int64_t panel_stride, std::int64_t len, float* out);

inline constexpr int kMaxTileRows = 8;
// Leaf partials of one tile are laid out [leaf][kMaxTileRows][32].
inline constexpr std::int64_t kLeafStride = kMaxTileRows * 32;

// Folds a tile's leaf partials (each already flushed; leaf t at partials + t * leaf_stride) with the
// balanced adjacent-pair tree of docs/numerics.md §3.3, element-wise across the tile's cells (in place), and
// writes F(root) of rows < rows and columns < cols to c (leading dimension ldc).
using FoldTile = void (*)(float* partials, std::int64_t leaves, std::int64_t leaf_stride, int rows, float* c,
                          std::int64_t ldc, int cols);
inline constexpr int kMaxSkinnyPanels = 4;

struct KernelSet {
  int tile_rows;                      // rows per full register tile (<= kMaxTileRows)
  LeafKernel fast[kMaxTileRows + 1];  // index = rows in the tile, 1..tile_rows
  LeafKernel exact[kMaxTileRows + 1];
  FoldTile fold;
  // Skinny tiles (rows <= skinny_rows, for decode-sized problems) span skinny_panels panels at once.
  int skinny_rows = 0;
  int skinny_panels = 1;
  LeafKernel skinny_fast[kMaxTileRows + 1];
  LeafKernel skinny_exact[kMaxTileRows + 1];
};

const KernelSet& scalar_kernels();
const KernelSet& avx2_kernels();
const KernelSet& avx512_kernels();

}  // namespace samebits::gemm::detail
