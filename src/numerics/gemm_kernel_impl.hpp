// Leaf kernel template shared by the scalar, AVX2 and AVX-512 translation units. Include it inside a
// TU-unique namespace after defining `struct Isa` (vector type, lane count, load/store/fma/flush and the
// row widenings widen_bf16_row / widen_i8_row / widen_nibble_row).
// Each output cell is its own serial FMA chain in ascending depth: SIMD runs across columns only. The
// right operand's values come from a panel source, which widens the stored form (float32, bfloat16, int8 or
// 4-bit codes with per-block scales) to exact float32 lanes in registers (docs/numerics.md §3.6), one
// panel row (32 columns, kRowVecs vectors) at a time, so the shuffles that unpack a row are shared by its
// vectors.

#include "numerics/isa_fma_row.hpp"

inline constexpr int kRowVecs = 32 / Isa::kLanes;
// How far ahead of its current row a narrow-panel kernel asks for its panel's bytes. A decode call streams
// each weight once, and at a few bytes per row the arithmetic between two cache lines is short: the
// hardware prefetcher alone leaves the core waiting on memory (measured: cold single-row calls over Q4_1,
// Q8_0, int8 and bfloat16 panels ran 12-70% faster with it). 1 KiB is 16 rows of a bfloat16 panel, 32 of
// int8 codes, 64 of 4-bit codes. A prefetch moves bytes into the cache only (it never faults, even past the
// end of the panels), so it changes no value.
inline constexpr std::int64_t kPrefetchBytes = 1024;
inline void prefetch_ahead(const void* row) {
  __builtin_prefetch(static_cast<const unsigned char*>(row) + kPrefetchBytes, 0, 3);
}
using PanelSpan = samebits::gemm::detail::PanelSpan;

// Float32 panels: [k][32], already flushed.
struct SourceF32 {
  struct Cursor {
    const float* row;
  };
  static Cursor seek(const unsigned char* panel, const PanelSpan&, std::int64_t q) {
    return {reinterpret_cast<const float*>(panel) + q * 32};
  }
  static void widen_row(const Cursor& c, const PanelSpan&, typename Isa::V* out) {
    for (int v = 0; v < kRowVecs; ++v) out[v] = Isa::load(c.row + v * Isa::kLanes);
  }
  static void advance(Cursor& c, const PanelSpan&) { c.row += 32; }
};

// bfloat16 panels: [k][32] upper halves of flushed float32 values, columns c and c + 16 in one 32-bit word
// (c in the low half); widening appends 16 zero bits.
struct SourceBF16 {
  struct Cursor {
    const std::uint16_t* row;
  };
  static Cursor seek(const unsigned char* panel, const PanelSpan&, std::int64_t q) {
    return {reinterpret_cast<const std::uint16_t*>(panel) + q * 32};
  }
  static void widen_row(const Cursor& c, const PanelSpan&, typename Isa::V* out) {
    prefetch_ahead(c.row);
    Isa::widen_bf16_row(c.row, out);
  }
  static void advance(Cursor& c, const PanelSpan&) { c.row += 32; }
};

