// Attention twin (docs/blocks.md §4.3 steps 6-9, one row at a time, literally) and the fast-path dispatch.
#include "numerics/attention.hpp"

#include <limits>
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::attention {

using fp::DIV;
using fp::F;
using fp::FMA;
using fp::MUL;

namespace {
// The additive mask of a hidden key: -FLT_MAX, finite, never -inf.
constexpr std::uint32_t kMaskFillBits = 0xFF7FFFFFu;
}  // namespace

float score_scale(std::int64_t head_dim) { return F(primitives::rsqrtf(static_cast<float>(head_dim))); }

Unit query_slice(const Unit& u, std::int64_t first, std::int64_t count) {
  Unit slice = u;
  slice.q = u.q + first * u.q_stride;
  slice.ctx = u.ctx + first * u.ctx_stride;
  slice.pos0 = u.pos0 + first;
  slice.queries = count;
  return slice;
}

namespace detail {

void attend_reference_rows(const Unit& u, std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t s = u.span;
  const std::int64_t hd = u.head_dim;
  const float scale = score_scale(hd);
  const float mask_fill = fp::from_bits(kMaskFillBits);
  std::vector<float> row(static_cast<std::size_t>(s));  // dots, then masked scores, e, weights
  std::vector<char> visible(static_cast<std::size_t>(s));  // step 7's mask, kept for steps 8-9
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const std::int64_t i = r / u.heads;
    const std::int64_t h = r % u.heads;
    const std::int64_t p = u.pos0 + i;
    const float* q = u.q + i * u.q_stride + h * hd;
    float* out = u.ctx + i * u.ctx_stride + h * hd;
    // Step 6: one GEMM_NT cell per key (k = head_dim), then the scale applied to the finished dot.
    gemm::gemm_reference(gemm::Orientation::NT, q, u.keys, row.data(), 1, s, hd);
    for (std::int64_t j = 0; j < s; ++j) {
      float score = F(MUL(F(row[j]), scale));
      if (u.softcap > 0.0f) {  // docs/models.md §9: divide, tanh, multiply, before the mask
        const float cap = F(u.softcap);
        const float th = F(primitives::tanhf(F(DIV(score, cap))));
        score = F(MUL(th, cap));
      }
      // Step 7: an add, never a select (+0.0 turns a -0.0 score into +0.0).
      const std::int64_t key = u.key_lo + j;
      const bool hidden = key > p || (u.window > 0 && key <= p - u.window);
      row[j] = F(F(score) + (hidden ? mask_fill : 0.0f));
      visible[static_cast<std::size_t>(j)] = !hidden;
    }
    // Step 8 over the visible keys only (docs/models.md §13): their maximum, exp and denominator; +0.0 is
    // written for a hidden key's exp and weight. (Every query sees its own position.)
    float mx = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < s; ++j)
      if (visible[static_cast<std::size_t>(j)]) mx = primitives::fmax(mx, row[j]);
    mx = F(mx);
    for (std::int64_t j = 0; j < s; ++j)
      row[j] = visible[static_cast<std::size_t>(j)] ? F(primitives::expf(F(F(row[j]) - F(mx)))) : 0.0f;
    float acc = 0.0f;
    for (std::int64_t j = 0; j < s; ++j)
      if (visible[static_cast<std::size_t>(j)]) acc = F(F(acc) + F(row[j]));
    const float den = F(acc);
    for (std::int64_t j = 0; j < s; ++j)
      row[j] = visible[static_cast<std::size_t>(j)] ? F(DIV(F(row[j]), den)) : 0.0f;
    // Step 9: a serial chain over the visible keys per output column (not a GEMM: no leaves).
    for (std::int64_t d = 0; d < hd; ++d) {
      float chain = 0.0f;
      for (std::int64_t j = 0; j < s; ++j)
        if (visible[static_cast<std::size_t>(j)]) chain = F(FMA(F(row[j]), F(u.values[j * hd + d]), chain));
      out[d] = chain;
    }
  }
}

}  // namespace detail

void attend_reference(const Unit& u) { detail::attend_reference_rows(u, 0, u.queries * u.heads); }

void attend(const Unit& u) {
  // Up to 4 rows (a decode step's query heads per kv head) run with the keys across the lanes, where 16
  // lanes take twice the keys per chain step; 5 to 8 rows may prefer a narrower row block.
  const simd::KernelTable& kernels = simd::kernels();
  const std::int64_t rows = u.queries * u.heads;
  const detail::AttendFn kernel = rows > 4 && rows <= 8 ? kernels.attend_5_to_8_rows : kernels.attend;
  if (kernel == nullptr) {
    attend_reference(u);
    return;
  }
  kernel(u);
}

}  // namespace samebits::attention
