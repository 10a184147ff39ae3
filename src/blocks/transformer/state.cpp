// KV-cache layout operations: packed growth in place, ring appends, window span gathers (copies only).
#include "blocks/transformer/state.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "blocks/common/block_support.hpp"
#include "core/thread_pool.hpp"
#include "numerics/attention.hpp"
#include "numerics/finite_scan.hpp"

namespace samebits::blocks::kv {

namespace {
void copy_floats(float* dst, const float* src, std::int64_t count) {
  if (count > 0) std::memmove(dst, src, static_cast<std::size_t>(count) * sizeof(float));
}

// The packed region grows from stride old_len to new_len: block i (one (b, kv head)) moves from
// i * old_len to i * new_len >= its old place, so blocks move last first, each destination being its
// own place (overlapping: memmove) or one already vacated; block i's new rows then go right after its
// carried ones, in space no unmoved block still holds. Moving blocks back goes first to last.
struct Packed {
  KvCache& cache;
  const NewRows& rows;
  std::int64_t hd, kv, old_len, new_len;

  Packed(KvCache& c, const TransformerDims& dims, const NewRows& r)
      : cache(c),
        rows(r),
        hd(dims.head_dim),
        kv(dims.n_kv_heads),
        old_len(c.cached_tokens),
        new_len(c.cached_tokens + r.length) {}

  std::int64_t blocks() const { return cache.batch * kv; }
  float* buffer(int which) const { return which == 0 ? cache.k : cache.v; }
  // Carried rows [from, old_len) of one block in one buffer: their scan, the move to the new stride and
  // back. Rows below `from` are the caller's (restride_blocks_in_parallel keeps them aside).
  bool rows_finite(const float* buf, std::int64_t block, std::int64_t from = 0) const {
    return finite_scan::all_finite(buf + (block * old_len + from) * hd, (old_len - from) * hd);
  }
  void move_up(float* buf, std::int64_t block, std::int64_t from = 0) const {
    copy_floats(buf + (block * new_len + from) * hd, buf + (block * old_len + from) * hd,
                (old_len - from) * hd);
  }
  void move_back(float* buf, std::int64_t block, std::int64_t from = 0) const {
    copy_floats(buf + (block * old_len + from) * hd, buf + (block * new_len + from) * hd,
                (old_len - from) * hd);
  }
  void write_rows(std::int64_t block) const {
    const std::int64_t b = block / kv, g = block % kv;
    for (std::int64_t li = 0; li < rows.length; ++li) {
      const std::int64_t src = (b * rows.length + li) * rows.row_stride + g * hd;
      const std::int64_t dst = (block * new_len + old_len + li) * hd;
      copy_floats(cache.k + dst, rows.k + src, hd);
      copy_floats(cache.v + dst, rows.v + src, hd);
    }
  }
};

}  // namespace

// The capacity past the packed region is not state: it is never read or refused, and it is left as it
// was (zeros unless the caller wrote there), so a decode step costs O(cached tokens), not O(max_tokens).
// Growth only moves data upward inside the new packed region, so it never dirties it.
void append_packed(KvCache& cache, const TransformerDims& dims, const NewRows& rows) {
  const Packed packed(cache, dims, rows);
  for (std::int64_t block = packed.blocks() - 1; block >= 0; --block) {
    if (block > 0)
      for (int which : {0, 1}) packed.move_up(packed.buffer(which), block);
    packed.write_rows(block);
  }
  cache.cached_tokens = packed.new_len;
}

namespace {

// Rows [0, covered(i)) of block i's carried region lie where the blocks below it land (their new regions
// end at i * new_len), so they are saved before anything moves; everything else a block reads is its own.
std::int64_t covered_rows(const Packed& p, std::int64_t block) {
  return std::min(block * (p.new_len - p.old_len), p.old_len);
}

// Last block first, each scanned, moved, given its new rows and visited (when asked); at a non-finite
// block the moved ones go back, first to last.
bool restride_blocks_one_by_one(const Packed& p, const BlockVisitor* visit) {
  for (std::int64_t block = p.blocks() - 1; block >= 0; --block) {
    if (!p.rows_finite(p.cache.k, block) || !p.rows_finite(p.cache.v, block)) {
      for (std::int64_t moved = block + 1; moved < p.blocks(); ++moved)
        for (int which : {0, 1}) p.move_back(p.buffer(which), moved);
      return false;
    }
    if (block > 0)
      for (int which : {0, 1}) p.move_up(p.buffer(which), block);
    p.write_rows(block);
    if (visit != nullptr) (*visit)(block);
  }
  return true;
}

// The blocks all at once: each is scanned, moved (its covered rows from the saved copy), given its new
// rows and visited by whichever thread takes it. No block reads what another writes (see covered_rows).
// On a non-finite block every moved block goes back, first to last, and the saved rows return.
bool restride_blocks_in_parallel(const Packed& p, const BlockVisitor& visit) {
  const std::int64_t blocks = p.blocks(), hd = p.hd;
  std::vector<std::int64_t> saved_at(static_cast<std::size_t>(blocks) + 1, 0);  // row offsets in `saved`
  for (std::int64_t i = 0; i < blocks; ++i) saved_at[i + 1] = saved_at[i] + covered_rows(p, i);
  std::vector<float> saved[2];
  auto saved_rows = [&](int which, std::int64_t i) { return saved[which].data() + saved_at[i] * hd; };
  for (int which : {0, 1}) {
    saved[which].resize(static_cast<std::size_t>(saved_at[blocks] * hd));
    for (std::int64_t i = 0; i < blocks; ++i)
      copy_floats(saved_rows(which, i), p.buffer(which) + i * p.old_len * hd, covered_rows(p, i) * hd);
  }
  std::vector<char> moved(static_cast<std::size_t>(blocks), 0);
  std::atomic<bool> refused{false};
  parallel_for(blocks, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      if (refused.load(std::memory_order_relaxed)) return;
      const std::int64_t c = covered_rows(p, i);
      for (int which : {0, 1}) {
        if (!finite_scan::all_finite(saved_rows(which, i), c * hd) || !p.rows_finite(p.buffer(which), i, c)) {
          refused.store(true, std::memory_order_relaxed);
          return;
        }
      }
      for (int which : {0, 1}) {
        p.move_up(p.buffer(which), i, c);
        copy_floats(p.buffer(which) + i * p.new_len * hd, saved_rows(which, i), c * hd);
      }
      moved[static_cast<std::size_t>(i)] = 1;
      p.write_rows(i);
      visit(i);
    }
  });
  if (!refused.load()) return true;
  // First to last: block i's carried rows go back below its new place once block i - 1 has left them.
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::int64_t c = covered_rows(p, i);
    for (int which : {0, 1}) {
      if (moved[static_cast<std::size_t>(i)]) p.move_back(p.buffer(which), i, c);
      copy_floats(p.buffer(which) + i * p.old_len * hd, saved_rows(which, i), c * hd);
    }
  }
  return false;
}

}  // namespace

