// The scalar twin of TransformerBlock::forward: docs/blocks.md §4.3 step by step, with the oracle's own cache
// layout (stride max_tokens, or the ring) converted from and back to the caller's packed layout.
#include <samebits/errors.hpp>
#include <vector>

#include "blocks/transformer/transformer.hpp"
#include "numerics/attention.hpp"
#include "numerics/block_ops.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "numerics/primitives.hpp"
#include "numerics/rmsnorm.hpp"
#include "numerics/rope.hpp"

namespace samebits::blocks {

using fp::F;
using fp::MUL;

namespace {

std::vector<float> linear(const std::vector<float>& a, const std::vector<float>& w, std::int64_t m,
                          std::int64_t n, std::int64_t k) {
  std::vector<float> out(static_cast<std::size_t>(m * n));
  gemm::gemm_reference(gemm::Orientation::NT, a.data(), w.data(), out.data(), m, n, k);
  return out;
}

// docs/models.md §7: each row of `y` (m rows of width n) plus the bias, one plain add per cell.
void add_bias(std::vector<float>& y, const std::vector<float>& b, std::int64_t m, std::int64_t n) {
  for (std::int64_t t = 0; t < m; ++t)
    block_ops::bias_add_reference(y.data() + t * n, b.data(), static_cast<std::size_t>(n));
}

// docs/models.md §6: rmsnorm, rmsnorm_offset (the weight F(1 + F(w_j)) formed at use) or layernorm (with its
// bias when given), over `rows` rows of width d.
void norm_reference(NormKind kind, const float* x, const std::vector<float>& w, const std::vector<float>& b,
                    float* y, std::int64_t rows, std::int64_t d, float eps) {
  switch (kind) {
    case NormKind::kRmsnorm:
      rmsnorm::rmsnorm_reference(x, w.data(), y, rows, d, eps);
      return;
    case NormKind::kRmsnormOffset: {
      std::vector<float> offset(w.size());
      for (std::size_t j = 0; j < w.size(); ++j) offset[j] = F(1.0f + F(w[j]));
      rmsnorm::rmsnorm_reference(x, offset.data(), y, rows, d, eps);
      return;
    }
    case NormKind::kLayernorm:
      block_ops::layernorm_reference(x, w.data(), b.empty() ? nullptr : b.data(), y, rows, d, eps);
      return;
  }
}

// docs/models.md §10: the MLP's activation.
float activation(MlpKind kind, float x) {
  switch (kind) {
    case MlpKind::kSwiglu:
      return primitives::silu(x);
    case MlpKind::kGelu:
    case MlpKind::kGeglu:
      return block_ops::gelu_erf(x);
    case MlpKind::kGeluTanh:
    case MlpKind::kGegluTanh:
      return block_ops::gelu_tanh(x);
  }
  return x;
}

}  // namespace

void TransformerBlock::forward_reference(const float* x_in, std::int64_t batch, std::int64_t length,
                                         KvCache& cache, float* y, const std::string& what,
                                         StateScan scan) const {
  if (x_in == nullptr) throw_value_error(what + ": x has no data");
  // The twin is spec-literal: the packed layout only (owners pack before they call it).
  if (cache.spread) throw_runtime_error(what + ": the scalar twin reads a packed cache, got a spread one");
  check_call(x_in, batch, length, cache, what, scan == StateScan::kDone ? StateScan::kDone : StateScan::kNow);
  const TransformerDims& d = dims_;
  const TransformerWeights weights = this->weights();  // the raw matrices, rebuilt for this call
  const std::int64_t dm = d.d_model, hd = d.head_dim, qw = d.q_width(), kw = d.kv_width(),
                     it = d.intermediate;
  const std::int64_t nkv = d.n_kv_heads, m = batch * length;
  const std::int64_t pos0 = cache.cached_tokens, s_abs = pos0 + length;
  const std::int64_t ring = d.window > 0 ? d.window : cache.max_tokens;
  auto slot = [&](std::int64_t b, std::int64_t g, std::int64_t position) {
    return ((b * nkv + g) * ring + (d.window > 0 ? position % d.window : position)) * hd;
  };

  // The caller's cache in the oracle layout.
  const std::int64_t cache_floats = batch * nkv * ring * hd;
  std::vector<float> k_cache(static_cast<std::size_t>(cache_floats), 0.0f), v_cache(k_cache);
  if (d.window > 0) {
    k_cache.assign(cache.k, cache.k + cache_floats);
    v_cache.assign(cache.v, cache.v + cache_floats);
  } else {
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t g = 0; g < nkv; ++g)
        for (std::int64_t j = 0; j < pos0; ++j)
          for (std::int64_t e = 0; e < hd; ++e) {
            k_cache[slot(b, g, j) + e] = cache.k[((b * nkv + g) * pos0 + j) * hd + e];
            v_cache[slot(b, g, j) + e] = cache.v[((b * nkv + g) * pos0 + j) * hd + e];
          }
  }
  // Step 3's table, built per call for max_tokens positions (docs/models.md §3-§5 under the options).
  const BlockOptions& o = options_;
  const std::int64_t rd = o.rotary_dim(hd);
  const rope::Table table = rope::Table::build_reference(
      rope::inverse_frequencies(rd, o.rope_theta, o.rope_scaling), cache.max_tokens);

