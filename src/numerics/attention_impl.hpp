// Attention fast kernel shared by the AVX2 and AVX-512 TUs (docs/blocks.md §4.3 steps 6-9). Include inside a
// TU-unique anonymous namespace after `struct Isa` (numerics/isa_*.hpp), with <immintrin.h>, <cstdint>,
// numerics/attention.hpp, numerics/fp.hpp, numerics/gemm.hpp, numerics/vector_math.hpp and
// core/aligned_buffer.hpp included at global scope.
//
// Layout: query rows (query i, head h) are numbered r = i * heads + h and processed in blocks of
// Isa::kLanes rows, one row per vector lane. Per block:
//  * scores: every (row, key) cell is its own serial FMA chain over head_dim (the GEMM leaf rule), the
//    key element broadcast, the rows' query elements in a transposed tile: vectorized across rows only;
//  * mask, max, exp, denominator and weights: lane-wise, the denominator a serial chain per lane;
//  * value chain: vectorized across output columns d, one serial chain per (row, d) over the keys.
// Keys hidden from every row of a block (after the newest query, or before the oldest window start) are
// skipped. The softmax denominator and the value chains walk the visible keys only (docs/models.md §13).
// When every score of the unit is below 2^101 in magnitude (checked through |q|, |k| < 2^40), a hidden
// key's masked score is exactly -FLT_MAX, its exp and weight exactly +0.0, so walking it adds +0.0 to the
// denominator and 0 * v to the value chain: the same bits, except that a chain at -0.0 becomes +0.0 when v's
// sign bit is clear; finish_row recomputes those cells over the visible keys. Without that bound, rows
// with hidden keys inside their walk go to the twin. A softcapped score is no larger than the uncapped one.
// Chains run without per-step flushes while the MXCSR denormal/underflow flags stay clear, and are rerun
// with every flush when they do not (docs/numerics.md §6a).

#include "numerics/isa_fma_row.hpp"

using samebits::attention::Unit;

constexpr int kLanes = Isa::kLanes;
constexpr std::uint32_t kAbsMaskBits = 0x7FFFFFFFu;
constexpr std::uint32_t kInfBits = 0x7F800000u;
constexpr std::uint32_t kSkipBoundBits = 0x53800000u;  // 2^40
constexpr std::uint32_t kNegFltMaxBits = 0xFF7FFFFFu;

// The flags that prove skipped flushes inert; the thread's MXCSR is restored on exit.
using samebits::mxcsr_flags::FlagScope;

inline std::uint32_t max_abs_bits(const float* data, std::int64_t count, std::uint32_t acc) {
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint32_t a = samebits::fp::bits(data[i]) & kAbsMaskBits;
    acc = a > acc ? a : acc;
  }
  return acc;
}

// Lane-wise fmax on already flushed, non-NaN values: the total-order key as a signed integer.
inline typename Isa::V key_max(typename Isa::V a, typename Isa::V b) {
  const typename Isa::I ia = Isa::cast_i(a);
  const typename Isa::I ib = Isa::cast_i(b);
  const typename Isa::I ka = Isa::xor_i(ia, Isa::template srli<1>(Isa::template srai<31>(ia)));
  const typename Isa::I kb = Isa::xor_i(ib, Isa::template srli<1>(Isa::template srai<31>(ib)));
  return Isa::select(Isa::igt(kb, ka), a, b);
}

struct Scratch {
  samebits::AlignedBuffer<float> qt;       // [head_dim][kLanes] query tile
  samebits::AlignedBuffer<float> cells;    // [keys][kLanes] dots -> masked -> exp -> weights
  samebits::AlignedBuffer<float> leaves;   // [leaves][4][kLanes] partial sums when head_dim > 128
  samebits::AlignedBuffer<float> weights;  // [keys][heads] one query's weights, for the shared value pass
  static void ensure(samebits::AlignedBuffer<float>& buffer, std::int64_t count) {
    if (static_cast<std::int64_t>(buffer.size()) < count)
      buffer.resize_uninitialized(static_cast<std::size_t>(count));
  }
};

// Folds `count` partial vectors in place with the balanced adjacent-pair tree; returns F(root).
inline typename Isa::V fold_leaves(typename Isa::V* partials, std::int64_t count) {
  while (count > 1) {
    std::int64_t next = 0;
    for (std::int64_t i = 0; i + 1 < count; i += 2)
      partials[next++] = Isa::flush(Isa::add(Isa::flush(partials[i]), Isa::flush(partials[i + 1])));
    if (count % 2 == 1) partials[next++] = partials[count - 1];
    count = next;
  }
  return Isa::flush(partials[0]);
}

// dots[j][lane] for keys [0, n) of `keys` against the query tile (head_dim deep). kFlush: every operand
// and every chain step flushed; otherwise only the leaf partials and the results.
template <bool kFlush, int kKeys>
inline void dot_group(const float* qt, const float* keys, std::int64_t head_dim, std::int64_t leaf,
                      std::int64_t leaf_count, float* out, typename Isa::V* partials) {
  using V = typename Isa::V;
  for (std::int64_t t = 0; t < leaf_count; ++t) {
    const std::int64_t d_end = (t + 1) * leaf < head_dim ? (t + 1) * leaf : head_dim;
    V acc[kKeys];
    for (int k = 0; k < kKeys; ++k) acc[k] = Isa::zero();
    for (std::int64_t d = t * leaf; d < d_end; ++d) {
      const V qv = Isa::load(qt + d * kLanes);
      for (int k = 0; k < kKeys; ++k) {
        float key = keys[k * head_dim + d];
        if constexpr (kFlush) key = samebits::fp::F(key);
        acc[k] = Isa::fma(qv, Isa::set1(key), acc[k]);
        if constexpr (kFlush) acc[k] = Isa::flush(acc[k]);
      }
    }
    for (int k = 0; k < kKeys; ++k) partials[t * 4 + k] = Isa::flush(acc[k]);
  }
  for (int k = 0; k < kKeys; ++k) {
    if (leaf_count == 1) {
      Isa::store(out + k * kLanes, partials[k]);
      continue;
    }
    V column[64];
    V* tree = leaf_count <= 64 ? column : partials + 4 * leaf_count;  // the scratch holds room for it
    for (std::int64_t t = 0; t < leaf_count; ++t) tree[t] = partials[t * 4 + k];
    Isa::store(out + k * kLanes, fold_leaves(tree, leaf_count));
  }
}

