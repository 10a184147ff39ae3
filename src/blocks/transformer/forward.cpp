// TransformerBlock's fast forward (docs/blocks.md §4.3): packed projections, the KV cache appended in place,
// attention over key tiles or spans on the thread pool, SwiGLU.
#include <algorithm>
#include <cstring>
#include <samebits/errors.hpp>
#include <vector>

#include "blocks/transformer/state.hpp"
#include "blocks/transformer/transformer.hpp"
#include "core/aligned_buffer.hpp"
#include "core/scratch.hpp"
#include "core/stage_clock.hpp"
#include "core/thread_pool.hpp"
#include "numerics/attention.hpp"
#include "numerics/block_ops.hpp"
#include "numerics/rmsnorm.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::blocks {

namespace {

// Query positions per attention task: enough tasks to balance threads, few enough to share key loads.
std::int64_t queries_per_task(std::int64_t length, std::int64_t group) {
  const std::int64_t rows_per_task = 64;
  return std::max<std::int64_t>(1, std::min(length, rows_per_task / std::max<std::int64_t>(group, 1)));
}

// Steps 10 and 12's tail: the projection's bias on each of its `rows` rows when the option adds one
// (docs/models.md §7), then the residual add out[i] = F(F(residual[i]) + F(projected[i])).
// Rows split over the pool (each cell is independent of the others).
void add_bias_and_residual(float* projected, const std::vector<float>* bias, const float* residual,
                           float* out, std::int64_t rows, std::int64_t dm) {
  parallel_for(
      rows,
      [&](std::int64_t begin, std::int64_t end) {
        if (bias != nullptr)
          for (std::int64_t t = begin; t < end; ++t)
            block_ops::bias_add(projected + t * dm, bias->data(), static_cast<std::size_t>(dm));
        block_ops::residual_add(residual + begin * dm, projected + begin * dm, out + begin * dm,
                                static_cast<std::size_t>((end - begin) * dm));
      },
      grain_for_work(rows, 3 * dm * static_cast<std::int64_t>(sizeof(float))));
}

}  // namespace

void TransformerBlock::norm_rows(const float* x, int which, float* y, std::int64_t rows) const {
  const float eps = options_.norm_eps;
  const std::int64_t dm = dims_.d_model;
  switch (options_.norm) {
    case NormKind::kRmsnorm:
      rmsnorm::rmsnorm(x, (which == 0 ? weights_.input_norm : weights_.post_norm).data(), y, rows, dm, eps);
      return;
    case NormKind::kRmsnormOffset:
      rmsnorm::rmsnorm(x, (which == 0 ? input_norm_offset_ : post_norm_offset_).data(), y, rows, dm, eps);
      return;
    case NormKind::kLayernorm: {
      const std::vector<float>& bias = which == 0 ? weights_.input_norm_bias : weights_.post_norm_bias;
      block_ops::layernorm(x, (which == 0 ? weights_.input_norm : weights_.post_norm).data(),
                           options_.norm_bias ? bias.data() : nullptr, y, rows, dm, eps);
      return;
    }
  }
}

void TransformerBlock::mlp_hidden(float* gate_up, float* hidden, std::int64_t rows) const {
  const std::int64_t it = dims_.intermediate;
  const bool gated = options_.gated();
  const std::int64_t width = gated ? 2 * it : it;
  const MlpKind kind = options_.mlp;
  const bool bias = options_.mlp_bias;
  parallel_for(
      rows,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
          float* gate = gate_up + t * width;  // ungated: the up row
          float* up = gated ? gate + it : gate;
          float* out = hidden + t * it;
          const auto n = static_cast<std::size_t>(it);
          if (bias) {  // docs/models.md §7: after the finished products, before the activation
            if (gated) block_ops::bias_add(gate, weights_.gate_bias.data(), n);
            block_ops::bias_add(up, weights_.up_bias.data(), n);
          }
          if (kind == MlpKind::kSwiglu && gated) {  // the activation and product in one pass
            block_ops::swiglu(gate, up, out, n);
            continue;
          }
          float* act = gated ? gate : out;
          vector_math::flush(gate, act, n);
          switch (kind) {
            case MlpKind::kSwiglu:
              vector_math::silu(act, act, n);
              break;
            case MlpKind::kGelu:
            case MlpKind::kGeglu:
              block_ops::gelu_erf(act, act, n);
              break;
            case MlpKind::kGeluTanh:
            case MlpKind::kGegluTanh:
              block_ops::gelu_tanh(act, act, n);
              break;
          }
          vector_math::flush(act, act, n);
          if (gated) block_ops::gated_product(gate, up, out, n);
        }
      },
      4);
}

void TransformerBlock::forward(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache,
                               float* y, const std::string& what, StateScan scan) const {
  if (x == nullptr) throw_value_error(what + ": x has no data");
  check_call(x, batch, length, cache, what, scan);
  const std::int64_t rows = batch * length;
  CallBuffers buffers(dims_, options_, rows);
  project_rows(x, rows, buffers);
  {
    const stage_clock::Scope timed(stage_clock::Stage::kAttention);  // a profile's split
    attend_segment(x, batch, length, cache, buffers.qkv.data(), buffers.ctx.data(), what, scan);
  }
  output_rows(x, rows, buffers, y);
}

