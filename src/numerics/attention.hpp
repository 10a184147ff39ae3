// Causal / sliding-window attention of docs/blocks.md §4.3 steps 6-9 for one (batch row, kv head) unit:
// GEMM-cell scores (k = head_dim), the additive -FLT_MAX mask, the softmax and the serial value chain over
// the visible keys (docs/models.md §13). attend_reference is the literal twin; attend is the dispatched fast
// path (same bits).
#pragma once

#include <cstdint>

namespace samebits::attention {

// Positions per key tile (Unit::key_tiles).
inline constexpr std::int64_t kKeyTileWidth = 16;

// One unit: `queries` consecutive query positions, each read by `heads` query heads that share one kv
// head. Query row (i, h) (i < queries, h < heads) is the head_dim floats at
// q + i * q_stride + h * head_dim and its output goes to ctx + i * ctx_stride + h * head_dim.
// Key j (j < span) sits at absolute position key_lo + j; its key and value rows are keys + j * head_dim
// and values + j * head_dim. Query i sits at absolute position pos0 + i and sees the keys in
// [max(0, p - window + 1), p] (window 0: [0, p]); every other key is masked by adding -FLT_MAX.
struct Unit {
  const float* q = nullptr;
  std::int64_t q_stride = 0;
  float* ctx = nullptr;
  std::int64_t ctx_stride = 0;
  std::int64_t queries = 0;
  std::int64_t heads = 0;
  const float* keys = nullptr;
  const float* values = nullptr;
  std::int64_t span = 0;
  std::int64_t head_dim = 0;
  std::int64_t key_lo = 0;
  std::int64_t pos0 = 0;
  std::int64_t window = 0;
  // The first `finite_keys` keys and values are known finite (a carried cache the caller refused
  // non-finite values in); the fast path checks the rest itself.
  std::int64_t finite_keys = 0;
  // Optional: the same keys again in tiles of kKeyTileWidth positions, key j's element d at
  // key_tiles[(j / kKeyTileWidth) * head_dim * kKeyTileWidth + d * kKeyTileWidth + j % kKeyTileWidth]
  // for j < span (the rest of the last tile is never stored from). A decode row's scores then read their
  // operands lane-wise instead of transposing key rows in registers.
  const float* key_tiles = nullptr;
  // The attention softcap (docs/models.md §9): 0 = none, else a finite cap > 0 applied to each scaled
  // score before the mask: F(MUL(F(tanhf(F(DIV(score, cap)))), cap)).
  float softcap = 0.0f;
};

// scale = F(rsqrtf((float) head_dim)).
float score_scale(std::int64_t head_dim);

// Unit `u` restricted to the queries [first, first + count).
Unit query_slice(const Unit& u, std::int64_t first, std::int64_t count);

// The literal twin: per (head, query) row, scores through gemm_reference over all `span` keys, the mask,
// then the softmax and the serial value chain over the row's visible keys.
void attend_reference(const Unit& u);

// The fast path, single-threaded (callers split units and query slices over threads): scores and value
// chains vectorized across independent outputs, fully masked key runs skipped where that is provably
// inert, MXCSR-checked flush elision with an exact rerun. Equal to attend_reference bit for bit.
void attend(const Unit& u);

namespace detail {
// The twin restricted to the rows [row_begin, row_end) of u, row r = query (r / heads), head (r % heads).
// The fast kernels hand rows they cannot prove safe (a non-finite input or score) to it.
void attend_reference_rows(const Unit& u, std::int64_t row_begin, std::int64_t row_end);
// Per-target fast kernels (nullptr when not compiled in).
using AttendFn = void (*)(const Unit& u);
AttendFn attend_avx2();
AttendFn attend_avx512();
}  // namespace detail

}  // namespace samebits::attention