template <bool kFlush>
void dots(const float* qt, const float* keys, std::int64_t head_dim, std::int64_t n, float* out,
          Scratch& scratch) {
  const std::int64_t leaf = samebits::gemm::leaf_length(head_dim);
  const std::int64_t leaf_count = (head_dim + leaf - 1) / leaf;
  Scratch::ensure(scratch.leaves, (4 * leaf_count + leaf_count) * kLanes);
  auto* partials = reinterpret_cast<typename Isa::V*>(scratch.leaves.data());
  std::int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    dot_group<kFlush, 4>(qt, keys + j * head_dim, head_dim, leaf, leaf_count, out + j * kLanes, partials);
  for (; j < n; ++j)
    dot_group<kFlush, 1>(qt, keys + j * head_dim, head_dim, leaf, leaf_count, out + j * kLanes, partials);
}

// Asks for the cache lines of base[first, first + count), clipped to base[0, size), ahead of their use (value
// rows, key tiles). Offsets, not pointers: nothing points past the array.
inline void prefetch_span(const float* base, std::int64_t first, std::int64_t count, std::int64_t size) {
  const std::int64_t stop = first + count < size ? first + count : size;
  for (std::int64_t at = first; at < stop; at += 16) __builtin_prefetch(base + at, 0, 2);
}

// Value rows a chain asks for ahead of the one it adds: a decode row streams a long cache once, with too
// much arithmetic between loads for the hardware prefetcher alone. Moves nothing the arithmetic sees.
constexpr std::int64_t kValueRowsAhead = 32;

// The value chains of up to kRows rows (lanes l0 .. l0 + kRows - 1 of `weights`) for kCols vectors of
// output columns starting at d0, keys [0, n).
template <bool kFlush, int kRows, int kCols>
void value_tile(const float* weights, std::int64_t w_stride, const float* values, std::int64_t head_dim,
                std::int64_t n, int l0, std::int64_t d0, float* const* out) {
  using V = typename Isa::V;
  V acc[kRows][kCols];
  for (int g = 0; g < kRows; ++g)
    for (int c = 0; c < kCols; ++c) acc[g][c] = Isa::zero();
  for (std::int64_t j = 0; j < n; ++j) {
    const float* row = values + j * head_dim + d0;
    prefetch_span(values, (j + kValueRowsAhead) * head_dim + d0, kCols * kLanes, n * head_dim);
    V v[kCols];
    for (int c = 0; c < kCols; ++c) {
      v[c] = Isa::load(row + c * kLanes);
      if constexpr (kFlush) v[c] = Isa::flush(v[c]);
    }
    for (int g = 0; g < kRows; ++g) {
      const V w = Isa::set1(weights[j * w_stride + l0 + g]);
      for (int c = 0; c < kCols; ++c) {
        acc[g][c] = Isa::fma(w, v[c], acc[g][c]);
        if constexpr (kFlush) acc[g][c] = Isa::flush(acc[g][c]);
      }
    }
  }
  for (int g = 0; g < kRows; ++g)
    for (int c = 0; c < kCols; ++c) Isa::store(out[g] + d0 + c * kLanes, Isa::flush(acc[g][c]));
}

template <bool kFlush, int kRows>
void value_rows(const float* weights, std::int64_t w_stride, const float* values, std::int64_t head_dim,
                std::int64_t n, int l0, float* const* out) {
  const std::int64_t vectors = head_dim / kLanes;
  std::int64_t c = 0;
  // 3-4 rows by 4 column vectors would spill AVX2's 16 registers: 2 column vectors there.
  if constexpr (kLanes == 8 && kRows >= 3)
    for (; c + 2 <= vectors; c += 2)
      value_tile<kFlush, kRows, 2>(weights, w_stride, values, head_dim, n, l0, c * kLanes, out);
  for (; c + 4 <= vectors; c += 4)
    value_tile<kFlush, kRows, 4>(weights, w_stride, values, head_dim, n, l0, c * kLanes, out);
  switch (vectors - c) {
    case 3:
      value_tile<kFlush, kRows, 3>(weights, w_stride, values, head_dim, n, l0, c * kLanes, out);
      break;
    case 2:
      value_tile<kFlush, kRows, 2>(weights, w_stride, values, head_dim, n, l0, c * kLanes, out);
      break;
    case 1:
      value_tile<kFlush, kRows, 1>(weights, w_stride, values, head_dim, n, l0, c * kLanes, out);
      break;
    default:
      break;
  }
}

template <bool kFlush>
void value_chains(const float* weights, std::int64_t w_stride, const float* values, std::int64_t head_dim,
                  std::int64_t n, int rows, float* const* out) {
  int l0 = 0;
  for (; l0 + 4 <= rows; l0 += 4) value_rows<kFlush, 4>(weights, w_stride, values, head_dim, n, l0, out + l0);
  switch (rows - l0) {
    case 3:
      value_rows<kFlush, 3>(weights, w_stride, values, head_dim, n, l0, out + l0);
      break;
    case 2:
      value_rows<kFlush, 2>(weights, w_stride, values, head_dim, n, l0, out + l0);
      break;
    case 1:
      value_rows<kFlush, 1>(weights, w_stride, values, head_dim, n, l0, out + l0);
      break;
    default:
      break;
  }
}