void TransformerBlock::step_many(const float* x, std::int64_t count, KvCache* const* caches, float* y,
                                 const std::string& what, bool caches_checked) const {
  if (x == nullptr) throw_value_error(what + ": x has no data");
  const std::int64_t dm = dims_.d_model;
  // Every row's refusals before any row moves; a scan at append could refuse after earlier rows moved, so
  // an unchecked cache is scanned here.
  for (std::int64_t i = 0; i < count; ++i)
    check_call(x + i * dm, 1, 1, *caches[i], what, caches_checked ? StateScan::kDone : StateScan::kNow);
  CallBuffers buffers(dims_, options_, count);
  project_rows(x, count, buffers);
  const std::int64_t qkv_width = dims_.q_width() + 2 * dims_.kv_width();
  // The sequences side by side on the pool (a segment's own parallel regions then run serially on its
  // thread; nothing in a segment depends on the thread that runs it).
  parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      attend_segment(x + i * dm, 1, 1, *caches[i], buffers.qkv.data() + i * qkv_width,
                     buffers.ctx.data() + i * dims_.q_width(), what, StateScan::kDone);
  });
  output_rows(x, count, buffers, y);
}

TransformerBlock::CallBuffers::CallBuffers(const TransformerDims& d, const BlockOptions& o, std::int64_t rows)
    : normed(static_cast<std::size_t>(rows * d.d_model)),
      qkv(static_cast<std::size_t>(rows * (d.q_width() + 2 * d.kv_width()))),
      ctx(static_cast<std::size_t>(rows * d.q_width())),
      gate_up(static_cast<std::size_t>(rows * (o.gated() ? 2 : 1) * d.intermediate)) {}

void TransformerBlock::project_rows(const float* x, std::int64_t rows, CallBuffers& buffers) const {
  // Steps 1-2: input norm, the q/k/v projections in one product (a cell depends only on k, never on the
  // row count, so a row's bits are those of the row alone).
  norm_rows(x, 0, buffers.normed.data(), rows);
  gemm::gemm_packed({buffers.normed.data(), dims_.d_model, 1}, rows, qkv_, buffers.qkv.data());
}