  // Steps 1-4, with the biases and q/k norms of docs/models.md §11 between the products and RoPE.
  const std::vector<float> x(x_in, x_in + m * dm);
  std::vector<float> n1(static_cast<std::size_t>(m * dm));
  norm_reference(o.norm, x.data(), weights.input_norm, weights.input_norm_bias, n1.data(), m, dm, o.norm_eps);
  std::vector<float> q = linear(n1, weights.q, m, qw, dm);
  std::vector<float> k = linear(n1, weights.k, m, kw, dm);
  std::vector<float> v = linear(n1, weights.v, m, kw, dm);
  if (o.qkv_bias) {
    add_bias(q, weights.q_bias, m, qw);
    add_bias(k, weights.k_bias, m, kw);
    add_bias(v, weights.v_bias, m, kw);
  }
  if (o.qk_norm) {  // every head vector, the block's RMS form (never layernorm), no bias
    const NormKind kind = o.norm == NormKind::kRmsnormOffset ? NormKind::kRmsnormOffset : NormKind::kRmsnorm;
    norm_reference(kind, q.data(), weights.q_norm, {}, q.data(), m * d.n_heads, hd, o.norm_eps);
    norm_reference(kind, k.data(), weights.k_norm, {}, k.data(), m * nkv, hd, o.norm_eps);
  }
  for (std::int64_t t = 0; t < m; ++t) {
    const std::int64_t position = pos0 + t % length;
    rope::rotate_heads(q.data() + t * qw, d.n_heads, hd, rd, table.cos_row(position),
                       table.sin_row(position));
    rope::rotate_heads(k.data() + t * kw, nkv, hd, rd, table.cos_row(position), table.sin_row(position));
  }

  // Step 5: the key span (gathered before the append), then the append in position order.
  const std::int64_t key_lo = d.window > 0 && pos0 - d.window + 1 > 0 ? pos0 - d.window + 1 : 0;
  const std::int64_t s = s_abs - key_lo;
  std::vector<float> span_k(static_cast<std::size_t>(batch * nkv * s * hd)), span_v(span_k.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t g = 0; g < nkv; ++g)
      for (std::int64_t j = 0; j < s; ++j)
        for (std::int64_t e = 0; e < hd; ++e) {
          const std::int64_t position = key_lo + j;
          const std::size_t dst = static_cast<std::size_t>(((b * nkv + g) * s + j) * hd + e);
          if (position < pos0) {
            span_k[dst] = k_cache[slot(b, g, position) + e];
            span_v[dst] = v_cache[slot(b, g, position) + e];
          } else {
            const std::int64_t src = (b * length + position - pos0) * kw + g * hd + e;
            span_k[dst] = k[src];
            span_v[dst] = v[src];
          }
        }
  for (std::int64_t t = 0; t < m; ++t)
    for (std::int64_t g = 0; g < nkv; ++g)
      for (std::int64_t e = 0; e < hd; ++e) {
        const std::int64_t dst = slot(t / length, g, pos0 + t % length) + e;
        k_cache[dst] = k[t * kw + g * hd + e];
        v_cache[dst] = v[t * kw + g * hd + e];
      }