// Softmax steps 7-8 over cells[n][kLanes] (dots in, weights out); key jj of the block is span key
// first + jj and lane l sees span keys [lo[l], hi[l]).
void softmax_cells(float* cells, std::int64_t n, std::int64_t first, const std::int32_t* lo,
                   const std::int32_t* hi, float scale, float softcap) {
  using V = typename Isa::V;
  using I = typename Isa::I;
  alignas(64) std::int32_t lo_minus_one[kLanes];
  for (int l = 0; l < kLanes; ++l) lo_minus_one[l] = lo[l] - 1;
  const I lo_v = *reinterpret_cast<const I*>(lo_minus_one);
  const I hi_v = *reinterpret_cast<const I*>(hi);
  const V scale_v = Isa::set1(scale);
  const V hidden_fill = Isa::set1(samebits::fp::from_bits(kNegFltMaxBits));
  const V zero = Isa::zero();
  V mx = zero;
  const bool capped = softcap > 0.0f;
  if (capped) {  // the scaled scores, then the cap (docs/models.md §9) before the mask
    for (std::int64_t jj = 0; jj < n; ++jj)
      Isa::store(cells + jj * kLanes,
                 Isa::flush(Isa::mul(Isa::flush(Isa::load(cells + jj * kLanes)), scale_v)));
    samebits::block_ops::softcap(cells, static_cast<std::size_t>(n * kLanes), softcap);
  }
  for (std::int64_t jj = 0; jj < n; ++jj) {
    const V score = capped ? Isa::load(cells + jj * kLanes)
                           : Isa::flush(Isa::mul(Isa::flush(Isa::load(cells + jj * kLanes)), scale_v));
    const I key = Isa::set1i(static_cast<std::int32_t>(first + jj));
    const typename Isa::M visible = Isa::mask_and(Isa::igt(key, lo_v), Isa::igt(hi_v, key));
    const V masked = Isa::flush(Isa::add(Isa::flush(score), Isa::select(visible, hidden_fill, zero)));
    Isa::store(cells + jj * kLanes, masked);
    mx = jj == 0 ? masked : key_max(mx, masked);
  }
  mx = Isa::flush(mx);
  for (std::int64_t jj = 0; jj < n; ++jj)
    Isa::store(cells + jj * kLanes, Isa::flush(Isa::sub(Isa::flush(Isa::load(cells + jj * kLanes)), mx)));
  samebits::vector_math::exp(cells, cells, static_cast<std::size_t>(n * kLanes));
  V acc = zero;
  for (std::int64_t jj = 0; jj < n; ++jj) {
    const V e = Isa::flush(Isa::load(cells + jj * kLanes));
    Isa::store(cells + jj * kLanes, e);
    acc = Isa::flush(Isa::add(Isa::flush(acc), e));
  }
  const V den = Isa::flush(acc);
  for (std::int64_t jj = 0; jj < n; ++jj)
    Isa::store(cells + jj * kLanes, Isa::flush(Isa::div(Isa::flush(Isa::load(cells + jj * kLanes)), den)));
}

bool all_finite(const float* data, std::int64_t count) { return max_abs_bits(data, count, 0) < kInfBits; }

// The end of one row's value chains: columns past the last full vector run lane by lane (weights[j *
// w_stride] is key j's weight); then the walk over visible keys only (docs/models.md §13). The row sees
// walked keys [vis_lo, vis_hi) of the n walked ones. A walked hidden key has weight +0.0 (the caller vouches
// for it), so it leaves every chain as it was except a chain at -0.0, which +0.0 * v turns into +0.0 when v's
// sign bit is clear; leading hidden keys meet a chain still at +0.0. So only a cell that ended at +0.0 with
// hidden keys walked after the visible ones can differ, and such a cell is recomputed over the visible keys.
void finish_row(const Unit& u, const float* weights, std::int64_t w_stride, const float* values,
                std::int64_t n, std::int64_t vis_lo, std::int64_t vis_hi, float* out) {
  using samebits::fp::F;
  using samebits::fp::FMA;
  const std::int64_t hd = u.head_dim;
  for (std::int64_t d = hd / kLanes * kLanes; d < hd; ++d) {
    float chain = 0.0f;
    for (std::int64_t jj = 0; jj < n; ++jj)
      chain = F(FMA(F(weights[jj * w_stride]), F(values[jj * hd + d]), chain));
    out[d] = chain;
  }
  if (vis_hi == n) return;
  for (std::int64_t d = 0; d < hd; ++d) {
    if (samebits::fp::bits(out[d]) != 0u) continue;
    float chain = 0.0f;
    for (std::int64_t jj = vis_lo; jj < vis_hi; ++jj)
      chain = F(FMA(F(weights[jj * w_stride]), F(values[jj * hd + d]), chain));
    out[d] = chain;
  }
}

// ---- one row with the KEYS across the lanes (decode: a unit of one or a few rows would leave most lanes
// of a row block idle). Every score is still its own serial chain over head_dim from +0.0 (key rows are
// transposed into columns in registers); exp and the division run lane-wise over keys; the denominator
// stays one serial chain in key order; the value chains are the row blocks' with a weight stride of 1.

// Lanes = keys [0, kLanes) of `keys` (rows head_dim apart): acc = FMA(q[d], key[d], acc) for d in
// [d_begin, d_end), kLanes-deep column tiles transposed, the rest read lane by lane.
template <bool kFlush>
inline typename Isa::V key_chain(const float* q, const float* keys, std::int64_t head_dim,
                                 std::int64_t d_begin, std::int64_t d_end, typename Isa::V acc) {
  using V = typename Isa::V;
  std::int64_t d = d_begin;
  for (; d + kLanes <= d_end; d += kLanes) {
    V cols[kLanes];
    for (int l = 0; l < kLanes; ++l) cols[l] = Isa::load(keys + l * head_dim + d);
    Isa::transpose(cols);
    for (int c = 0; c < kLanes; ++c) {
      float qd = q[d + c];
      V key = cols[c];
      if constexpr (kFlush) {
        qd = samebits::fp::F(qd);
        key = Isa::flush(key);
      }
      acc = Isa::fma(Isa::set1(qd), key, acc);
      if constexpr (kFlush) acc = Isa::flush(acc);
    }
  }
  for (; d < d_end; ++d) {
    alignas(64) float column[kLanes];
    for (int l = 0; l < kLanes; ++l) column[l] = keys[l * head_dim + d];
    float qd = q[d];
    V key = Isa::load(column);
    if constexpr (kFlush) {
      qd = samebits::fp::F(qd);
      key = Isa::flush(key);
    }
    acc = Isa::fma(Isa::set1(qd), key, acc);
    if constexpr (kFlush) acc = Isa::flush(acc);
  }
  return acc;
}