void TransformerBlock::attend_segment(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache,
                                      float* qkv_rows, float* ctx_rows, const std::string& what,
                                      StateScan scan) const {
  const TransformerDims& d = dims_;
  const std::int64_t hd = d.head_dim, qw = d.q_width(), kw = d.kv_width();
  const std::int64_t rows = batch * length;
  const std::int64_t pos0 = cache.cached_tokens;
  const std::int64_t qkv_width = qw + 2 * kw;
  const std::shared_ptr<const rope::Table> table = rope_rows(pos0 + length);

  // Steps 3-4: per row the biases and q/k norms of the options (docs/models.md §7, §8) and RoPE on q, k.
  const BlockOptions& o = options_;
  const std::int64_t rd = o.rotary_dim(hd);
  const bool offset_norm = o.norm == NormKind::kRmsnormOffset;
  const float* q_norm = offset_norm ? q_norm_offset_.data() : weights_.q_norm.data();
  const float* k_norm = offset_norm ? k_norm_offset_.data() : weights_.k_norm.data();
  parallel_for(
      rows,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
          const std::int64_t position = pos0 + t % length;
          float* row = qkv_rows + t * qkv_width;
          if (o.qkv_bias) {
            block_ops::bias_add(row, weights_.q_bias.data(), static_cast<std::size_t>(qw));
            block_ops::bias_add(row + qw, weights_.k_bias.data(), static_cast<std::size_t>(kw));
            block_ops::bias_add(row + qw + kw, weights_.v_bias.data(), static_cast<std::size_t>(kw));
          }
          if (o.qk_norm) {
            rmsnorm::rmsnorm_serial(row, q_norm, row, d.n_heads, hd, o.norm_eps);
            rmsnorm::rmsnorm_serial(row + qw, k_norm, row + qw, d.n_kv_heads, hd, o.norm_eps);
          }
          rope::rotate_heads(row, d.n_heads, hd, rd, table->cos_row(position), table->sin_row(position));
          rope::rotate_heads(row + qw, d.n_kv_heads, hd, rd, table->cos_row(position),
                             table->sin_row(position));
        }
      },
      16);

  // Steps 6-9 for one (batch row, kv head) unit and one slice of its queries, over `keys` / `values`
  // laid out [B, KV, span, HD].
  const std::int64_t key_lo = d.window > 0 ? std::max<std::int64_t>(0, pos0 - d.window + 1) : 0;
  const std::int64_t span = pos0 + length - key_lo;
  const std::int64_t group = d.group();
  const std::int64_t per_task = queries_per_task(length, group);
  const std::int64_t slices = (length + per_task - 1) / per_task;
  const std::int64_t units = batch * d.n_kv_heads;
  const float* keys = nullptr;    // unit i's keys are rows [i * block_rows, i * block_rows + span)
  const float* values = nullptr;  // likewise
  std::int64_t block_rows = span;
  const float* key_tiles = nullptr;  // spread with key tiles: unit i's at i * tile_floats
  std::int64_t tile_floats = 0;
  auto attend_task = [&](std::int64_t task) {
    const std::int64_t unit_index = task / slices;
    const std::int64_t b = unit_index / d.n_kv_heads;
    const std::int64_t g = unit_index % d.n_kv_heads;
    attention::Unit unit;
    unit.q = qkv_rows + b * length * qkv_width + g * group * hd;
    unit.q_stride = qkv_width;
    unit.ctx = ctx_rows + b * length * qw + g * group * hd;
    unit.ctx_stride = qw;
    unit.queries = length;
    unit.heads = group;
    unit.keys = keys + unit_index * block_rows * hd;
    unit.values = values + unit_index * block_rows * hd;
    unit.span = span;
    unit.head_dim = hd;
    unit.key_lo = key_lo;
    unit.pos0 = pos0;
    unit.window = d.window;
    unit.finite_keys = pos0 - key_lo;  // the carried part was refused when non-finite
    unit.softcap = o.attn_softcap;
    if (key_tiles != nullptr) unit.key_tiles = key_tiles + unit_index * tile_floats;
    const std::int64_t first = (task % slices) * per_task;
    attention::attend(attention::query_slice(unit, first, std::min(per_task, length - first)));
  };

  // Step 5: the key span of every (batch row, kv head), then the cache append.
  const kv::NewRows fresh{qkv_rows + qw, qkv_rows + qw + kw, qkv_width, length};
  AlignedBuffer<float> span_keys, span_values;
  bool attended = false;
  if (d.window > 0) {
    span_keys.resize_uninitialized(static_cast<std::size_t>(batch * d.n_kv_heads * span * hd));
    span_values.resize_uninitialized(span_keys.size());
    kv::gather_window_span(cache, d, fresh, key_lo, span_keys.data(), span_values.data());
    kv::append_ring(cache, d, fresh);
    keys = span_keys.data();
    values = span_values.data();
  } else {
    // The packed region of (b, g) is then exactly its key span; a spread block starts its span.
    keys = cache.k;
    values = cache.v;
    if (cache.spread) {
      block_rows = cache.max_tokens;
      kv::append_spread(cache, d, fresh);
      key_tiles = cache.k_tiles;
      tile_floats = kv::key_tile_floats(cache.max_tokens, d.head_dim);
    } else if (scan != StateScan::kAtAppend || cache.trusted) {  // nothing to scan while moving
      kv::append_packed(cache, d, fresh);
    } else {
      // Each unit attends right after its block is restrided, while the block is still in cache, on
      // whichever thread moved it (the units are independent, so neither order nor thread changes a bit);
      // when the restride does not visit (a long call on several threads), the units run in parallel below.
      const kv::BlockVisitor visit = [&](std::int64_t block) {
        for (std::int64_t slice = 0; slice < slices; ++slice) attend_task(block * slices + slice);
      };
      if (!kv::append_packed_checked(cache, d, fresh, visit, attended)) {
        check_call(x, batch, length, cache, what, StateScan::kNow);  // names the first offender
        throw_runtime_error(what + ": the cache scans disagree");    // unreachable: both test the same bits
      }
    }
  }
  if (!attended) {
    // A task reads its unit's keys and values once per query of its slice: short spans run on fewer threads
    // (docs/performance.md §D).
    const std::int64_t task_bytes =
        2 * span * hd * static_cast<std::int64_t>(sizeof(float)) * per_task * group;
    parallel_for(
        units * slices,
        [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t task = begin; task < end; ++task) attend_task(task);
        },
        grain_for_work(units * slices, task_bytes));
  }
}

void TransformerBlock::output_rows(const float* x, std::int64_t rows, CallBuffers& buffers, float* y) const {
  const std::int64_t dm = dims_.d_model, qw = dims_.q_width(), it = dims_.intermediate;
  const BlockOptions& o = options_;
  // Step 10: the output projection and the first residual.
  scratch::Buffer residual(static_cast<std::size_t>(rows * dm));
  gemm::gemm_packed({buffers.ctx.data(), qw, 1}, rows, o_, residual.data());
  add_bias_and_residual(residual.data(), o.o_bias ? &weights_.o_bias : nullptr, x, residual.data(), rows, dm);

  // Steps 11-12: post-attention norm, the MLP (SwiGLU by default), down projection, second residual.
  norm_rows(residual.data(), 1, buffers.normed.data(), rows);
  gemm::gemm_packed({buffers.normed.data(), dm, 1}, rows, gate_up_, buffers.gate_up.data());
  scratch::Buffer hidden(static_cast<std::size_t>(rows * it));
  mlp_hidden(buffers.gate_up.data(), hidden.data(), rows);
  scratch::Buffer down(static_cast<std::size_t>(rows * dm));
  gemm::gemm_packed({hidden.data(), it, 1}, rows, down_, down.data());
  add_bias_and_residual(down.data(), o.mlp_bias ? &weights_.down_bias : nullptr, residual.data(), y, rows,
                        dm);
}

}  // namespace samebits::blocks
