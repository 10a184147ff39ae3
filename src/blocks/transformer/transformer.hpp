// The Llama decoder block of blocks.md 4 (profile mojolearn.identical.transformer.fp32.v1): RMSNorm,
// GQA attention with RoPE and a KV cache (full causal or a sliding window), residual, RMSNorm, SwiGLU,
// residual. One code path for the fresh prefill, the carried prefill and the decode step.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "numerics/gemm.hpp"
#include "numerics/rope.hpp"

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

// Profile constants (blocks.md 4.1): RMSNorm eps 1e-6 (0x358637BD), RoPE theta 10000 (0x461C4000),
// absolute positions bounded by max_positions 8192 (the sin/cos domain).
inline constexpr float kTransformerNormEps = 1e-6f;
inline constexpr float kRopeTheta = 10000.0f;
inline constexpr std::int64_t kMaxPositions = 8192;

// The nine tensors, in parameter order, with their shapes for `dims`.
struct TransformerTensor {
  const char* name;
  std::vector<std::int64_t> shape;
};
std::vector<TransformerTensor> transformer_tensors(const TransformerDims& dims);

// Values in transformer_tensors order, each row-major in its shape.
struct TransformerWeights {
  std::vector<float> input_norm, post_norm, q, k, v, o, gate, up, down;
};

// The caller-owned KV cache (blocks.md 4.2): two flat float32 buffers of batch * n_kv * capacity *
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

// When a call scans its cache for non-finite contents (blocks.md 4.3 refuses them before any arithmetic):
// kNow in check_call; kAtAppend while the full-causal cache is restrided, one read of the cache instead
// of two (a refusal is then raised after the projections but before anything is written, with the same
// message); kDone when the caller already scanned it for this call (a Samba stack checks every layer
// before any layer moves). A windowed cache (a ring, never restrided) is scanned as kNow.
enum class StateScan { kNow, kAtAppend, kDone };

// Immutable after construction; calls may run concurrently. The seven projection matrices live only in
// their packed panels (each raw buffer is released as soon as it is packed); the two norm vectors stay.
class TransformerBlock {
 public:
  // `what` prefixes refusals ("samebits TransformerBlock"). Refuses (ValueError) dims the profile does
  // not admit and non-finite weights; weight sizes must already match transformer_tensors(dims).
  TransformerBlock(const TransformerDims& dims, TransformerWeights weights, const std::string& what);

  const TransformerDims& dims() const { return dims_; }
  // Every weight as given, bit for bit, rebuilt from the packed panels (a fresh copy per call).
  TransformerWeights weights() const;
  // One weight in transformer_tensors order (0..8), rebuilt the same way.
  std::vector<float> weight(std::size_t index) const;

  // y[B, L, d_model] for x[B, L, d_model], reading and updating `cache` (cached_tokens advances by L).
  // Refuses (ValueError, prefixed by `what`) a cache outside its bounds, a table beyond max_positions,
  // non-finite x or cache contents and a call that would overflow the cache, before any arithmetic.
  void forward(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache, float* y,
               const std::string& what) const {
    forward(x, batch, length, cache, y, what, StateScan::kAtAppend);
  }
  // `scan`: when the O(cache) finiteness scan happens (StateScan); x and the bounds are always checked.
  void forward(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache, float* y,
               const std::string& what, StateScan scan) const;
  // The scalar twin: blocks.md 4.3 literally (gemm_reference, a per-call RoPE table, the oracle's cache
  // layout at stride max_tokens converted back to the packed layout); same refusals, same bits.
  void forward_reference(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache, float* y,
                         const std::string& what) const {
    forward_reference(x, batch, length, cache, y, what, StateScan::kNow);
  }
  void forward_reference(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache, float* y,
                         const std::string& what, StateScan scan) const;

  // Every refusal of a call, in order, without touching the cache: B/L, the cache bounds and the rotary
  // table, non-finite x (skipped when x is null), non-finite cache contents, overflow. The contents are
  // scanned for kNow, not for kDone, and for kAtAppend only when a later refusal here would otherwise
  // be raised first.
  void check_call(const float* x, std::int64_t batch, std::int64_t length, const KvCache& cache,
                  const std::string& what, StateScan scan = StateScan::kNow) const;

  // The RoPE table rows for positions [0, positions), grown on demand and shared; entries depend only on
  // the position, so they are the per-call table's bits (tested).
  std::shared_ptr<const rope::Table> rope_rows(std::int64_t positions) const;

 private:
  TransformerDims dims_;
  TransformerWeights weights_;  // input_norm and post_norm only; the projections are empty
  std::vector<float> inverse_frequencies_;
  gemm::PackedRhs qkv_;      // [q_width + 2 kv_width, d_model]: q, k, v side by side
  gemm::PackedRhs o_;        // [d_model, q_width]
  gemm::PackedRhs gate_up_;  // [2 intermediate, d_model]: gate then up
  gemm::PackedRhs down_;     // [d_model, intermediate]
  mutable std::mutex rope_mutex_;
  mutable std::shared_ptr<const rope::Table> rope_;
};

}  // namespace samebits::blocks