// Groups of kLanes keys a decode row asks for ahead of the one it computes.
constexpr std::int64_t kPrefetchGroups = 4;

// The first `count` lanes of one group's scores into out: its leaf partials folded (one leaf: as is).
inline void store_key_lanes(typename Isa::V* partials, std::int64_t leaf_count, std::int64_t count,
                            float* out) {
  alignas(64) float lanes[kLanes];
  Isa::store(lanes, leaf_count == 1 ? partials[0] : fold_leaves(partials, leaf_count));
  for (std::int64_t l = 0; l < count; ++l) out[l] = lanes[l];
}

// out[j] = the dot of q with key j for j < n (the GEMM leaf rule over head_dim, leaves folded), asking
// for the keys a few groups ahead while it runs.
template <bool kFlush>
void key_dots(const float* q, const float* keys, std::int64_t head_dim, std::int64_t n, float* out,
              Scratch& scratch) {
  using V = typename Isa::V;
  const std::int64_t leaf = samebits::gemm::leaf_length(head_dim);
  const std::int64_t leaf_count = (head_dim + leaf - 1) / leaf;
  Scratch::ensure(scratch.leaves, leaf_count * kLanes);
  Scratch::ensure(scratch.qt, head_dim * kLanes);  // the zero-padded tail keys
  auto* partials = reinterpret_cast<V*>(scratch.leaves.data());
  const std::int64_t group_floats = kLanes * head_dim;
  for (std::int64_t j0 = 0; j0 < n; j0 += kLanes) {
    const float* group = keys + j0 * head_dim;
    prefetch_span(keys, (j0 + kPrefetchGroups * kLanes) * head_dim, group_floats, n * head_dim);
    const std::int64_t valid = n - j0 < kLanes ? n - j0 : kLanes;
    if (valid < kLanes) {  // the last keys, padded with zero rows (their lanes are never stored)
      float* tail = scratch.qt.data();
      for (std::int64_t c = 0; c < head_dim * kLanes; ++c) tail[c] = 0.0f;
      for (std::int64_t c = 0; c < valid * head_dim; ++c) tail[c] = group[c];
      group = tail;
    }
    for (std::int64_t t = 0; t < leaf_count; ++t) {
      const std::int64_t d_end = (t + 1) * leaf < head_dim ? (t + 1) * leaf : head_dim;
      partials[t] = Isa::flush(key_chain<kFlush>(q, group, head_dim, t * leaf, d_end, Isa::zero()));
    }
    store_key_lanes(partials, leaf_count, valid, out + j0);
  }
}

// ---- the same scores from key tiles (Unit::key_tiles): lanes are still keys, but a lane's operand is
// one load away, so nothing is transposed; kKeyGroups groups of keys run their chains side by side to
// keep the FMA pipes busy while each chain waits on its own latency.
constexpr int kKeyGroups = 4;
static_assert(samebits::attention::kKeyTileWidth % kLanes == 0, "a group of lanes lies inside one tile");

// The dots of G groups of kLanes keys (the last `valid` keys of the last group real): group g's lane l is
// key l of the group, its element d at tiles[g] + d * kKeyTileWidth. Per lane and leaf one chain,
// acc = FMA(q[d], key[d], acc) in ascending d; leaves folded; lanes past `valid` are never stored.
template <bool kFlush, int G>
void tiled_group_dots(const float* q, const float* const* tiles, std::int64_t head_dim, std::int64_t leaf,
                      std::int64_t leaf_count, std::int64_t valid, float* out, typename Isa::V* partials) {
  using V = typename Isa::V;
  constexpr std::int64_t kWidth = samebits::attention::kKeyTileWidth;
  for (std::int64_t t = 0; t < leaf_count; ++t) {
    const std::int64_t d_end = (t + 1) * leaf < head_dim ? (t + 1) * leaf : head_dim;
    V acc[G];
    for (int g = 0; g < G; ++g) acc[g] = Isa::zero();
    for (std::int64_t d = t * leaf; d < d_end; ++d) {
      float qd = q[d];
      if constexpr (kFlush) qd = samebits::fp::F(qd);
      const V qv = Isa::set1(qd);
      for (int g = 0; g < G; ++g) {
        V key = Isa::load(tiles[g] + d * kWidth);
        if constexpr (kFlush) key = Isa::flush(key);
        acc[g] = Isa::fma(qv, key, acc[g]);
        if constexpr (kFlush) acc[g] = Isa::flush(acc[g]);
      }
    }
    for (int g = 0; g < G; ++g) partials[g * leaf_count + t] = Isa::flush(acc[g]);
  }
  for (int g = 0; g < G; ++g)
    store_key_lanes(partials + g * leaf_count, leaf_count, g + 1 == G ? valid : kLanes, out + g * kLanes);
}

// Walks keys [0, n) of `tiles` in blocks of up to kBlock groups of kLanes keys, asking for the tiles a few
// groups ahead; visit(groups, count, valid, j0) gets each block's group pointers, its group count, the real
// keys of its last group and its first key.
template <int kBlock, typename Visit>
void walk_key_tiles(const float* tiles, std::int64_t head_dim, std::int64_t n, const Visit& visit) {
  constexpr std::int64_t kWidth = samebits::attention::kKeyTileWidth;
  const std::int64_t tile_floats = head_dim * kWidth;
  const std::int64_t size = (n + kWidth - 1) / kWidth * tile_floats;
  for (std::int64_t j0 = 0; j0 < n; j0 += kBlock * kLanes) {
    prefetch_span(tiles, (j0 + kKeyGroups * kLanes) / kWidth * tile_floats, kBlock * kLanes * head_dim, size);
    const float* groups[kBlock];
    int count = 0;
    std::int64_t valid = kLanes;
    for (; count < kBlock && j0 + count * kLanes < n; ++count) {
      const std::int64_t first = j0 + count * kLanes;
      groups[count] = tiles + first / kWidth * tile_floats + first % kWidth;
      valid = n - first < kLanes ? n - first : kLanes;
    }
    visit(static_cast<const float* const*>(groups), count, valid, j0);
  }
}

