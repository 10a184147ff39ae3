// TransformerState and the KvCacheState it holds: the KV cache's buffers and its layout policy (when to
// spread, trust, pack).
#include "api/transformer_state.hpp"

#include <algorithm>
#include <exception>
#include <samebits/errors.hpp>

#include "api/api_access.hpp"
#include "blocks/transformer/state.hpp"
#include "core/state_size.hpp"

namespace samebits {

KvCacheState::KvCacheState(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                           std::int64_t max_tokens, std::int64_t window)
    : batch_size_(batch_size),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      max_tokens_(max_tokens),
      window_(window) {
  allocate_state_buffers("TransformerState", {batch_size, n_kv_heads, capacity(), head_dim}, [&] {
    k_.owned.assign_zero(static_cast<std::size_t>(cache_floats()));
    v_.owned.assign_zero(static_cast<std::size_t>(cache_floats()));
  });
  trusted_ = window_ == 0;  // zeros are finite; a ring is scanned every call
}

KvCacheState KvCacheState::borrowing(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                                     std::int64_t max_tokens, std::int64_t window, float* k_cache,
                                     float* v_cache, std::int64_t cached_tokens) {
  if (k_cache == nullptr || v_cache == nullptr)
    throw_value_error("TransformerState: the state has no buffers");
  KvCacheState state;
  state.batch_size_ = batch_size;
  state.n_kv_heads_ = n_kv_heads;
  state.head_dim_ = head_dim;
  state.max_tokens_ = max_tokens;
  state.window_ = window;
  state.cached_tokens_ = cached_tokens;
  state.k_.borrowed = k_cache;
  state.v_.borrowed = v_cache;
  return state;  // never trusted, never spread: anyone may write the buffers between calls
}

KvCacheState KvCacheState::clone() const {
  KvCacheState copy(batch_size_, n_kv_heads_, head_dim_, max_tokens_, window_);
  copy.cached_tokens_ = cached_tokens_;
  const auto floats = static_cast<std::size_t>(cache_floats());
  std::copy(k_.data(), k_.data() + floats, copy.k_.owned.data());
  std::copy(v_.data(), v_.data() + floats, copy.v_.owned.data());
  if (spread_) copy.k_tiles_ = k_tiles_.clone();
  copy.spread_ = spread_;
  copy.trusted_ = trusted();  // the copy's contents are what was vouched for, unless pinned or borrowed
  return copy;
}

blocks::KvCache KvCacheState::cache_view() const {
  blocks::KvCache cache{k_.data(), v_.data(), batch_size_, max_tokens_, cached_tokens_};
  cache.spread = spread_;
  return cache;
}

blocks::TransformerDims KvCacheState::cache_dims() const {
  blocks::TransformerDims dims;  // what the layout moves read: the block count, the row length, the ring
  dims.n_kv_heads = n_kv_heads_;
  dims.head_dim = head_dim_;
  dims.window = window_;
  return dims;
}

void KvCacheState::pack() {
  if (!spread_) return;
  blocks::KvCache cache = cache_view();
  blocks::kv::pack_spread(cache, cache_dims());
  spread_ = false;
}

std::vector<float> KvCacheState::packed_copy(const Buffer& buffer) const {
  std::vector<float> copy(buffer.data(), buffer.data() + cache_floats());
  if (spread_) {
    // pack() on a copy; pack_spread moves two buffers, so the second is a scratch twin of the first.
    std::vector<float> twin(copy);
    blocks::KvCache cache{copy.data(), twin.data(), batch_size_, max_tokens_, cached_tokens_};
    cache.spread = true;
    blocks::kv::pack_spread(cache, cache_dims());
  }
  return copy;
}

void KvCacheState::set_cached_tokens(std::int64_t value) {
  pack();
  trusted_ = false;
  cached_tokens_ = value;
}

void KvCacheState::roll_back(std::int64_t count) {
  if (count < 0 || count > cached_tokens_)
    throw_runtime_error("samebits TransformerState: a roll-back to " + std::to_string(count) +
                        " positions from " + std::to_string(cached_tokens_));
  // A ring's slot is its position mod window and the spread layout strides by max_tokens: neither moves.
  if (window_ == 0 && !spread_ && count < cached_tokens_) {
    const std::int64_t blocks = batch_size_ * n_kv_heads_;
    for (float* data : {k_.data(), v_.data()})
      for (std::int64_t i = 1; i < blocks; ++i)  // block i moves down from i * S_old to i * S_new rows
        std::copy(data + i * cached_tokens_ * head_dim_, data + (i * cached_tokens_ + count) * head_dim_,
                  data + i * count * head_dim_);
  }
  cached_tokens_ = count;
}

KvCacheState::Pin KvCacheState::pin(Buffer& buffer) {
  pack();
  trusted_ = false;  // what is written through it is scanned by the next call after the last pin
  return Pin(pins_, buffer.data(), cache_floats());
}

std::int64_t KvCacheState::held_tokens() const {
  return window_ > 0 ? std::min(cached_tokens_, window_) : cached_tokens_;
}

std::vector<float> KvCacheState::used_region(const float* buffer) const {
  const std::int64_t held = held_tokens();
  const std::int64_t heads = batch_size_ * n_kv_heads_;
  std::vector<float> out(static_cast<std::size_t>(heads * held * head_dim_));
  if (window_ <= 0) {
    // Packed: one run; spread: each block from its own place.
    const std::int64_t stride = spread_ ? max_tokens_ : held;
    for (std::int64_t head = 0; head < heads; ++head)
      std::copy(buffer + head * stride * head_dim_, buffer + (head * stride + held) * head_dim_,
                out.begin() + head * held * head_dim_);
    return out;
  }
  for (std::int64_t head = 0; head < heads; ++head)
    for (std::int64_t j = 0; j < held; ++j) {
      const std::int64_t slot = (cached_tokens_ - held + j) % window_;
      std::copy(buffer + (head * window_ + slot) * head_dim_,
                buffer + (head * window_ + slot + 1) * head_dim_,
                out.begin() + (head * held + j) * head_dim_);
    }
  return out;
}

std::vector<float> KvCacheState::keys() const { return used_region(k_.data()); }
std::vector<float> KvCacheState::values() const { return used_region(v_.data()); }

// ------------------------------------------------------------------ the engine's access

KvCacheState::EngineAccess::EngineAccess(KvCacheState& state, bool reference)
    : state_(state), reference_(reference), exceptions_(std::uncaught_exceptions()) {
  private_ = state.owned() && state.pins_ == 0 && !reference && state.window_ == 0;
  if (!private_) {
    state.pack();  // what a pin, a borrower or the twin sees
  } else if (!state.spread_ && state.trusted_ && state.cached_tokens_ >= 0 &&
             state.cached_tokens_ <= state.max_tokens_) {
    blocks::KvCache cache = state.cache_view();
    blocks::kv::spread_packed(cache, state.cache_dims());
    state.spread_ = true;
    blocks::kv::make_key_tiles(cache, state.cache_dims(), state.k_tiles_);  // empty if refused: rows read
  }
  cache_ = state.cache_view();
  cache_.spread = state.spread_ && state.window_ == 0;
  cache_.trusted = state.trusted_ && private_;
  cache_.k_tiles = cache_.spread && state.k_tiles_.size() > 0 ? state.k_tiles_.data() : nullptr;
  pos0_ = cache_.cached_tokens;
}

KvCacheState::EngineAccess::~EngineAccess() {
  if (std::uncaught_exceptions() > exceptions_) return;  // a refused call changed nothing
  state_.cached_tokens_ = cache_.cached_tokens;
  // Every carried value was scanned or vouched for; the rows this call wrote are checked here. The twin
  // ends the trust, as a caller's write does.
  state_.trusted_ = private_ && !reference_ && blocks::kv::rows_finite(cache_, state_.cache_dims(), pos0_);
}

// ---- TransformerState: the public handle, one owned KvCacheState

TransformerState::TransformerState(std::unique_ptr<KvCacheState> impl) : impl_(std::move(impl)) {}
TransformerState::TransformerState(std::int64_t batch_size, std::int64_t n_kv_heads, std::int64_t head_dim,
                                   std::int64_t max_tokens, std::int64_t window)
    : impl_(std::make_unique<KvCacheState>(batch_size, n_kv_heads, head_dim, max_tokens, window)) {}
TransformerState TransformerState::borrowing(std::int64_t batch_size, std::int64_t n_kv_heads,
                                             std::int64_t head_dim, std::int64_t max_tokens,
                                             std::int64_t window, float* k_cache, float* v_cache,
                                             std::int64_t cached_tokens) {
  return TransformerState(std::make_unique<KvCacheState>(KvCacheState::borrowing(
      batch_size, n_kv_heads, head_dim, max_tokens, window, k_cache, v_cache, cached_tokens)));
}
TransformerState::TransformerState(TransformerState&&) noexcept = default;
TransformerState& TransformerState::operator=(TransformerState&&) noexcept = default;
TransformerState::~TransformerState() = default;
TransformerState TransformerState::clone() const {
  return TransformerState(std::make_unique<KvCacheState>(impl_->clone()));
}

std::int64_t TransformerState::batch_size() const { return impl_->batch_size(); }
std::int64_t TransformerState::n_kv_heads() const { return impl_->n_kv_heads(); }
std::int64_t TransformerState::head_dim() const { return impl_->head_dim(); }
std::int64_t TransformerState::max_tokens() const { return impl_->max_tokens(); }
std::int64_t TransformerState::window() const { return impl_->window(); }
std::int64_t TransformerState::capacity() const { return impl_->capacity(); }
std::int64_t TransformerState::cache_floats() const { return impl_->cache_floats(); }
std::int64_t TransformerState::cached_tokens() const { return impl_->cached_tokens(); }
void TransformerState::set_cached_tokens(std::int64_t value) { impl_->set_cached_tokens(value); }
std::int64_t TransformerState::held_tokens() const { return impl_->held_tokens(); }
std::vector<float> TransformerState::k_cache_copy() const { return impl_->k_cache_copy(); }
std::vector<float> TransformerState::v_cache_copy() const { return impl_->v_cache_copy(); }
std::vector<float> TransformerState::keys() const { return impl_->keys(); }
std::vector<float> TransformerState::values() const { return impl_->values(); }
TransformerState::Pin TransformerState::pin_k_cache() { return impl_->pin_k_cache(); }
TransformerState::Pin TransformerState::pin_v_cache() { return impl_->pin_v_cache(); }
bool TransformerState::spread() const { return impl_->spread(); }
bool TransformerState::pinned() const { return impl_->pinned(); }
bool TransformerState::trusted() const { return impl_->trusted(); }

}  // namespace samebits