// Integer codes with per-(depth block, column) scales and, with kHasOffset, offsets: each block is
// [32 scales][32 offsets][block_depth rows of codes], the scales and offsets float32, or fp16 where the
// panels say every one of them is an fp16 value (PanelSpan::half_headers). A value is code * scale
// (+ offset): the product is exact for every producer of these panels, so with an offset the value is one
// FMA, whose single rounding is the reference's own rounding of the addition (docs/numerics.md §3.6).
template <bool kNibbles, bool kHasOffset>
struct SourceCodes {
  static constexpr bool kOffsets = kHasOffset;
  static constexpr std::int64_t kRowBytes = kNibbles ? 16 : 32;
  // Nibble codes without an offset are stored with a bias of 8 (GGUF's Q4_0).
  static constexpr int kNibbleBias = kHasOffset ? 0 : 8;
  static std::int64_t header_bytes(const PanelSpan& span) {
    return (kHasOffset ? 2 : 1) * 32 * (span.half_headers ? 2 : 4);
  }
  static std::int64_t block_bytes(const PanelSpan& span) {
    return header_bytes(span) + span.block_depth * kRowBytes;
  }
  // The block header at `head` as float32 lanes: scale[v] (and offset[v]) for columns v * kLanes onwards.
  static void load_header(const unsigned char* head, bool halves, typename Isa::V* scale,
                          typename Isa::V* offset) {
    for (int v = 0; v < kRowVecs; ++v) {
      if (halves) {
        const auto* h = reinterpret_cast<const std::uint16_t*>(head);
        scale[v] = Isa::load_halves(h + v * Isa::kLanes);
        offset[v] = kHasOffset ? Isa::load_halves(h + 32 + v * Isa::kLanes) : Isa::zero();
      } else {
        const auto* f = reinterpret_cast<const float*>(head);
        scale[v] = Isa::load(f + v * Isa::kLanes);
        offset[v] = kHasOffset ? Isa::load(f + 32 + v * Isa::kLanes) : Isa::zero();
      }
    }
  }
  struct Cursor {
    const unsigned char* codes;
    const unsigned char* head;
    std::int64_t rows_left;
  };
  static Cursor seek(const unsigned char* panel, const PanelSpan& span, std::int64_t q) {
    const std::int64_t block = q / span.block_depth, row = q % span.block_depth;
    const unsigned char* head = panel + block * block_bytes(span);
    return {head + header_bytes(span) + row * kRowBytes, head, span.block_depth - row};
  }
  // One row of codes as floats (the bias already taken off).
  static void widen_codes(const unsigned char* codes, typename Isa::V* out) {
    if constexpr (kNibbles)
      Isa::widen_nibble_row(codes, kNibbleBias, out);
    else
      Isa::widen_i8_row(reinterpret_cast<const std::int8_t*>(codes), out);
  }
  // A code's value: code * scale, or with an offset the one FMA code * scale + offset.
  static typename Isa::V value(typename Isa::V code, typename Isa::V scale, typename Isa::V offset) {
    if constexpr (kHasOffset)
      return Isa::fma(code, scale, offset);
    else
      return Isa::mul(code, scale);
  }
  static void widen_row(const Cursor& c, const PanelSpan& span, typename Isa::V* out) {
    typename Isa::V scale[kRowVecs], offset[kRowVecs];
    load_header(c.head, span.half_headers, scale, offset);
    widen_codes(c.codes, out);
    for (int v = 0; v < kRowVecs; ++v) out[v] = value(out[v], scale[v], offset[v]);
  }
  static void advance(Cursor& c, const PanelSpan& span) {
    c.codes += kRowBytes;
    if (--c.rows_left == 0) {  // the next block's header follows this block's last row
      c.head = c.codes;
      c.codes += header_bytes(span);
      c.rows_left = span.block_depth;
    }
  }
};

// Rows x (Panels * 32) cells: panel q of the group at panels.first + q * panels.panel_bytes; its partials
// go to out + q * kLeafStride + r * 32. Several panels side by side give skinny tiles (few rows) enough
// independent chains to hide the FMA latency; every cell's chain is unchanged.
template <int Rows, int Panels, bool Exact, class Source>
void leaf_kernel(const float* a, std::int64_t a_row, std::int64_t a_depth,
                 const samebits::gemm::detail::PanelSpan& panels, std::int64_t p0, std::int64_t len,
                 float* out) {
  constexpr int kVecs = kRowVecs;
  typename Isa::V acc[Rows][Panels * kVecs];
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Panels * kVecs; ++v) acc[r][v] = Isa::zero();
  typename Source::Cursor cursor[Panels];
  for (int c = 0; c < Panels; ++c)
    cursor[c] = Source::seek(panels.first + c * panels.panel_bytes, panels, p0);
  for (std::int64_t step = 0; step < len; ++step) {
#if defined(SAMEBITS_SABOTAGE_REVERSED_LEAF)
    const std::int64_t q = len - 1 - step;  // test-only sabotage: the suite must catch this
    for (int c = 0; c < Panels; ++c)
      cursor[c] = Source::seek(panels.first + c * panels.panel_bytes, panels, p0 + q);
#else
    const std::int64_t q = step;
#endif
    typename Isa::V a_lane[Rows];
    for (int r = 0; r < Rows; ++r) {
      float value = a[r * a_row + q * a_depth];
      if constexpr (Exact) value = samebits::fp::F(value);
      a_lane[r] = Isa::set1(value);
    }
    for (int c = 0; c < Panels; ++c) {
      typename Isa::V b[kVecs];
      Source::widen_row(cursor[c], panels, b);
      for (int v = 0; v < kVecs; ++v)
        for (int r = 0; r < Rows; ++r) {
          acc[r][c * kVecs + v] = Isa::fma(a_lane[r], b[v], acc[r][c * kVecs + v]);
          if constexpr (Exact) acc[r][c * kVecs + v] = Isa::flush(acc[r][c * kVecs + v]);
        }
    }
#if !defined(SAMEBITS_SABOTAGE_REVERSED_LEAF)
    for (int c = 0; c < Panels; ++c) Source::advance(cursor[c], panels);
#endif
  }
  constexpr std::int64_t kStride = samebits::gemm::detail::kLeafStride;
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Panels * kVecs; ++v)
      Isa::store(out + (v / kVecs) * kStride + r * 32 + (v % kVecs) * Isa::kLanes, Isa::flush(acc[r][v]));
}