bool append_packed_checked(KvCache& cache, const TransformerDims& dims, const NewRows& rows,
                           const BlockVisitor& visit, bool& visited) {
  const Packed packed(cache, dims, rows);
  const std::int64_t blocks = packed.blocks();
  // A refused call must leave the capacity past the old packed region as it was too: the moves and the
  // new rows write into [blocks * old_len, blocks * new_len) * hd, so that span is kept until all passed.
  const std::int64_t tail_begin = blocks * packed.old_len * packed.hd;
  const std::int64_t tail_count = blocks * rows.length * packed.hd;
  const std::vector<float> k_tail(cache.k + tail_begin, cache.k + tail_begin + tail_count);
  const std::vector<float> v_tail(cache.v + tail_begin, cache.v + tail_begin + tail_count);
  // With several threads the blocks move side by side when the rows they must save first (those the
  // blocks below land on: about blocks^2 * length / 2 rows) are few next to what moves (a decode step).
  // Otherwise one by one, visited only on one thread (the caller then runs the units in parallel).
  const bool one_thread = num_threads() == 1;
  const bool side_by_side = !one_thread && blocks > 1 && 2 * (blocks - 1) * rows.length <= packed.old_len;
  visited = one_thread || side_by_side;
  const bool clean = side_by_side ? restride_blocks_in_parallel(packed, visit)
                                  : restride_blocks_one_by_one(packed, one_thread ? &visit : nullptr);
  if (!clean) {
    copy_floats(cache.k + tail_begin, k_tail.data(), tail_count);
    copy_floats(cache.v + tail_begin, v_tail.data(), tail_count);
    return false;
  }
  cache.cached_tokens = packed.new_len;
  return true;
}

