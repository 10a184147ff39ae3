// KvCacheState (docs/api.md §3): the Transformer block's KV cache, the one owner of its buffers and of
// their layout policy (packed / spread, key tiles, trust, exposure).
#pragma once

#include <cstdint>
#include <samebits/pin.hpp>
#include <samebits/transformer.hpp>
#include <vector>

#include "blocks/transformer/transformer.hpp"
#include "core/aligned_buffer.hpp"

namespace samebits {

// The decode state (docs/blocks.md §4.2): k_cache / v_cache of batch * n_kv * capacity * head_dim floats
// (capacity = window if window > 0 else max_tokens). Everything outside the engine sees the packed layout:
// full causal, the first batch * n_kv * cached_tokens * head_dim floats are the [B, KV, S, HD] cache and
// the rest is capacity; a window keeps a ring of W slots per (batch row, kv head), slot = position mod W.
//
// An owned state (zeros at allocation) that nobody has pinned and that only the engine has written since
// it was last checked is kept in the engine's spread layout, where a decode step appends its row without
// moving the cache, and skips its O(cache) non-finite scan. A pin packs it first and holds it packed and
// untrusted while alive. A borrowed state (caller buffers) is always packed and scanned by every call.
class KvCacheState {
 public:
  // Zeros for batch_size sequences (refused, as a ValueError, past the allocation bound).
  KvCacheState(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
               std::int64_t max_tokens, std::int64_t window);
  // A state over caller buffers of cache_floats() floats each, read and written in place; the caller keeps
  // them alive and may write them between calls.
  static KvCacheState borrowing(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                                std::int64_t max_tokens, std::int64_t window, float* k_cache, float* v_cache,
                                std::int64_t cached_tokens);
  KvCacheState(KvCacheState&&) noexcept = default;
  KvCacheState& operator=(KvCacheState&&) noexcept = default;
  // An independent owned state with the same contents (and, unless pinned or borrowed, layout and trust).
  KvCacheState clone() const;

  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t n_kv_heads() const { return n_kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t window() const { return window_; }
  std::int64_t capacity() const { return window_ > 0 ? window_ : max_tokens_; }
  std::int64_t cache_floats() const { return batch_size_ * n_kv_heads_ * capacity() * head_dim_; }
  // Absolute positions consumed. Setting it packs the cache and ends the trust (read at the new count).
  std::int64_t cached_tokens() const { return cached_tokens_; }
  void set_cached_tokens(std::int64_t value);
  // Drops the positions past `count` (<= cached_tokens), the first `count` kept as a reader of `count`
  // positions finds them: a packed full-causal cache moves its rows to the shorter stride (a bare
  // set_cached_tokens would reread them at it). Layout and trust stay: the kept rows are unchanged.
  void roll_back(std::int64_t count);
  // Positions held: cached_tokens, or for a window the min(cached_tokens, window) most recent.
  std::int64_t held_tokens() const;

  // Read-only copies in the packed layout: the whole buffers, and the used region as
  // [batch, n_kv, held, head_dim] (a window's positions oldest first).
  std::vector<float> k_cache_copy() const { return packed_copy(k_); }
  std::vector<float> v_cache_copy() const { return packed_copy(v_); }
  std::vector<float> keys() const;
  std::vector<float> values() const;

  // A writable view of one whole buffer in the packed layout. While any pin is alive the state stays
  // packed and every call scans it; what was written through a pin is scanned by the next call after.
  using Pin = BufferPin;
  Pin pin_k_cache() { return pin(k_); }
  Pin pin_v_cache() { return pin(v_); }

  // Diagnostics (tests): whether the buffers are in the spread layout, whether a pin is alive, and whether
  // the next call may skip its scan.
  bool spread() const { return spread_; }
  bool pinned() const { return pins_ > 0; }
  bool trusted() const { return trusted_ && pins_ == 0 && owned(); }

  // The one way a call reaches the cache (RAII): puts the state in the layout the call uses (spread while
  // owned, unpinned and trusted; packed for the scalar twin) and hands out the cache with its trust. When
  // the call returns, the destructor commits cached_tokens and the trust the state may keep (owned,
  // unpinned, full causal, not the twin, every appended row finite); a call that throws commits nothing.
  class EngineAccess {
   public:
    EngineAccess(KvCacheState& state, bool reference);
    EngineAccess(const EngineAccess&) = delete;
    EngineAccess& operator=(const EngineAccess&) = delete;
    ~EngineAccess();
    blocks::KvCache& cache() { return cache_; }

   private:
    KvCacheState& state_;
    blocks::KvCache cache_;
    std::int64_t pos0_;
    bool reference_;
    bool private_;
    int exceptions_;
  };

 private:
  // The buffers: owned (AlignedBuffer) or borrowed (raw pointers of the caller's memory).
  struct Buffer {
    AlignedBuffer<float> owned;
    float* borrowed = nullptr;
    float* data() const { return borrowed != nullptr ? borrowed : const_cast<float*>(owned.data()); }
  };
  KvCacheState() = default;
  bool owned() const { return k_.borrowed == nullptr; }
  Pin pin(Buffer& buffer);
  std::vector<float> used_region(const float* buffer) const;
  void pack();  // spread -> packed (no-op when packed)
  std::vector<float> packed_copy(const Buffer& buffer) const;
  blocks::KvCache cache_view() const;
  blocks::TransformerDims cache_dims() const;

  std::int64_t batch_size_ = 0, n_kv_heads_ = 0, head_dim_ = 0, max_tokens_ = 0, window_ = 0;
  std::int64_t cached_tokens_ = 0;
  Buffer k_, v_;
  // While spread: the key tiles, kept equal to the spread keys by every engine call (a decode row's
  // scores read them without transposing). Allocated on first spread; empty if the system refused.
  AlignedBuffer<float> k_tiles_;
  bool spread_ = false;
  bool trusted_ = false;
  std::int64_t pins_ = 0;
};

}  // namespace samebits