  // Steps 6-9, one (batch row, kv head) at a time through the attention twin.
  std::vector<float> ctx(static_cast<std::size_t>(m * qw));
  const std::int64_t group = d.group();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t g = 0; g < nkv; ++g) {
      attention::Unit unit;
      unit.q = q.data() + b * length * qw + g * group * hd;
      unit.q_stride = qw;
      unit.ctx = ctx.data() + b * length * qw + g * group * hd;
      unit.ctx_stride = qw;
      unit.queries = length;
      unit.heads = group;
      unit.keys = span_k.data() + (b * nkv + g) * s * hd;
      unit.values = span_v.data() + (b * nkv + g) * s * hd;
      unit.span = s;
      unit.head_dim = hd;
      unit.key_lo = key_lo;
      unit.pos0 = pos0;
      unit.window = d.window;
      unit.softcap = o.attn_softcap;
      attention::attend_reference(unit);
    }

  // Steps 10-12.
  std::vector<float> out = linear(ctx, weights.o, m, dm, qw);
  if (o.o_bias) add_bias(out, weights.o_bias, m, dm);
  std::vector<float> r1(static_cast<std::size_t>(m * dm));
  for (std::int64_t i = 0; i < m * dm; ++i) r1[i] = F(F(x[i]) + F(out[i]));
  std::vector<float> n2(static_cast<std::size_t>(m * dm));
  norm_reference(o.norm, r1.data(), weights.post_norm, weights.post_norm_bias, n2.data(), m, dm, o.norm_eps);
  std::vector<float> up = linear(n2, weights.up, m, it, dm);
  if (o.mlp_bias) add_bias(up, weights.up_bias, m, it);
  std::vector<float> mlp(static_cast<std::size_t>(m * it));
  if (o.gated()) {
    std::vector<float> gate = linear(n2, weights.gate, m, it, dm);
    if (o.mlp_bias) add_bias(gate, weights.gate_bias, m, it);
    for (std::int64_t i = 0; i < m * it; ++i) {
      const float act = F(activation(o.mlp, F(gate[i])));
      mlp[i] = F(MUL(F(act), F(up[i])));
    }
  } else {
    for (std::int64_t i = 0; i < m * it; ++i) mlp[i] = F(activation(o.mlp, F(up[i])));
  }
  std::vector<float> down = linear(mlp, weights.down, m, dm, it);
  if (o.mlp_bias) add_bias(down, weights.down_bias, m, dm);
  for (std::int64_t i = 0; i < m * dm; ++i) y[i] = F(F(r1[i]) + F(down[i]));

  // Step 13 and the write-back in the caller's layout (full causal: packed at the new stride; the capacity
  // after it is not state and is left as it was).
  if (d.window > 0) {
    for (std::int64_t i = 0; i < cache_floats; ++i) {
      cache.k[i] = k_cache[static_cast<std::size_t>(i)];
      cache.v[i] = v_cache[static_cast<std::size_t>(i)];
    }
  } else {
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t g = 0; g < nkv; ++g)
        for (std::int64_t j = 0; j < s_abs; ++j)
          for (std::int64_t e = 0; e < hd; ++e) {
            cache.k[((b * nkv + g) * s_abs + j) * hd + e] = k_cache[slot(b, g, j) + e];
            cache.v[((b * nkv + g) * s_abs + j) * hd + e] = v_cache[slot(b, g, j) + e];
          }
  }
  cache.cached_tokens = s_abs;
}

}  // namespace samebits::blocks
