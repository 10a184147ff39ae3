// KV-cache layout operations: packed growth in place, ring appends, window span gathers (copies only).
#include "blocks/transformer_cache.hpp"

#include <cstring>
#include <vector>

#include "numerics/finite_scan.hpp"

namespace samebits::blocks::kv {

namespace {
void copy_floats(float* dst, const float* src, std::int64_t count) {
  if (count > 0) std::memmove(dst, src, static_cast<std::size_t>(count) * sizeof(float));
}

// Block i of the packed region moves from i * old_len to i * new_len >= its old place: the last block
// first, so every destination is either its own (overlapping, memmove) or already vacated. With `check`,
// each block is scanned before it moves; at the first non-finite block the blocks already moved go back
// (first moved last, so each returns to a place already vacated) and the function returns false.
bool restride(float* buffer, std::int64_t blocks, std::int64_t old_len, std::int64_t new_len, std::int64_t hd,
              bool check) {
  for (std::int64_t block = blocks - 1; block >= 0; --block) {
    float* from = buffer + block * old_len * hd;
    if (check && !finite::all_finite(from, old_len * hd)) {
      for (std::int64_t moved = block + 1; moved < blocks; ++moved)
        copy_floats(buffer + moved * old_len * hd, buffer + moved * new_len * hd, old_len * hd);
      return false;
    }
    if (block > 0) copy_floats(buffer + block * new_len * hd, from, old_len * hd);
  }
  return true;
}

// Undoes a completed restride: block i returns from i * new_len to i * old_len, the first block first.
void restride_back(float* buffer, std::int64_t blocks, std::int64_t old_len, std::int64_t new_len,
                   std::int64_t hd) {
  for (std::int64_t block = 1; block < blocks; ++block)
    copy_floats(buffer + block * old_len * hd, buffer + block * new_len * hd, old_len * hd);
}

void write_new_rows(KvCache& cache, const TransformerDims& dims, const NewRows& rows) {
  const std::int64_t hd = dims.head_dim;
  const std::int64_t kv = dims.n_kv_heads;
  const std::int64_t old_len = cache.cached_tokens;
  const std::int64_t new_len = old_len + rows.length;
  for (std::int64_t b = 0; b < cache.batch; ++b) {
    for (std::int64_t g = 0; g < kv; ++g) {
      const std::int64_t block = (b * kv + g) * new_len;
      for (std::int64_t li = 0; li < rows.length; ++li) {
        const std::int64_t src = (b * rows.length + li) * rows.row_stride + g * hd;
        copy_floats(cache.k + (block + old_len + li) * hd, rows.k + src, hd);
        copy_floats(cache.v + (block + old_len + li) * hd, rows.v + src, hd);
      }
    }
  }
  cache.cached_tokens = new_len;
}

}  // namespace

// The capacity past the packed region is not state: it is never read or refused, and it is left as it
// was (zeros unless the caller wrote there), so a decode step costs O(cached tokens), not O(max_tokens).
// Growth only moves data upward inside the new packed region, so it never dirties it.
void append_packed(KvCache& cache, const TransformerDims& dims, const NewRows& rows) {
  const std::int64_t blocks = cache.batch * dims.n_kv_heads;
  const std::int64_t old_len = cache.cached_tokens, new_len = old_len + rows.length;
  for (float* buffer : {cache.k, cache.v}) restride(buffer, blocks, old_len, new_len, dims.head_dim, false);
  write_new_rows(cache, dims, rows);
}

bool append_packed_checked(KvCache& cache, const TransformerDims& dims, const NewRows& rows) {
  const std::int64_t hd = dims.head_dim;
  const std::int64_t blocks = cache.batch * dims.n_kv_heads;
  const std::int64_t old_len = cache.cached_tokens, new_len = old_len + rows.length;
  // A refused call must leave the capacity past the old packed region as it was too: the moves write
  // into [blocks * old_len, blocks * new_len) * hd, so that span is kept until both buffers passed.
  const std::int64_t tail_begin = blocks * old_len * hd, tail_count = blocks * rows.length * hd;
  std::vector<float> k_tail(cache.k + tail_begin, cache.k + tail_begin + tail_count);
  if (!restride(cache.k, blocks, old_len, new_len, hd, true)) {
    copy_floats(cache.k + tail_begin, k_tail.data(), tail_count);
    return false;
  }
  std::vector<float> v_tail(cache.v + tail_begin, cache.v + tail_begin + tail_count);
  if (!restride(cache.v, blocks, old_len, new_len, hd, true)) {
    copy_floats(cache.v + tail_begin, v_tail.data(), tail_count);
    restride_back(cache.k, blocks, old_len, new_len, hd);
    copy_floats(cache.k + tail_begin, k_tail.data(), tail_count);
    return false;
  }
  write_new_rows(cache, dims, rows);
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

std::int64_t state_floats(const KvCache& cache, const TransformerDims& dims) {
  if (dims.window > 0) return cache.floats(dims);
  return cache.batch * dims.n_kv_heads * cache.cached_tokens * dims.head_dim;
}

}  // namespace samebits::blocks::kv