// key_dots from key tiles: out[j] for j < n, the same cells.
template <bool kFlush>
void tiled_key_dots(const float* q, const float* tiles, std::int64_t head_dim, std::int64_t n, float* out,
                    Scratch& scratch) {
  const std::int64_t leaf = samebits::gemm::leaf_length(head_dim);
  const std::int64_t leaf_count = (head_dim + leaf - 1) / leaf;
  Scratch::ensure(scratch.leaves, kKeyGroups * leaf_count * kLanes);
  auto* partials = reinterpret_cast<typename Isa::V*>(scratch.leaves.data());
  walk_key_tiles<kKeyGroups>(
      tiles, head_dim, n, [&](const float* const* groups, int count, std::int64_t valid, std::int64_t j0) {
        float* dst = out + j0;
        switch (count) {
          case 4:
            tiled_group_dots<kFlush, 4>(q, groups, head_dim, leaf, leaf_count, valid, dst, partials);
            break;
          case 3:
            tiled_group_dots<kFlush, 3>(q, groups, head_dim, leaf, leaf_count, valid, dst, partials);
            break;
          case 2:
            tiled_group_dots<kFlush, 2>(q, groups, head_dim, leaf, leaf_count, valid, dst, partials);
            break;
          default:
            tiled_group_dots<kFlush, 1>(q, groups, head_dim, leaf, leaf_count, valid, dst, partials);
            break;
        }
      });
}

// tiled_group_dots for H heads at once over G groups of kLanes keys: each key vector is loaded once for all
// heads; head h's chains are exactly those tiled_group_dots computes for it (acc = FMA(q_h[d], key[d], acc)
// in ascending d per leaf, leaves folded), and its lanes go to outs[h] + first.
template <bool kFlush, int H, int G>
void heads_group_dots(const float* const* qs, const float* const* groups, std::int64_t head_dim,
                      std::int64_t leaf, std::int64_t leaf_count, std::int64_t valid, float* const* outs,
                      std::int64_t first, typename Isa::V* partials) {
  using V = typename Isa::V;
  constexpr std::int64_t kWidth = samebits::attention::kKeyTileWidth;
  for (std::int64_t t = 0; t < leaf_count; ++t) {
    const std::int64_t d_end = (t + 1) * leaf < head_dim ? (t + 1) * leaf : head_dim;
    V acc[H][G];
    for (int h = 0; h < H; ++h)
      for (int g = 0; g < G; ++g) acc[h][g] = Isa::zero();
    for (std::int64_t d = t * leaf; d < d_end; ++d) {
      V key[G];
      for (int g = 0; g < G; ++g) {
        key[g] = Isa::load(groups[g] + d * kWidth);
        if constexpr (kFlush) key[g] = Isa::flush(key[g]);
      }
      for (int h = 0; h < H; ++h) fma_row<kFlush, G>(qs[h][d], key, acc[h]);
    }
    for (int h = 0; h < H; ++h)
      for (int g = 0; g < G; ++g) partials[(h * G + g) * leaf_count + t] = Isa::flush(acc[h][g]);
  }
  for (int h = 0; h < H; ++h)
    for (int g = 0; g < G; ++g)
      store_key_lanes(partials + (h * G + g) * leaf_count, leaf_count, g + 1 == G ? valid : kLanes,
                      outs[h] + first + g * kLanes);
}

// How far ahead of its own keys a score pass asks for the value rows of the pass that follows (below).
constexpr std::int64_t kValueKeysAhead = 64;

// tiled_key_dots for H heads from one pass over the key tiles: outs[h][j] for j < n, the same cells as
// tiled_key_dots(qs[h], ...) gives. The unit's `values` (n rows head_dim apart; null: none) are asked for
// while the scores run, so that keys and values stream from memory together and the value pass finds its
// rows in L2 (measured on a Zen 3 AVX2 host: the value loads had been 70% of that pass; SmolLM2's decode
// attention at position 1100 took 5-11% less time). A prefetch changes no value.
template <bool kFlush, int H>
void tiled_heads_dots(const float* const* qs, const float* tiles, std::int64_t head_dim, std::int64_t n,
                      float* const* outs, Scratch& scratch, const float* values) {
  constexpr int kGroups = 2;  // with H <= 4 heads, 2H chains in flight: enough to hide the FMA latency
  const std::int64_t leaf = samebits::gemm::leaf_length(head_dim);
  const std::int64_t leaf_count = (head_dim + leaf - 1) / leaf;
  Scratch::ensure(scratch.leaves, H * kGroups * leaf_count * kLanes);
  auto* partials = reinterpret_cast<typename Isa::V*>(scratch.leaves.data());
  if (values != nullptr) prefetch_span(values, 0, kValueKeysAhead * head_dim, n * head_dim);
  walk_key_tiles<kGroups>(
      tiles, head_dim, n, [&](const float* const* groups, int count, std::int64_t valid, std::int64_t j0) {
        if (values != nullptr)
          prefetch_span(values, (j0 + kValueKeysAhead) * head_dim, kGroups * kLanes * head_dim, n * head_dim);
        if (count == kGroups)
          heads_group_dots<kFlush, H, kGroups>(qs, groups, head_dim, leaf, leaf_count, valid, outs, j0,
                                               partials);
        else
          heads_group_dots<kFlush, H, 1>(qs, groups, head_dim, leaf, leaf_count, valid, outs, j0, partials);
      });
}

template <bool kFlush>
void tiled_heads_dots(int heads, const float* const* qs, const float* tiles, std::int64_t head_dim,
                      std::int64_t n, float* const* outs, Scratch& scratch, const float* values) {
  switch (heads) {
    case 4:
      tiled_heads_dots<kFlush, 4>(qs, tiles, head_dim, n, outs, scratch, values);
      break;
    case 3:
      tiled_heads_dots<kFlush, 3>(qs, tiles, head_dim, n, outs, scratch, values);
      break;
    default:
      tiled_heads_dots<kFlush, 2>(qs, tiles, head_dim, n, outs, scratch, values);
      break;
  }
}