// leaf_kernel for float32 panels and one panel per tile, the prefill workhorse: Rows x 32 cells, walked in
// passes of PassVecs vectors (the whole row on AVX-512; 16 columns twice on AVX2, whose 16 registers cannot
// hold 4 rows x 32 columns plus their operands). Within a depth step each row's broadcast feeds its FMAs at
// once, so only one broadcast is live and the accumulators, the pass's panel vectors and it fit the register
// file. Cells are independent, so the passes and the row order change nothing: each chain is leaf_kernel's.
// How far ahead of its current depth step a float32 tile asks for its panel's rows: 16 steps (2 KiB). A
// panel row is read once per tile from L2 (a panel of k = 576 is 72 KiB, past L1), and the tile's FMAs
// otherwise wait on those loads (measured: 1-7% on the SmolLM2 prefill shapes). It changes no value.
inline constexpr std::int64_t kF32PrefetchFloats = 16 * 32;
inline constexpr int kFloatsPerLine = 16;
template <int Rows, int PassVecs, bool Exact>
void f32_tile_kernel(const float* a, std::int64_t a_row, std::int64_t a_depth,
                     const samebits::gemm::detail::PanelSpan& panels, std::int64_t p0, std::int64_t len,
                     float* out) {
  using V = typename Isa::V;
  static_assert(kRowVecs % PassVecs == 0, "passes must tile the panel row");
  const float* panel = reinterpret_cast<const float*>(panels.first) + p0 * 32;
  for (int pass = 0; pass < kRowVecs / PassVecs; ++pass) {
    V acc[Rows][PassVecs];
    for (int r = 0; r < Rows; ++r)
      for (int v = 0; v < PassVecs; ++v) acc[r][v] = Isa::zero();
    for (std::int64_t step = 0; step < len; ++step) {
#if defined(SAMEBITS_SABOTAGE_REVERSED_LEAF)
      const std::int64_t q = len - 1 - step;  // test-only sabotage: the suite must catch this
#else
      const std::int64_t q = step;
#endif
      const float* b_row = panel + q * 32 + pass * PassVecs * Isa::kLanes;
      const float* a_step = a + q * a_depth;
      V b[PassVecs];
      for (int line = 0; line < PassVecs * Isa::kLanes; line += kFloatsPerLine)
        __builtin_prefetch(b_row + line + kF32PrefetchFloats, 0, 3);
      for (int v = 0; v < PassVecs; ++v) b[v] = Isa::load(b_row + v * Isa::kLanes);
      for (int r = 0; r < Rows; ++r) fma_row<Exact, PassVecs>(a_step[r * a_row], b, acc[r]);
    }
    for (int r = 0; r < Rows; ++r)
      for (int v = 0; v < PassVecs; ++v)
        Isa::store(out + r * 32 + (pass * PassVecs + v) * Isa::kLanes, Isa::flush(acc[r][v]));
  }
}