void gather_window_span(const KvCache& cache, const TransformerDims& dims, const NewRows& rows,
                        std::int64_t key_lo, float* keys, float* values) {
  const std::int64_t hd = dims.head_dim;
  const std::int64_t kv = dims.n_kv_heads;
  const std::int64_t w = dims.window;
  const std::int64_t pos0 = cache.cached_tokens;
  const std::int64_t span = pos0 + rows.length - key_lo;
  for (std::int64_t b = 0; b < cache.batch; ++b) {
    for (std::int64_t g = 0; g < kv; ++g) {
      const std::int64_t block = b * kv + g;
      for (std::int64_t j = 0; j < span; ++j) {
        const std::int64_t position = key_lo + j;
        const std::int64_t dst = (block * span + j) * hd;
        if (position < pos0) {
          const std::int64_t slot = (block * w + position % w) * hd;
          copy_floats(keys + dst, cache.k + slot, hd);
          copy_floats(values + dst, cache.v + slot, hd);
        } else {
          const std::int64_t src = (b * rows.length + (position - pos0)) * rows.row_stride + g * hd;
          copy_floats(keys + dst, rows.k + src, hd);
          copy_floats(values + dst, rows.v + src, hd);
        }
      }
    }
  }
}

void append_ring(KvCache& cache, const TransformerDims& dims, const NewRows& rows) {
  const std::int64_t hd = dims.head_dim;
  const std::int64_t kv = dims.n_kv_heads;
  const std::int64_t w = dims.window;
  const std::int64_t pos0 = cache.cached_tokens;
  // Only the last W positions survive in the ring; earlier ones would be overwritten in order anyway.
  const std::int64_t first = rows.length > w ? rows.length - w : 0;
  for (std::int64_t b = 0; b < cache.batch; ++b) {
    for (std::int64_t g = 0; g < kv; ++g) {
      for (std::int64_t li = first; li < rows.length; ++li) {
        const std::int64_t slot = ((b * kv + g) * w + (pos0 + li) % w) * hd;
        const std::int64_t src = (b * rows.length + li) * rows.row_stride + g * hd;
        copy_floats(cache.k + slot, rows.k + src, hd);
        copy_floats(cache.v + slot, rows.v + src, hd);
      }
    }
  }
  cache.cached_tokens = pos0 + rows.length;
}

namespace {
// Spread: rows of block i start at row i * max_tokens.
float* spread_row(float* buffer, const KvCache& cache, std::int64_t hd, std::int64_t block,
                  std::int64_t row) {
  return buffer + (block * cache.max_tokens + row) * hd;
}
// Row `row` of block i in the cache's current layout (full causal): at stride max_tokens when spread,
// cached_tokens when packed.
const float* block_row(const float* buffer, const KvCache& cache, std::int64_t hd, std::int64_t block,
                       std::int64_t row) {
  return buffer + (block * (cache.spread ? cache.max_tokens : cache.cached_tokens) + row) * hd;
}
}  // namespace

void spread_packed(KvCache& cache, const TransformerDims& dims) {
  const std::int64_t hd = dims.head_dim, held = cache.cached_tokens;
  const std::int64_t blocks = cache.batch * dims.n_kv_heads;
  // Block i moves from row i * S up to i * max_tokens >= i * S: last first, so no unread row is covered.
  for (float* buffer : {cache.k, cache.v})
    for (std::int64_t block = blocks - 1; block > 0; --block)
      copy_floats(spread_row(buffer, cache, hd, block, 0), buffer + block * held * hd, held * hd);
  cache.spread = true;
}

void pack_spread(KvCache& cache, const TransformerDims& dims) {
  const std::int64_t hd = dims.head_dim, held = cache.cached_tokens;
  const std::int64_t blocks = cache.batch * dims.n_kv_heads;
  const std::int64_t packed_end = blocks * held * hd;
  for (float* buffer : {cache.k, cache.v}) {
    for (std::int64_t block = 1; block < blocks; ++block)
      copy_floats(buffer + block * held * hd, spread_row(buffer, cache, hd, block, 0), held * hd);
    // Each spread block's rows that the packed region does not cover now are capacity: zeros.
    for (std::int64_t block = 1; block < blocks; ++block) {
      const std::int64_t begin = std::max(block * cache.max_tokens * hd, packed_end);
      const std::int64_t end = (block * cache.max_tokens + held) * hd;
      if (end > begin) std::memset(buffer + begin, 0, static_cast<std::size_t>(end - begin) * sizeof(float));
    }
  }
  cache.spread = false;
}