// The total order key_max uses, on one float: larger key = larger value, -0.0 below +0.0.
inline std::int32_t order_key(float x) {
  const std::int32_t i = static_cast<std::int32_t>(samebits::fp::bits(x));
  return i ^ static_cast<std::int32_t>(static_cast<std::uint32_t>(i >> 31) >> 1);
}

// Softmax steps 7-8 over sc[0, n) (dots in, weights out) for one row; key jj is span key first + jj and
// the row sees span keys [lo, hi).
void softmax_keys(float* sc, std::int64_t n, std::int64_t first, std::int64_t lo, std::int64_t hi,
                  float scale, float softcap) {
  using V = typename Isa::V;
  using I = typename Isa::I;
  const V scale_v = Isa::set1(scale);
  const V hidden_fill = Isa::set1(samebits::fp::from_bits(kNegFltMaxBits));
  const V zero = Isa::zero();
  alignas(64) std::int32_t lane_index[kLanes];
  for (int l = 0; l < kLanes; ++l) lane_index[l] = l;
  const I lanes = *reinterpret_cast<const I*>(lane_index);
  const I lo_v = Isa::set1i(static_cast<std::int32_t>(lo - 1)),
          hi_v = Isa::set1i(static_cast<std::int32_t>(hi));
  const bool capped = softcap > 0.0f;
  if (capped) {  // the scaled scores, then the cap (docs/models.md §9) before the mask
    for (std::int64_t j = 0; j < n; ++j)
      sc[j] = samebits::fp::F(samebits::fp::MUL(samebits::fp::F(sc[j]), scale));
    samebits::block_ops::softcap(sc, static_cast<std::size_t>(n), softcap);
  }
  std::int64_t jj = 0;
  for (; jj + kLanes <= n; jj += kLanes) {
    const V score =
        capped ? Isa::load(sc + jj) : Isa::flush(Isa::mul(Isa::flush(Isa::load(sc + jj)), scale_v));
    const I key = Isa::add_i(Isa::set1i(static_cast<std::int32_t>(first + jj)), lanes);
    const typename Isa::M visible = Isa::mask_and(Isa::igt(key, lo_v), Isa::igt(hi_v, key));
    Isa::store(sc + jj, Isa::flush(Isa::add(Isa::flush(score), Isa::select(visible, hidden_fill, zero))));
  }
  for (; jj < n; ++jj) {
    const std::int64_t key = first + jj;
    const float score = capped ? sc[jj] : samebits::fp::F(samebits::fp::MUL(samebits::fp::F(sc[jj]), scale));
    const float mask = key >= lo && key < hi ? 0.0f : samebits::fp::from_bits(kNegFltMaxBits);
    sc[jj] = samebits::fp::F(samebits::fp::F(score) + mask);
  }
  // The fmax fold may take any shape (docs/numerics.md §2.10): lane-wise over whole vectors, then across
  // lanes.
  float mx = sc[0];
  if (n >= kLanes) {
    V lanes_max = Isa::load(sc);
    for (jj = kLanes; jj + kLanes <= n; jj += kLanes) lanes_max = key_max(lanes_max, Isa::load(sc + jj));
    alignas(64) float lane_values[kLanes];
    Isa::store(lane_values, lanes_max);
    mx = lane_values[0];
    for (int l = 1; l < kLanes; ++l)
      if (order_key(lane_values[l]) > order_key(mx)) mx = lane_values[l];
  }
  for (std::int64_t j = n / kLanes * kLanes; j < n; ++j)
    if (order_key(sc[j]) > order_key(mx)) mx = sc[j];
  const V mx_v = Isa::set1(mx);
  for (jj = 0; jj + kLanes <= n; jj += kLanes)
    Isa::store(sc + jj, Isa::flush(Isa::sub(Isa::load(sc + jj), mx_v)));
  for (; jj < n; ++jj) sc[jj] = samebits::fp::F(sc[jj] - mx);
  samebits::vector_math::exp(sc, sc, static_cast<std::size_t>(n));
  for (jj = 0; jj + kLanes <= n; jj += kLanes) Isa::store(sc + jj, Isa::flush(Isa::load(sc + jj)));
  for (; jj < n; ++jj) sc[jj] = samebits::fp::F(sc[jj]);
  // The denominator's chain needs no flushes: every flushed e_j is +0.0 or a normal in [FLT_MIN, 1] (the
  // scores are finite and at most mx), so each partial sum is +0.0 or at least FLT_MIN, never subnormal.
  float acc = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) acc = acc + sc[j];
  const V den = Isa::set1(acc);
  for (jj = 0; jj + kLanes <= n; jj += kLanes)
    Isa::store(sc + jj, Isa::flush(Isa::div(Isa::load(sc + jj), den)));
  for (; jj < n; ++jj) sc[jj] = samebits::fp::F(samebits::fp::DIV(sc[jj], acc));
}

// Whether every |q|, |k| < 2^40, so that every score is below 2^101 and a hidden key's weight is exactly
// +0.0 (decided once per unit, on first need, in may_skip).
inline bool scores_bounded(const Unit& u, std::uint32_t q_max, int& may_skip) {
  if (may_skip < 0)
    may_skip = q_max < kSkipBoundBits && max_abs_bits(u.keys, u.span * u.head_dim, 0) < kSkipBoundBits;
  return may_skip == 1;
}

// Hidden keys outside [first, last) may be skipped only when the scores are bounded; otherwise the span is
// computed whole, masks and all (and the caller hands rows with hidden keys inside their walk to the twin).
inline void widen_unless_skippable(const Unit& u, std::uint32_t q_max, int& may_skip, std::int64_t& first,
                                   std::int64_t& last) {
  if (first == 0 && last == u.span) return;
  if (!scores_bounded(u, q_max, may_skip)) {
    first = 0;
    last = u.span;
  }
}

