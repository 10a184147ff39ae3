// The Llama decoder block of docs/blocks.md §4 (profile mojolearn.identical.transformer.fp32.v1): RMSNorm,
// GQA attention with RoPE and a KV cache (full causal or a sliding window), residual, RMSNorm, SwiGLU,
// residual. One code path for the fresh prefill, the carried prefill and the decode step. The dims and
// the KV cache (the state) are in state.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "blocks/common/tensor_spec.hpp"
#include "blocks/transformer/options.hpp"
#include "blocks/transformer/state.hpp"
#include "core/aligned_buffer.hpp"
#include "core/scratch.hpp"
#include "numerics/gemm.hpp"
#include "numerics/rope.hpp"

namespace samebits::blocks {

// The nine tensors, in parameter order, with their shapes: the one table every check reads, and the one the
// Samba registry composes (in its wider integer, hence the template). q_width = n_heads * head_dim,
// kv_width = n_kv_heads * head_dim.
template <typename Dim>
std::vector<BasicTensorSpec<Dim>> transformer_tensor_table(Dim d_model, Dim q_width, Dim kv_width,
                                                           Dim intermediate) {
  return {{"input_layernorm.weight", {d_model}},         {"post_attention_layernorm.weight", {d_model}},
          {"q_proj.weight", {q_width, d_model}},         {"k_proj.weight", {kv_width, d_model}},
          {"v_proj.weight", {kv_width, d_model}},        {"o_proj.weight", {d_model, q_width}},
          {"gate_proj.weight", {intermediate, d_model}}, {"up_proj.weight", {intermediate, d_model}},
          {"down_proj.weight", {d_model, intermediate}}};
}
inline std::vector<TensorSpec> transformer_tensors(const TransformerDims& dims) {
  return transformer_tensor_table<std::int64_t>(dims.d_model, dims.q_width(), dims.kv_width(),
                                                dims.intermediate);
}

// Values in transformer_tensors order, each row-major in its shape; `gate` is empty for an ungated MLP
// (docs/models.md §2). Then the optional tensors of the options (empty when their option is off), in
// optional_tensor_names() order.
struct TransformerWeights {
  std::vector<float> input_norm, post_norm, q, k, v, o, gate, up, down;
  std::vector<float> q_bias, k_bias, v_bias, o_bias, input_norm_bias, post_norm_bias, up_bias, down_bias,
      gate_bias, q_norm, k_norm;
  // The optional tensor at `index` of optional_tensor_names() (0..10).
  std::vector<float>& optional(std::size_t index) {
    std::vector<float>* slots[] = {&q_bias,          &k_bias,         &v_bias,  &o_bias,
                                   &input_norm_bias, &post_norm_bias, &up_bias, &down_bias,
                                   &gate_bias,       &q_norm,         &k_norm};
    return *slots[index];
  }
  const std::vector<float>& optional(std::size_t index) const {
    return const_cast<TransformerWeights*>(this)->optional(index);
  }
};

// The four projection operands already packed (docs/gguf.md §14): a GGUF tensor's own codes from
// PackedRhs::from_ggml, each equal bit for bit to packing its exact float32 values.
struct TransformerProjections {
  gemm::PackedRhs qkv;      // [q_width + 2 kv_width, d_model]: q, k, v stacked
  gemm::PackedRhs o;        // [d_model, q_width]
  gemm::PackedRhs gate_up;  // [2 intermediate, d_model] gated, [intermediate, d_model] ungated
  gemm::PackedRhs down;     // [d_model, intermediate]
};

// Immutable after construction; calls may run concurrently. The seven projection matrices live only in
// their packed panels (each raw buffer is released as soon as it is packed); the two norm vectors stay.
class TransformerBlock {
 public:
  // `what` prefixes refusals ("samebits TransformerBlock"). Refuses (ValueError) dims the profile does
  // not admit and non-finite weights; weight sizes must already match transformer_tensors(dims).
  // `options` (docs/models.md §2) are validated against the dims; the default record is the default block.
  TransformerBlock(const TransformerDims& dims, TransformerWeights weights, const std::string& what,
                   const BlockOptions& options = {});
  // The same block over prebuilt projections: `weights` holds the norms and optional tensors only (its
  // projection slots empty); the operands' shapes are checked against the dims, their finiteness is their
  // builder's to check.
  TransformerBlock(const TransformerDims& dims, TransformerWeights weights, TransformerProjections packed,
                   const std::string& what, const BlockOptions& options = {});

