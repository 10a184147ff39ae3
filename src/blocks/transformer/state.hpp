// The transformer block's dims and its state, the KV cache of docs/blocks.md §4.2, with the layout operations
// of the fast path: growing the packed full-causal cache in place, appending a call's keys and values,
// gathering a window's key span from its ring.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/aligned_buffer.hpp"

namespace samebits::blocks {

struct TransformerDims {
  std::int64_t d_model = 0;
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t intermediate = 0;
  std::int64_t window = 0;  // 0 = full causal

  std::int64_t q_width() const { return n_heads * head_dim; }
  std::int64_t kv_width() const { return n_kv_heads * head_dim; }
  std::int64_t group() const { return n_heads / n_kv_heads; }  // query heads per kv head
};

// Profile constants (docs/blocks.md §4.1): RMSNorm eps 1e-6 (0x358637BD), RoPE theta 10000 (0x461C4000),
// absolute positions bounded by max_positions 8192 (the sin/cos domain).
inline constexpr float kTransformerNormEps = 1e-6f;
inline constexpr float kRopeTheta = 10000.0f;
inline constexpr std::int64_t kMaxPositions = 8192;

// The caller-owned KV cache (docs/blocks.md §4.2): two flat float32 buffers of batch * n_kv * capacity *
// head_dim floats (capacity = window if window > 0 else max_tokens). Full causal: the first
// batch * n_kv * cached_tokens * head_dim floats are [batch, n_kv, cached_tokens, head_dim]; the rest is
// capacity, not state (zeros from allocation, never read as state). Window W: a ring of W slots per
// (batch row, kv head), slot = position mod W, all of it state.
struct KvCache {
  float* k = nullptr;
  float* v = nullptr;
  std::int64_t batch = 0;
  std::int64_t max_tokens = 0;
  std::int64_t cached_tokens = 0;
  // Full causal only: the spread layout, private to the engine. Block i = (b, kv head) holds its rows at
  // [i * max_tokens, i * max_tokens + cached_tokens) instead of the packed [i * S, (i + 1) * S), so a call
  // appends its rows without moving the cache. Only an owner that hands the buffers to nobody uses it,
  // and it returns to the packed layout (kv::pack_spread) before anyone may look (see TransformerState).
  bool spread = false;
  // The owner vouches that the carried contents are finite (the engine checked them and nobody else has
  // written them since): a call skips its O(cache) scan. Full causal only.
  bool trusted = false;
  // Spread only, optional: every block's keys again as attention key tiles (attention::Unit::key_tiles),
  // block i's at i * kv::key_tile_floats(...), kept equal to the spread keys by every append_spread.
  float* k_tiles = nullptr;

  std::int64_t capacity(const TransformerDims& dims) const {
    return dims.window > 0 ? dims.window : max_tokens;
  }
  std::int64_t floats(const TransformerDims& dims) const {
    return batch * dims.n_kv_heads * capacity(dims) * dims.head_dim;
  }
};

// When a call scans its cache for non-finite contents (docs/blocks.md §4.3 refuses them before any
// arithmetic): kNow in check_call; kAtAppend while the full-causal cache is restrided, one read of the cache
// instead of two (a refusal is then raised after the projections but before anything is written, with the
// same message); kDone when the caller already scanned it for this call (a Samba stack checks every layer
// before any layer moves). A windowed cache (a ring, never restrided) is scanned as kNow.
enum class StateScan { kNow, kAtAppend, kDone };

namespace kv {

// This call's rotated keys and raw values, token-major: row t = b * length + li, kv head g at
// columns [g * head_dim, (g + 1) * head_dim) of rows `row_stride` floats apart.
struct NewRows {
  const float* k;
  const float* v;
  std::int64_t row_stride;
  std::int64_t length;
};

// Full causal: moves the packed [B, KV, S_old, HD] region to stride S_new = S_old + length (last block
// first, so nothing unread is overwritten) and writes this call's rows at positions S_old..; the capacity
// past the new packed region is left untouched. The cache must hold S_new positions.
void append_packed(KvCache& cache, const TransformerDims& dims, const NewRows& rows);

// Called with a (b, kv head) block index, b * n_kv_heads + g, once that block's key span is in place.
using BlockVisitor = std::function<void(std::int64_t block)>;

// append_packed with the state's finiteness scan folded into the move: a block's carried keys and values
// are scanned, moved, followed by this call's rows, and handed to `visit` while they are still in cache,
// so a decode step reads the cache from memory once. On one thread the blocks go last to first; with
// more threads, when the call is short next to the cache (a decode step), the blocks go side by side on
// the pool and `visit` runs on whichever thread moved the block. Otherwise (a long call on a short cache,
// several threads) the blocks move one by one and none is visited: the caller then works on the units in
// parallel itself. `visited` says which. When a carried key or value is non-finite it returns false with
// both buffers exactly as they were, capacity included (anything visited so far must be discarded); the
// caller then refuses with the ordinary scan's message.
bool append_packed_checked(KvCache& cache, const TransformerDims& dims, const NewRows& rows,
                           const BlockVisitor& visit, bool& visited);

// Window W: the keys and values at absolute positions [key_lo, S_old + length) of every (b, kv head),
// ascending, as [B, KV, span, HD] arrays; positions below S_old come from the ring.
void gather_window_span(const KvCache& cache, const TransformerDims& dims, const NewRows& rows,
                        std::int64_t key_lo, float* keys, float* values);

// Window W: writes this call's rows into their ring slots (position mod W), in position order.
void append_ring(KvCache& cache, const TransformerDims& dims, const NewRows& rows);

// The cache floats that are state (and so are refused when non-finite): the packed used region for full
// causal, the whole ring for a window. (A spread cache holds as many, block by block.)
std::int64_t state_floats(const KvCache& cache, const TransformerDims& dims);

// Full causal, packed -> spread (KvCache::spread): block i moves up from row i * S to i * max_tokens,
// last block first. The state is unchanged; what lies between the blocks is capacity.
void spread_packed(KvCache& cache, const TransformerDims& dims);
// Spread -> packed, first block first; the rows the spread blocks held past the packed region are
// zeroed, so the capacity reads as upstream writes it back (zeros) wherever the engine used it.
void pack_spread(KvCache& cache, const TransformerDims& dims);
// Spread: writes this call's rows at positions S_old.. of every block; nothing moves. With key tiles, the
// new keys go into them too.
void append_spread(KvCache& cache, const TransformerDims& dims, const NewRows& rows);

// Key tiles (KvCache::k_tiles): the floats of one block's tiles (max_tokens rounded up to whole tiles).
std::int64_t key_tile_floats(std::int64_t max_tokens, std::int64_t head_dim);
// Sizes `tiles` for every block of the spread `cache` (zeroed afresh only when the size changes), copies
// positions [0, cached_tokens) of its keys in and points cache.k_tiles at them. When the system refuses
// the memory, `tiles` is left empty and cache.k_tiles null (the tiles only save time), and it returns
// false.
bool make_key_tiles(KvCache& cache, const TransformerDims& dims, AlignedBuffer<float>& tiles);

// The refusal of non-finite carried contents, as docs/blocks.md §4.3 words it: the first offender of k_cache,
// then of v_cache, named by its flat index in the packed layout whatever the cache's layout.
void refuse_non_finite_state(const KvCache& cache, const TransformerDims& dims, const std::string& what);

// Full causal: whether the rows at positions [first, cached_tokens) of every block are all finite, in k
// and in v (what a call appended, in the cache's current layout).
bool rows_finite(const KvCache& cache, const TransformerDims& dims, std::int64_t first);

}  // namespace kv

}  // namespace samebits::blocks