// Steps 6-8 for row r of u (query r / heads, head r % heads) with the keys across the lanes: its softmax
// weights into sc (room for u.span), their count into n and the row's values into values. False when the
// row went to the twin instead (its output is then written).
bool row_weights(const Unit& u, std::int64_t r, std::uint32_t q_max, int& may_skip, Scratch& scratch,
                 const FlagScope& mxcsr, float* sc, std::int64_t& n, const float*& values) {
  const std::int64_t hd = u.head_dim;
  const std::int64_t i = r / u.heads;
  const std::int64_t h = r % u.heads;
  const std::int64_t p = u.pos0 + i;
  const std::int64_t lo = u.window > 0 && p - u.window + 1 - u.key_lo > 0 ? p - u.window + 1 - u.key_lo : 0;
  const std::int64_t hi = p - u.key_lo + 1;
  std::int64_t first = lo;
  std::int64_t last = hi;
  widen_unless_skippable(u, q_max, may_skip, first, last);
  if (first != lo || last != hi) {  // unbounded scores with hidden keys: the twin walks the visible ones
    samebits::attention::detail::attend_reference_rows(u, r, r + 1);
    return false;
  }
  n = last - first;
  const float* keys = u.keys + first * hd;
  values = u.values + first * hd;
  const float* q = u.q + i * u.q_stride + h * hd;

  mxcsr.clear();
  if (u.key_tiles != nullptr && first == 0) {  // the tiles start at span key 0
    prefetch_span(u.key_tiles, 0, kKeyGroups * kLanes * hd, n * hd);
    tiled_key_dots<false>(q, u.key_tiles, hd, n, sc, scratch);
    if (FlagScope::subnormal_seen()) tiled_key_dots<true>(q, u.key_tiles, hd, n, sc, scratch);
  } else {
    prefetch_span(keys, 0, kPrefetchGroups * kLanes * hd, n * hd);
    key_dots<false>(q, keys, hd, n, sc, scratch);
    if (FlagScope::subnormal_seen()) key_dots<true>(q, keys, hd, n, sc, scratch);
  }
  if (!all_finite(sc, n)) {  // an overflowing score: the twin handles NaN and infinity
    samebits::attention::detail::attend_reference_rows(u, r, r + 1);
    return false;
  }
  softmax_keys(sc, n, first, lo, hi, samebits::attention::score_scale(hd), u.softcap);
  return true;
}

// Step 9 for `count` rows that see the same n values, their weights interleaved ([key][row], stride count):
// one pass over the values serves every row, each output cell still its own chain in key order.
void shared_value_pass(const Unit& u, const float* weights, int count, const float* values, std::int64_t n,
                       float* const* outs, const FlagScope& mxcsr) {
  mxcsr.clear();
  value_chains<false>(weights, count, values, u.head_dim, n, count, outs);
  if (FlagScope::subnormal_seen()) value_chains<true>(weights, count, values, u.head_dim, n, count, outs);
  for (int g = 0; g < count; ++g) finish_row(u, weights + g, count, values, n, 0, n, outs[g]);
}

// Steps 6-9 for row r of u with the keys across the lanes.
void attend_row_by_keys(const Unit& u, std::int64_t r, std::uint32_t q_max, int& may_skip, Scratch& scratch,
                        const FlagScope& mxcsr) {
  Scratch::ensure(scratch.cells, u.span);
  float* sc = scratch.cells.data();
  std::int64_t n = 0;
  const float* values = nullptr;
  if (!row_weights(u, r, q_max, may_skip, scratch, mxcsr, sc, n, values)) return;
  float* const outs[1] = {u.ctx + (r / u.heads) * u.ctx_stride + (r % u.heads) * u.head_dim};
  shared_value_pass(u, sc, 1, values, n, outs, mxcsr);
}

// Steps 6-9 for the heads of a unit's single query (a decode step of grouped heads): each head's weights
// as in attend_row_by_keys, then one value pass for all of them, so the unit's values are read once
// instead of once per head. Every head sees the same keys, so the same n.
void attend_heads_by_keys(const Unit& u, std::uint32_t q_max, int& may_skip, Scratch& scratch,
                          const FlagScope& mxcsr) {
  const std::int64_t stride = (u.span + 15) / 16 * 16;  // each head's scores 64-byte aligned
  Scratch::ensure(scratch.cells, u.heads * stride);
  Scratch::ensure(scratch.weights, u.heads * u.span);
  float* outs[kLanes];
  const float* kept[kLanes];
  int count = 0;
  std::int64_t n = 0;
  const float* values = nullptr;
  // The query's visible keys, the same for every head; with key tiles from span key 0 and no key run to
  // widen to, every head's scores come from one pass over the tiles.
  const std::int64_t hd = u.head_dim;
  const std::int64_t lo =
      u.window > 0 && u.pos0 - u.window + 1 - u.key_lo > 0 ? u.pos0 - u.window + 1 - u.key_lo : 0;
  const std::int64_t hi = u.pos0 - u.key_lo + 1;
  std::int64_t first = lo;
  std::int64_t last = hi;
  if (u.key_tiles != nullptr && u.heads <= 4 && lo == 0)
    widen_unless_skippable(u, q_max, may_skip, first, last);
  if (u.key_tiles != nullptr && u.heads <= 4 && lo == 0 && first == lo && last == hi) {
    n = hi;
    values = u.values;
    const float* qs[4];
    float* scores[4];
    for (std::int64_t h = 0; h < u.heads; ++h) {
      qs[h] = u.q + h * hd;
      scores[h] = scratch.cells.data() + h * stride;
    }
    const int heads = static_cast<int>(u.heads);
    mxcsr.clear();
    prefetch_span(u.key_tiles, 0, kKeyGroups * kLanes * hd, n * hd);
    tiled_heads_dots<false>(heads, qs, u.key_tiles, hd, n, scores, scratch, values);
    if (FlagScope::subnormal_seen())
      tiled_heads_dots<true>(heads, qs, u.key_tiles, hd, n, scores, scratch, nullptr);
    for (std::int64_t h = 0; h < u.heads; ++h) {
      if (!all_finite(scores[h], n)) {  // an overflowing score: the twin handles NaN and infinity
        samebits::attention::detail::attend_reference_rows(u, h, h + 1);
        continue;
      }
      softmax_keys(scores[h], n, 0, lo, hi, samebits::attention::score_scale(hd), u.softcap);
      kept[count] = scores[h];
      outs[count] = u.ctx + h * hd;
      ++count;
    }
  } else {
    for (std::int64_t h = 0; h < u.heads; ++h) {
      float* sc = scratch.cells.data() + h * stride;
      if (!row_weights(u, h, q_max, may_skip, scratch, mxcsr, sc, n, values)) continue;
      kept[count] = sc;
      outs[count] = u.ctx + h * u.head_dim;
      ++count;
    }
  }
  if (count == 0) return;
  float* weights = scratch.weights.data();
  for (std::int64_t j = 0; j < n; ++j)
    for (int g = 0; g < count; ++g) weights[j * count + g] = kept[g][j];
  shared_value_pass(u, weights, count, values, n, outs, mxcsr);
}

