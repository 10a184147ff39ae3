// Internal contract between the GEMM driver and its per-target leaf kernels (not a public header).
#pragma once

#include <cstdint>

namespace samebits::gemm {

// How a PackedRhs holds its panels (docs/numerics.md §3.6). Every storage widens each stored value to one
// exactly defined float32 in registers, right before it enters the FMA chain; the chain itself is the
// same for all of them.
enum class PanelStorage : std::uint8_t {
  F32,   // [k][32] float32, flushed
  BF16,  // [k][32] bfloat16 bits of the flushed values (columns c, c + 16 share a word): value = bits << 16
  // The code formats' scales and offsets are float32, or fp16 when every one of them is an fp16 value.
  Codes8,     // per depth block: 32 scales, then [depth][32] int8 codes: value = code * scale
  Codes8Min,  // per depth block: 32 scales, 32 offsets, [depth][32] int8: value = code * scale + offset
  Codes4,     // per depth block: 32 scales, [depth][16] nibble pairs: value = (nibble - 8) * scale
  Codes4Min,  // per depth block: 32 scales, 32 offsets, [depth][16] nibble pairs: nibble * scale + offset
};
inline constexpr int kPanelStorageCount = 6;
inline constexpr const char* kPanelStorageNames[kPanelStorageCount] = {"F32",       "BF16",   "Codes8",
                                                                       "Codes8Min", "Codes4", "Codes4Min"};
inline const char* storage_name(PanelStorage storage) {
  return kPanelStorageNames[static_cast<int>(storage)];
}

}  // namespace samebits::gemm

namespace samebits::gemm::detail {

// Where a kernel finds its panels: panel q of the group starts at first + q * panel_bytes; block formats
// cut the depth into blocks of block_depth rows, each led by its per-column scales (and offsets).
struct PanelSpan {
  const unsigned char* first;
  std::int64_t panel_bytes;
  std::int64_t block_depth;
  bool half_headers = false;  // block formats: scales and offsets stored as fp16 rather than float32
};

// One leaf of a register tile: for rows r < R (R fixed per function) and the 32 columns c of one panel,
//   acc = +0.0; for q in [p0, p0 + len): acc = F(FMA(F(a[r*a_row + (q-p0)*a_depth]), B[q, c], acc));
//   out[r*32 + c] = F(acc),
// where B[q, c] is the panel's stored value widened to float32 (already flushed: the widening never yields
// a subnormal). `exact` kernels apply every flush; `fast` kernels skip the per-step flushes (the driver
// proves with the MXCSR flags that none would have acted and reruns with `exact` otherwise). The final F
// is applied by both. A kernel may cover several panels side by side (their partials at
// out + q * kLeafStride). `a` points at depth p0 already.
using LeafKernel = void (*)(const float* a, std::int64_t a_row, std::int64_t a_depth, const PanelSpan& panels,
                            std::int64_t p0, std::int64_t len, float* out);

inline constexpr int kMaxTileRows = 12;
// Leaf partials of one tile are laid out [leaf][kMaxTileRows][32].
inline constexpr std::int64_t kLeafStride = kMaxTileRows * 32;

// Folds a tile's leaf partials (each already flushed; leaf t at partials + t * leaf_stride) with the
// balanced adjacent-pair tree of docs/numerics.md §3.3, element-wise across the tile's cells (in place), and
// writes F(root) of rows < rows and columns < cols to c (leading dimension ldc).
using FoldTile = void (*)(float* partials, std::int64_t leaves, std::int64_t leaf_stride, int rows, float* c,
                          std::int64_t ldc, int cols);
inline constexpr int kMaxSkinnyPanels = 4;

// Widens the first `depth` rows of one panel (at panel.first), as stored, to the float32 values its leaf
// kernels would form ([depth][32] at out): a task with several row tiles widens its panel once and runs
// them all on float32.
using WidenPanel = void (*)(const PanelSpan& panel, std::int64_t depth, float* out);

// Leaf kernels of one panel storage, indexed by the rows in the tile (1..tile_rows, or 1..skinny_rows).
struct LeafKernels {
  WidenPanel widen;
  LeafKernel fast[kMaxTileRows + 1];
  LeafKernel exact[kMaxTileRows + 1];
  LeafKernel skinny_fast[kMaxTileRows + 1];
  LeafKernel skinny_exact[kMaxTileRows + 1];
};

struct KernelSet {
  int tile_rows;  // rows per full register tile of the narrow storages' own kernels (<= kMaxTileRows)
  // Rows per full float32 register tile (<= kMaxTileRows): float32 panels, and narrow panels widened to
  // float32 for a call with several tiles, run this taller tile.
  int f32_tile_rows = 0;
  FoldTile fold;
  // Skinny tiles (rows <= skinny_rows, for decode-sized problems) span skinny_panels panels at once.
  int skinny_rows = 0;
  int skinny_panels = 1;
  LeafKernels storage[kPanelStorageCount];  // indexed by PanelStorage
};

const KernelSet& scalar_kernels();
const KernelSet& avx2_kernels();
const KernelSet& avx512_kernels();

}  // namespace samebits::gemm::detail