  const TransformerDims& dims() const { return dims_; }
  const BlockOptions& options() const { return options_; }
  // Every weight as given, bit for bit, rebuilt from the packed panels (a fresh copy per call).
  TransformerWeights weights() const;
  // One weight in transformer_tensors order (0..8), rebuilt the same way (gate_proj: empty when ungated).
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
  // The scalar twin: docs/blocks.md §4.3 literally (gemm_reference, a per-call RoPE table, the oracle's cache
  // layout at stride max_tokens converted back to the packed layout); same refusals, same bits.
  void forward_reference(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache, float* y,
                         const std::string& what) const {
    forward_reference(x, batch, length, cache, y, what, StateScan::kNow);
  }
  void forward_reference(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache, float* y,
                         const std::string& what, StateScan scan) const;

  // One decode token for each of `count` independent sequences (docs/api.md §18): row i of x[count, d_model]
  // continues caches[i] (one row each, at its own position; distinct caches) and gives row i of y. The norms
  // and projections run over all rows at once (the weights are read once); RoPE, the cache append and
  // attention run per cache. The bits of row i are those of forward(x + i * d_model, 1, 1, *caches[i], ...).
  // Every row's refusals come before any cache moves (`caches_checked`: the caller already ran check_call
  // on each with x null and scan kNow, so only x is checked here).
  void step_many(const float* x, std::int64_t count, KvCache* const* caches, float* y,
                 const std::string& what, bool caches_checked = false) const;

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
  // A call's working rows: normed input, q/k/v, attention context, gate/up products.
  struct CallBuffers {
    CallBuffers(const TransformerDims& dims, const BlockOptions& options, std::int64_t rows);
    scratch::Buffer normed, qkv, ctx, gate_up;  // reused across a model call's layers
  };
  // The three phases of a call, shared by forward and step_many: steps 1-2 over every row (norm, q/k/v
  // product); steps 3-9 for one cache (biases, q/k norms, RoPE at the cache's positions, append,
  // attention) on its rows of qkv, writing their context rows; steps 10-12 over every row.
  void project_rows(const float* x, std::int64_t rows, CallBuffers& buffers) const;
  void attend_segment(const float* x, std::int64_t batch, std::int64_t length, KvCache& cache,
                      float* qkv_rows, float* ctx_rows, const std::string& what, StateScan scan) const;
  void output_rows(const float* x, std::int64_t rows, CallBuffers& buffers, float* y) const;
  // Step 1 / 11 under the block's norm (docs/models.md §6): `which` 0 = input, 1 = post-attention.
  void norm_rows(const float* x, int which, float* y, std::int64_t rows) const;
  // The MLP's hidden rows from the gate/up product (docs/models.md §10): activation, product when gated.
  void mlp_hidden(float* gate_up, float* hidden, std::int64_t rows) const;
  // Checks and prepares everything; packs the projections from weights_ unless `packed` brings them.
  void build(const std::string& what, TransformerProjections* packed);

  TransformerDims dims_;
  BlockOptions options_;
  TransformerWeights weights_;  // the norms and the optional tensors; the projections are empty
  // rmsnorm_offset: F(1 + F(w)) per element, for the norms and q/k norms (the fast path's weights).
  std::vector<float> input_norm_offset_, post_norm_offset_, q_norm_offset_, k_norm_offset_;
  std::vector<float> inverse_frequencies_;
  gemm::PackedRhs qkv_;      // [q_width + 2 kv_width, d_model]: q, k, v side by side
  gemm::PackedRhs o_;        // [d_model, q_width]
  gemm::PackedRhs gate_up_;  // [2 intermediate, d_model]: gate then up ([intermediate, d_model] ungated)
  gemm::PackedRhs down_;     // [d_model, intermediate]
  mutable std::mutex rope_mutex_;
  mutable std::shared_ptr<const rope::Table> rope_;
};

}  // namespace samebits::blocks
