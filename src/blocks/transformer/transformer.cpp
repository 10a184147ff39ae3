// TransformerBlock: construction, call refusals and the cached RoPE rows (docs/blocks.md §4).
#include "blocks/transformer/transformer.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <samebits/errors.hpp>
#include <sstream>
#include <utility>

#include "blocks/common/block_support.hpp"
#include "blocks/transformer/state.hpp"
#include "core/aligned_buffer.hpp"
#include "core/thread_pool.hpp"
#include "numerics/attention.hpp"
#include "numerics/fp.hpp"
#include "numerics/rmsnorm.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::blocks {

using fp::F;
using fp::MUL;

namespace {

// Releases a raw buffer for good (clear() alone keeps the capacity).
void release(std::vector<float>& buffer) { std::vector<float>().swap(buffer); }

// [a; b; c] stacked as rows of one [n, k] matrix, packed; each part is released once it is copied, so the
// transient cost is one stacked copy, never the parts and the copy and the panels at once.
gemm::PackedRhs pack_stacked(std::int64_t k, std::initializer_list<std::vector<float>*> parts) {
  std::size_t total = 0;
  for (const std::vector<float>* part : parts) total += part->size();
  std::vector<float> stacked;
  stacked.reserve(total);
  for (std::vector<float>* part : parts) {
    stacked.insert(stacked.end(), part->begin(), part->end());
    release(*part);
  }
  return gemm::PackedRhs::from_transposed(stacked.data(), static_cast<std::int64_t>(total) / k, k,
                                          Placement::kWeightPool);
}

std::string float_text(float value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

TransformerBlock::TransformerBlock(const TransformerDims& dims, TransformerWeights weights,
                                   const std::string& what, const BlockOptions& options)
    : dims_(dims), options_(options), weights_(std::move(weights)) {
  build(what, nullptr);
}

TransformerBlock::TransformerBlock(const TransformerDims& dims, TransformerWeights weights,
                                   TransformerProjections packed, const std::string& what,
                                   const BlockOptions& options)
    : dims_(dims), options_(options), weights_(std::move(weights)) {
  build(what, &packed);
}

void TransformerBlock::build(const std::string& what, TransformerProjections* packed) {
  const auto& d = dims_;
  if (d.d_model <= 0) throw_value_error(what + ": d_model must be positive");
  if (d.n_heads <= 0 || d.n_kv_heads <= 0) throw_value_error(what + ": head counts must be positive");
  if (d.head_dim <= 0) throw_value_error(what + ": head_dim must be positive");
  if (d.intermediate <= 0) throw_value_error(what + ": intermediate_size must be positive");
  if (d.d_model != d.n_heads * d.head_dim)
    throw_value_error(what + ": d_model " + std::to_string(d.d_model) +
                      " != n_heads * head_dim = " + std::to_string(d.n_heads * d.head_dim) + " REFUSED");
  if (d.n_heads % d.n_kv_heads != 0)
    throw_value_error(what + ": n_heads " + std::to_string(d.n_heads) + " not divisible by n_kv_heads " +
                      std::to_string(d.n_kv_heads) +
                      " REFUSED (query head h reads kv head h // (n_heads / n_kv_heads))");
  if (d.head_dim % 2 != 0)
    throw_value_error(what + ": head_dim " + std::to_string(d.head_dim) +
                      " is odd; RoPE pairs column j with j + head_dim/2 REFUSED");
  if (d.window < 0) throw_value_error(what + ": window must be >= 0 (0 = full causal)");
  options_.validate(d.head_dim, what);
  const bool gated = options_.gated();
  const std::vector<const std::vector<float>*> values{
      &weights_.input_norm, &weights_.post_norm, &weights_.q,  &weights_.k,   &weights_.v,
      &weights_.o,          &weights_.gate,      &weights_.up, &weights_.down};
  const auto tensors = transformer_tensors(d);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::int64_t want = 1;
    for (auto extent : tensors[i].shape) want *= extent;
    if (i == 6 && !gated) want = 0;             // an ungated MLP has no gate_proj (docs/models.md §2)
    if (packed != nullptr && i >= 2) want = 0;  // the projections come packed (checked below)
    if (static_cast<std::int64_t>(values[i]->size()) != want)
      throw_value_error(what + ": " + tensors[i].name + " has " + std::to_string(values[i]->size()) +
                        " elements and the config wants " + std::to_string(want) + " REFUSED");
  }
  const auto optional =
      optional_tensors(options_, d.d_model, d.q_width(), d.kv_width(), d.intermediate, d.head_dim);
  for (std::size_t i = 0; i < optional.size(); ++i) {
    const auto have = static_cast<std::int64_t>(weights_.optional(i).size());
    if (optional[i].on && have != optional[i].length)
      throw_value_error(what + ": " + optional[i].name + " is required by its option and has " +
                        std::to_string(have) + " elements where the config wants " +
                        std::to_string(optional[i].length) + " REFUSED");
    if (!optional[i].on && have != 0)
      throw_value_error(
          what + ": " + optional[i].name + " is present (" + std::to_string(have) +
          " elements) but its option is off REFUSED (a silently ignored tensor is a wrong model)");
  }
  for (std::size_t i = 0; i < tensors.size(); ++i)
    refuse_non_finite(values[i]->data(), static_cast<std::int64_t>(values[i]->size()), what, tensors[i].name);
  for (std::size_t i = 0; i < optional.size(); ++i)
    refuse_non_finite(weights_.optional(i).data(), static_cast<std::int64_t>(weights_.optional(i).size()),
                      what, optional[i].name);

  // rmsnorm_offset's weights, F(1 + F(w)), once (docs/models.md §6); the twin forms them at use.
  if (options_.norm == NormKind::kRmsnormOffset) {
    auto offset = [](const std::vector<float>& w) {
      std::vector<float> out(w.size());
      for (std::size_t j = 0; j < w.size(); ++j) out[j] = F(1.0f + F(w[j]));
      return out;
    };
    input_norm_offset_ = offset(weights_.input_norm);
    post_norm_offset_ = offset(weights_.post_norm);
    q_norm_offset_ = offset(weights_.q_norm);
    k_norm_offset_ = offset(weights_.k_norm);
  }
  inverse_frequencies_ =
      rope::inverse_frequencies(options_.rotary_dim(d.head_dim), options_.rope_theta, options_.rope_scaling);
  if (packed != nullptr) {
    const std::int64_t gate_up_rows = (gated ? 2 : 1) * d.intermediate;
    const std::pair<const gemm::PackedRhs*, std::array<std::int64_t, 2>> shapes[] = {
        {&packed->qkv, {d.q_width() + 2 * d.kv_width(), d.d_model}},
        {&packed->o, {d.d_model, d.q_width()}},
        {&packed->gate_up, {gate_up_rows, d.d_model}},
        {&packed->down, {d.d_model, d.intermediate}}};
    const char* names[] = {"the stacked q/k/v operand", "o_proj", "the stacked gate/up operand", "down_proj"};
    for (std::size_t i = 0; i < 4; ++i)
      if (shapes[i].first->n() != shapes[i].second[0] || shapes[i].first->k() != shapes[i].second[1])
        throw_value_error(what + ": " + names[i] + " is packed as [" + std::to_string(shapes[i].first->n()) +
                          ", " + std::to_string(shapes[i].first->k()) + "] and the config wants [" +
                          std::to_string(shapes[i].second[0]) + ", " + std::to_string(shapes[i].second[1]) +
                          "] REFUSED");
    qkv_ = std::move(packed->qkv);
    o_ = std::move(packed->o);
    gate_up_ = std::move(packed->gate_up);
    down_ = std::move(packed->down);
    return;
  }
  qkv_ = pack_stacked(d.d_model, {&weights_.q, &weights_.k, &weights_.v});
  o_ = gemm::PackedRhs::from_transposed(weights_.o.data(), d.d_model, d.q_width(), Placement::kWeightPool);
  release(weights_.o);
  gate_up_ = gated ? pack_stacked(d.d_model, {&weights_.gate, &weights_.up})
                   : pack_stacked(d.d_model, {&weights_.up});
  down_ = gemm::PackedRhs::from_transposed(weights_.down.data(), d.d_model, d.intermediate,
                                           Placement::kWeightPool);
  release(weights_.down);
}

std::vector<float> TransformerBlock::weight(std::size_t index) const {
  const TransformerDims& d = dims_;
  // (panels, first row, rows) of each projection inside its packed matrix.
  auto rows_of = [](const gemm::PackedRhs& packed, std::int64_t first, std::int64_t count) {
    std::vector<float> out(static_cast<std::size_t>(count * packed.k()));
    packed.unpack_transposed(first, count, out.data());
    return out;
  };
  switch (index) {
    case 0:
      return weights_.input_norm;
    case 1:
      return weights_.post_norm;
    case 2:
      return rows_of(qkv_, 0, d.q_width());
    case 3:
      return rows_of(qkv_, d.q_width(), d.kv_width());
    case 4:
      return rows_of(qkv_, d.q_width() + d.kv_width(), d.kv_width());
    case 5:
      return o_.unpack_transposed();
    case 6:
      return options_.gated() ? rows_of(gate_up_, 0, d.intermediate) : std::vector<float>();
    case 7:
      return rows_of(gate_up_, options_.gated() ? d.intermediate : 0, d.intermediate);
    case 8:
      return down_.unpack_transposed();
    default:
      throw_value_error("TransformerBlock: no weight index " + std::to_string(index));
  }
}

TransformerWeights TransformerBlock::weights() const {
  TransformerWeights w;
  std::size_t index = 0;
  for (std::vector<float>* t : {&w.input_norm, &w.post_norm, &w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down})
    *t = weight(index++);
  for (std::size_t i = 0; i < optional_tensor_names().size(); ++i) w.optional(i) = weights_.optional(i);
  return w;
}

std::shared_ptr<const rope::Table> TransformerBlock::rope_rows(std::int64_t positions) const {
  std::lock_guard<std::mutex> lock(rope_mutex_);
  if (!rope_ || rope_->positions() < positions) {
    // Grow geometrically so a decode loop rebuilds the table O(log n) times.
    std::int64_t grown = rope_ ? rope_->positions() * 2 : 64;
    grown = std::min(std::max(grown, positions), std::max(positions, options_.max_positions));
    rope_ = std::make_shared<const rope::Table>(rope::Table::build(inverse_frequencies_, grown));
  }
  return rope_;
}

void TransformerBlock::check_call(const float* x, std::int64_t batch, std::int64_t length,
                                  const KvCache& cache, const std::string& what, StateScan scan) const {
  if (batch <= 0 || length <= 0) throw_value_error(what + ": B and L must be positive");
  if (cache.batch != batch)
    throw_value_error(what + ": the cache holds " + std::to_string(cache.batch) +
                      " rows but x has B = " + std::to_string(batch));
  if (cache.max_tokens <= 0) throw_value_error(what + ": max_tokens must be positive");
  if (cache.cached_tokens < 0 || cache.cached_tokens > cache.max_tokens)
    throw_value_error(what + ": cached_tokens must be in [0, " + std::to_string(cache.max_tokens) +
                      "] (the cache capacity, max_tokens), got " + std::to_string(cache.cached_tokens) +
                      "; the state and its buffers disagree");
  // The RoPE table is sized for max_tokens positions (docs/blocks.md §9.5).
  // docs/models.md §4: the declared ceiling (8192 at the default), then the sin/cos domain.
  const std::int64_t max_positions = options_.max_positions;
  if (cache.max_tokens > max_positions)
    throw_value_error(what + ": a rotary table of " + std::to_string(cache.max_tokens) +
                      " positions (max_tokens) exceeds max_positions " + std::to_string(max_positions) +
                      " REFUSED (absolute positions must stay inside the sin/cos domain)");
  const rope::LargestAngle worst = rope::largest_angle(inverse_frequencies_, cache.max_tokens);
  if (worst.angle >= rope::kAngleDomain)
    throw_value_error(what + ": a rotary table of " + std::to_string(cache.max_tokens) +
                      " positions puts the RoPE angle at column " + std::to_string(worst.column) + " at " +
                      float_text(worst.angle) + ", at or beyond the sin/cos domain (8192.0) REFUSED");
  // A vectorized pass first; the scalar one names the first offender only when there is one.
  if (x != nullptr) refuse_if_non_finite(x, batch * length * dims_.d_model, what, "x");
  const std::int64_t needed = cache.cached_tokens + length;
  const bool overflows = needed > cache.max_tokens || needed > max_positions;
  // A trusted cache is known finite; a spread one has no restride to fold its scan into.
  const bool scan_now = scan == StateScan::kNow ||
                        (scan == StateScan::kAtAppend && (dims_.window > 0 || overflows || cache.spread));
  if (scan_now && !(cache.trusted && dims_.window == 0)) kv::refuse_non_finite_state(cache, dims_, what);
  if (needed > cache.max_tokens)
    throw_value_error(what + ": this call would use " + std::to_string(needed) +
                      " KV slots and the cache holds " + std::to_string(cache.max_tokens) + " REFUSED");
  if (needed > max_positions)
    throw_value_error(what + ": absolute position " + std::to_string(needed - 1) +
                      " is at or beyond max_positions " + std::to_string(max_positions));
}

}  // namespace samebits::blocks