namespace {
// Key row `key` (head_dim floats) into its lane of block `block`'s tiles at `position`.
void put_key_tile_row(const KvCache& cache, const TransformerDims& dims, std::int64_t block,
                      std::int64_t position, const float* key) {
  constexpr std::int64_t kWidth = attention::kKeyTileWidth;
  const std::int64_t hd = dims.head_dim;
  float* lane = cache.k_tiles + block * key_tile_floats(cache.max_tokens, hd) +
                position / kWidth * hd * kWidth + position % kWidth;
  for (std::int64_t d = 0; d < hd; ++d) lane[d * kWidth] = key[d];
}
}  // namespace

void append_spread(KvCache& cache, const TransformerDims& dims, const NewRows& rows) {
  const std::int64_t hd = dims.head_dim, kv = dims.n_kv_heads, pos0 = cache.cached_tokens;
  for (std::int64_t b = 0; b < cache.batch; ++b)
    for (std::int64_t g = 0; g < kv; ++g)
      for (std::int64_t li = 0; li < rows.length; ++li) {
        const std::int64_t src = (b * rows.length + li) * rows.row_stride + g * hd;
        copy_floats(spread_row(cache.k, cache, hd, b * kv + g, pos0 + li), rows.k + src, hd);
        copy_floats(spread_row(cache.v, cache, hd, b * kv + g, pos0 + li), rows.v + src, hd);
        if (cache.k_tiles != nullptr) put_key_tile_row(cache, dims, b * kv + g, pos0 + li, rows.k + src);
      }
  cache.cached_tokens = pos0 + rows.length;
}

std::int64_t key_tile_floats(std::int64_t max_tokens, std::int64_t head_dim) {
  constexpr std::int64_t kWidth = attention::kKeyTileWidth;
  return (max_tokens + kWidth - 1) / kWidth * kWidth * head_dim;
}

bool make_key_tiles(KvCache& cache, const TransformerDims& dims, AlignedBuffer<float>& tiles) {
  const std::int64_t hd = dims.head_dim, blocks = cache.batch * dims.n_kv_heads;
  const auto floats = static_cast<std::size_t>(blocks * key_tile_floats(cache.max_tokens, hd));
  cache.k_tiles = nullptr;
  if (tiles.size() != floats) {
    try {
      tiles.assign_zero(floats);
    } catch (const std::bad_alloc&) {
      tiles = AlignedBuffer<float>();
      return false;
    }
  }
  cache.k_tiles = tiles.data();
  for (std::int64_t block = 0; block < blocks; ++block)
    for (std::int64_t position = 0; position < cache.cached_tokens; ++position)
      put_key_tile_row(cache, dims, block, position, spread_row(cache.k, cache, hd, block, position));
  return true;
}

void refuse_non_finite_state(const KvCache& cache, const TransformerDims& dims, const std::string& what) {
  if (!cache.spread || dims.window > 0) {
    const std::int64_t state = state_floats(cache, dims);
    refuse_if_any_non_finite({{cache.k, state, "k_cache"}, {cache.v, state, "v_cache"}}, what);
    return;
  }
  const std::int64_t hd = dims.head_dim, held = cache.cached_tokens;
  const std::int64_t blocks = cache.batch * dims.n_kv_heads;
  for (const auto& [buffer, name] : {std::pair{cache.k, "k_cache"}, std::pair{cache.v, "v_cache"}})
    for (std::int64_t block = 0; block < blocks; ++block) {
      const float* rows = block_row(buffer, cache, hd, block, 0);
      if (!finite_scan::all_finite(rows, held * hd))
        refuse_non_finite(rows, held * hd, what, name, block * held * hd);
    }
}

bool rows_finite(const KvCache& cache, const TransformerDims& dims, std::int64_t first) {
  const std::int64_t hd = dims.head_dim, held = cache.cached_tokens;
  const std::int64_t blocks = cache.batch * dims.n_kv_heads;
  for (const float* buffer : {cache.k, cache.v})
    for (std::int64_t block = 0; block < blocks; ++block)
      if (!finite_scan::all_finite(block_row(buffer, cache, hd, block, first), (held - first) * hd))
        return false;
  return true;
}

std::int64_t state_floats(const KvCache& cache, const TransformerDims& dims) {
  if (dims.window > 0) return cache.floats(dims);
  return cache.batch * dims.n_kv_heads * cache.cached_tokens * dims.head_dim;
}

}  // namespace samebits::blocks::kv