// leaf_kernel for code panels, walked block by block: a block's scales and offsets are loaded once for all
// of its rows, and the panels of a skinny tile step together through one row offset. Each cell's chain and
// each value are leaf_kernel's own.
template <int Rows, int Panels, bool Exact, class Source>
void codes_leaf_kernel(const float* a, std::int64_t a_row, std::int64_t a_depth,
                       const samebits::gemm::detail::PanelSpan& panels, std::int64_t p0, std::int64_t len,
                       float* out) {
  constexpr int kVecs = kRowVecs;
  using V = typename Isa::V;
  V acc[Rows][Panels * kVecs];
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Panels * kVecs; ++v) acc[r][v] = Isa::zero();
  const std::int64_t block_depth = panels.block_depth;
  const std::int64_t block_bytes = Source::block_bytes(panels);
  for (std::int64_t q = 0; q < len;) {
    const std::int64_t block = (p0 + q) / block_depth, row = (p0 + q) % block_depth;
    const std::int64_t run = block_depth - row < len - q ? block_depth - row : len - q;
    const unsigned char* head = panels.first + block * block_bytes;
    V scale[Panels * kVecs], offset[Panels * kVecs];
    for (int c = 0; c < Panels; ++c)
      Source::load_header(head + c * panels.panel_bytes, panels.half_headers, scale + c * kVecs,
                          offset + c * kVecs);
    const unsigned char* codes = head + Source::header_bytes(panels) + row * Source::kRowBytes;
    const float* a_step = a + q * a_depth;
    for (std::int64_t i = 0; i < run; ++i, codes += Source::kRowBytes, a_step += a_depth) {
      V a_lane[Rows];
      for (int r = 0; r < Rows; ++r) {
        float x = a_step[r * a_row];
        if constexpr (Exact) x = samebits::fp::F(x);
        a_lane[r] = Isa::set1(x);
      }
      for (int c = 0; c < Panels; ++c) {
        V b[kVecs];
        prefetch_ahead(codes + c * panels.panel_bytes);
        Source::widen_codes(codes + c * panels.panel_bytes, b);
        for (int v = 0; v < kVecs; ++v) {
          const V value = Source::value(b[v], scale[c * kVecs + v], offset[c * kVecs + v]);
          for (int r = 0; r < Rows; ++r) {
            acc[r][c * kVecs + v] = Isa::fma(a_lane[r], value, acc[r][c * kVecs + v]);
            if constexpr (Exact) acc[r][c * kVecs + v] = Isa::flush(acc[r][c * kVecs + v]);
          }
        }
      }
    }
    q += run;
  }
  constexpr std::int64_t kStride = samebits::gemm::detail::kLeafStride;
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Panels * kVecs; ++v)
      Isa::store(out + (v / kVecs) * kStride + r * 32 + (v % kVecs) * Isa::kLanes, Isa::flush(acc[r][v]));
}

// A panel's rows widened exactly as leaf_kernel widens them, stored as float32.
template <class Source>
void widen_panel(const PanelSpan& panel, std::int64_t depth, float* out) {
  typename Source::Cursor cursor = Source::seek(panel.first, panel, 0);
  for (std::int64_t q = 0; q < depth; ++q) {
    typename Isa::V b[kRowVecs];
    Source::widen_row(cursor, panel, b);
    for (int v = 0; v < kRowVecs; ++v) Isa::store(out + q * 32 + v * Isa::kLanes, b[v]);
    Source::advance(cursor, panel);
  }
}

