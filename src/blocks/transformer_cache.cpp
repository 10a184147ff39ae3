// KV-cache layout operations: packed growth in place, ring appends, window span gathers (copies only).
#include "blocks/transformer_cache.hpp"

#include <cstring>

namespace samebits::blocks::kv {

namespace {
void copy_floats(float* dst, const float* src, std::int64_t count) {
  if (count > 0) std::memmove(dst, src, static_cast<std::size_t>(count) * sizeof(float));
}
}  // namespace

void append_packed(KvCache& cache, const TransformerDims& dims, const NewRows& rows) {
  const std::int64_t hd = dims.head_dim;
  const std::int64_t kv = dims.n_kv_heads;
  const std::int64_t blocks = cache.batch * kv;
  const std::int64_t old_len = cache.cached_tokens;
  const std::int64_t new_len = old_len + rows.length;
  for (float* buffer : {cache.k, cache.v}) {
    // Block i moves from i * old_len to i * new_len >= its old place: the last block first, so every
    // destination is either its own (overlapping, memmove) or already vacated.
    for (std::int64_t block = blocks - 1; block > 0; --block)
      copy_floats(buffer + block * new_len * hd, buffer + block * old_len * hd, old_len * hd);
  }
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
  // The capacity past the packed region is not state: it is never read or refused, and it is left as
  // it was (zeros unless the caller wrote there), so a decode step costs O(cached tokens), not
  // O(max_tokens). Growth only moves data upward inside the new packed region, so it never dirties it.
  cache.cached_tokens = new_len;
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