void attend_fast(const Unit& u) {
  const std::int64_t hd = u.head_dim;
  const std::int64_t rows = u.queries * u.heads;
  const std::int64_t s = u.span;
  // Inputs this kernel cannot vouch for go to the twin: any non-finite query, key or value.
  std::uint32_t q_max = 0;
  for (std::int64_t i = 0; i < u.queries; ++i)
    q_max = max_abs_bits(u.q + i * u.q_stride, u.heads * hd, q_max);
  const std::int64_t unchecked_from = u.finite_keys < s ? u.finite_keys : s;
  if (q_max >= kInfBits || !all_finite(u.keys + unchecked_from * hd, (s - unchecked_from) * hd) ||
      !all_finite(u.values + unchecked_from * hd, (s - unchecked_from) * hd)) {
    samebits::attention::detail::attend_reference_rows(u, 0, rows);
    return;
  }
  // Whether hidden key runs may be skipped (every |q|, |k| < 2^40), decided on first need: a decode
  // step's single query position sees its whole span, so it never scans the keys for it.
  int may_skip = -1;

  thread_local Scratch scratch;
  // A decode-sized unit: each row with the keys across the lanes. A decode step's group of up to 4 heads
  // (one query) takes it on AVX2 too, with one value pass: with the heads across the lanes instead, 3 or 4
  // heads would leave half of AVX2's lanes idle.
  if (rows * 4 <= kLanes || (u.queries == 1 && rows <= 4)) {
    FlagScope mxcsr;
    if (u.queries == 1 && rows > 1) {
      attend_heads_by_keys(u, q_max, may_skip, scratch, mxcsr);
      return;
    }
    for (std::int64_t r = 0; r < rows; ++r) attend_row_by_keys(u, r, q_max, may_skip, scratch, mxcsr);
    return;
  }
  Scratch::ensure(scratch.qt, hd * kLanes);
  Scratch::ensure(scratch.cells, s * kLanes);
  float* qt = scratch.qt.data();
  float* cells = scratch.cells.data();
  const float scale = samebits::attention::score_scale(hd);
  FlagScope mxcsr;

  for (std::int64_t r0 = 0; r0 < rows; r0 += kLanes) {
    const int active = static_cast<int>(rows - r0 < kLanes ? rows - r0 : kLanes);
    alignas(64) std::int32_t lo[kLanes];
    alignas(64) std::int32_t hi[kLanes];
    float* out[kLanes];
    std::int64_t first = s;
    std::int64_t last = 0;
    for (int l = 0; l < kLanes; ++l) {
      // Idle lanes repeat the block's first row: finite, never stored.
      const std::int64_t r = r0 + (l < active ? l : 0);
      const std::int64_t i = r / u.heads;
      const std::int64_t h = r % u.heads;
      const std::int64_t p = u.pos0 + i;
      const std::int64_t visible_lo =
          u.window > 0 && p - u.window + 1 - u.key_lo > 0 ? p - u.window + 1 - u.key_lo : 0;
      lo[l] = static_cast<std::int32_t>(visible_lo);
      hi[l] = static_cast<std::int32_t>(p - u.key_lo + 1);
      first = visible_lo < first ? visible_lo : first;
      last = hi[l] > last ? hi[l] : last;
      out[l] = u.ctx + i * u.ctx_stride + h * hd;
      const float* q = u.q + i * u.q_stride + h * hd;
      for (std::int64_t d = 0; d < hd; ++d) qt[d * kLanes + l] = q[d];
    }
    widen_unless_skippable(u, q_max, may_skip, first, last);
    bool hidden_inside = false;  // a row of the block that does not see every walked key
    for (int l = 0; l < active; ++l) hidden_inside = hidden_inside || lo[l] > first || hi[l] < last;
    if (hidden_inside && !scores_bounded(u, q_max, may_skip)) {  // a hidden weight may not be +0.0
      samebits::attention::detail::attend_reference_rows(u, r0, r0 + active);
      continue;
    }
    const std::int64_t n = last - first;
    const float* keys = u.keys + first * hd;
    const float* values = u.values + first * hd;

    mxcsr.clear();
    dots<false>(qt, keys, hd, n, cells, scratch);
    if (FlagScope::subnormal_seen()) {
      for (std::int64_t c = 0; c < hd * kLanes; ++c) qt[c] = samebits::fp::F(qt[c]);
      dots<true>(qt, keys, hd, n, cells, scratch);
    }
    if (!all_finite(cells, n * kLanes)) {  // an overflowing score: the twin handles NaN and infinity
      samebits::attention::detail::attend_reference_rows(u, r0, r0 + active);
      continue;
    }
    softmax_cells(cells, n, first, lo, hi, scale, u.softcap);

    mxcsr.clear();
    value_chains<false>(cells, kLanes, values, hd, n, active, out);
    if (FlagScope::subnormal_seen()) value_chains<true>(cells, kLanes, values, hd, n, active, out);
    for (int l = 0; l < active; ++l)
      finish_row(u, cells + l, kLanes, values, n, lo[l] - first, hi[l] - first, out[l]);
  }
}