// The fold runs level by level exactly as the twin's fold_partials, but on whole vectors of cells:
// node = F(left + right) (both operands are already flushed), an odd last node is carried unchanged.
void fold_tile(float* partials, std::int64_t leaves, std::int64_t leaf_stride, int rows, float* c,
               std::int64_t ldc, int cols) {
  const std::int64_t kStride = leaf_stride;
  std::int64_t count = leaves;
  while (count > 1) {
    std::int64_t next = 0;
    for (std::int64_t i = 0; i + 1 < count; i += 2, ++next) {
      const float* left = partials + i * kStride;
      const float* right = left + kStride;
      float* node = partials + next * kStride;
      for (int j = 0; j < rows * 32; j += Isa::kLanes)
        Isa::store(node + j, Isa::flush(Isa::add(Isa::load(left + j), Isa::load(right + j))));
    }
    if (count % 2 == 1) {
      const float* last = partials + (count - 1) * kStride;
      float* node = partials + next * kStride;
      for (int j = 0; j < rows * 32; j += Isa::kLanes) Isa::store(node + j, Isa::load(last + j));
      ++next;
    }
    count = next;
  }
  for (int r = 0; r < rows; ++r) {
    const float* root = partials + r * 32;  // already flushed: F(root) is the root itself
    float* out = c + r * ldc;
    for (int col = 0; col < cols; ++col) out[col] = root[col];
  }
}

// The panel source of each PanelStorage (by its index in the enum).
template <int StorageIndex>
auto source_of() {
  using samebits::gemm::PanelStorage;
  constexpr auto storage = static_cast<PanelStorage>(StorageIndex);
  if constexpr (storage == PanelStorage::F32)
    return SourceF32{};
  else if constexpr (storage == PanelStorage::BF16)
    return SourceBF16{};
  else
    return SourceCodes < storage == PanelStorage::Codes4 || storage == PanelStorage::Codes4Min,
           storage == PanelStorage::Codes8Min || storage == PanelStorage::Codes4Min > {};
}

template <int Rows, int Panels, int StorageIndex = 0>
void fill_storages(samebits::gemm::detail::KernelSet& set, bool skinny) {
  if constexpr (StorageIndex < samebits::gemm::kPanelStorageCount) {
    using Source = decltype(source_of<StorageIndex>());
    samebits::gemm::detail::LeafKernels& k = set.storage[StorageIndex];
    k.widen = &widen_panel<Source>;
#if !defined(SAMEBITS_SABOTAGE_REVERSED_LEAF)  // the sabotage build reverses leaf_kernel's walk only
    if constexpr (StorageIndex >= static_cast<int>(samebits::gemm::PanelStorage::Codes8)) {
      (skinny ? k.skinny_fast : k.fast)[Rows] = &codes_leaf_kernel<Rows, Panels, false, Source>;
      (skinny ? k.skinny_exact : k.exact)[Rows] = &codes_leaf_kernel<Rows, Panels, true, Source>;
    } else
#endif
    {
      (skinny ? k.skinny_fast : k.fast)[Rows] = &leaf_kernel<Rows, Panels, false, Source>;
      (skinny ? k.skinny_exact : k.exact)[Rows] = &leaf_kernel<Rows, Panels, true, Source>;
    }
    fill_storages<Rows, Panels, StorageIndex + 1>(set, skinny);
  }
}

template <int Rows>
void fill_kernels(samebits::gemm::detail::KernelSet& set) {
  set.fold = &fold_tile;
  if constexpr (Rows >= 1) {
    fill_storages<Rows, 1>(set, false);
    fill_kernels<Rows - 1>(set);
  }
}

// The float32 one-panel kernels for 1..Rows rows (prefill tiles; widened narrow panels run them too).
template <int Rows, int PassVecs>
void fill_f32_tiles(samebits::gemm::detail::KernelSet& set) {
  if constexpr (Rows >= 1) {
    set.f32_tile_rows = set.f32_tile_rows > Rows ? set.f32_tile_rows : Rows;
    samebits::gemm::detail::LeafKernels& k = set.storage[static_cast<int>(samebits::gemm::PanelStorage::F32)];
    k.fast[Rows] = &f32_tile_kernel<Rows, PassVecs, false>;
    k.exact[Rows] = &f32_tile_kernel<Rows, PassVecs, true>;
    fill_f32_tiles<Rows - 1, PassVecs>(set);
  }
}

template <int Rows, int Panels>
void fill_skinny_kernels(samebits::gemm::detail::KernelSet& set) {
  set.skinny_panels = Panels;
  if constexpr (Rows >= 1) {
    set.skinny_rows = set.skinny_rows > Rows ? set.skinny_rows : Rows;
    fill_storages<Rows, Panels>(set, true);
    fill_skinny_kernels<Rows - 1, Panels>(set);
  }
}
