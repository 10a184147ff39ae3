// The Samba stack (docs/api.md §7): embedding -> [Mamba-3 | attention]* -> final RMSNorm -> tied or untied
// head.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"
#include "models/samba_config.hpp"
#include "numerics/gemm.hpp"

namespace samebits::models {

// One layer's carried state, borrowed for a call: a Mamba-3 state or an attention KV cache.
struct SambaLayerState {
  blocks::Mamba3State* mamba3 = nullptr;
  blocks::KvCache* kv = nullptr;
};

// Immutable after construction; calls may run concurrently on separate states. Every projection matrix
// (and the head) is held once, as packed panels; only the small vectors (norms, biases) stay raw.
class SambaModel {
 public:
  // One float32 buffer per registry tensor, in registry order (docs/formats.md §1.6), already validated
  // (sizes by the registry, values finite). The buffers are taken over block by block and each raw projection
  // is released as soon as it is packed, so building costs the weights once plus one block's panels.
  SambaModel(SambaConfig config, std::vector<std::vector<float>> tensors);
  // The same from the flat vector in registry layout (split into per-tensor buffers first).
  SambaModel(SambaConfig config, std::vector<float> parameters);

  const SambaConfig& config() const { return config_; }
  const SambaRegistry& registry() const { return registry_; }
  // Every weight in registry layout, bit for bit as given, rebuilt from what the model holds (a fresh
  // flat copy per call: O(parameters) memory).
  std::vector<float> parameters() const;
  // One registry tensor (by registry index), rebuilt the same way.
  std::vector<float> tensor_copy(std::size_t index) const;
  std::int64_t layer_count() const { return static_cast<std::int64_t>(config_.layer_kinds().size()); }
  SambaLayerKind layer_kind(std::int64_t i) const {
    return config_.layer_kinds()[static_cast<std::size_t>(i)];
  }
  const blocks::TransformerBlock& attention(std::int64_t i) const;
  const blocks::Mamba3Block& mamba3(std::int64_t i) const;

  // logits[B, L, vocab] for ids[B, L] (each in [0, vocab), checked by the caller), continuing every
  // layer's state in place (one state per layer, in stack order). `what` names the public entry in
  // refusals raised by the blocks.
  void forward(const std::int32_t* ids, std::int64_t batch, std::int64_t length,
               std::vector<SambaLayerState>& states, float* logits, const std::string& what) const;
  // One decode token for each of `count` independent sequences (docs/api.md §18): ids[i] continues
  // sequences[i] (one one-row state per layer, each sequence at its own position, no state shared) into
  // logits row i [count, vocab]. Each layer's norms and projections run over all rows at once; row i's
  // bits are those of forward(ids + i, 1, 1, sequences[i], ...). Every sequence is checked before any
  // layer moves; when a layer refuses its input, every sequence is put back.
  void step_many(const std::int32_t* ids, std::int64_t count,
                 std::vector<std::vector<SambaLayerState>>& sequences, float* logits,
                 const std::string& what) const;
  // The scalar twin: every block's literal twin, reference embedding, norm and head GEMM.
  void forward_reference(const std::int32_t* ids, std::int64_t batch, std::int64_t length,
                         std::vector<SambaLayerState>& states, float* logits, const std::string& what) const;

 private:
  template <bool Reference>
  void run(const std::int32_t* ids, std::int64_t batch, std::int64_t length,
           std::vector<SambaLayerState>& states, float* logits, const std::string& what) const;
  // x[count, d_model] = F(embed.weight[ids[t]]) (docs/numerics.md §5), from the raw table or the tied head.
  void embed(const std::int32_t* ids, std::int64_t count, float* x) const;
  // The final RMSNorm (in place on x[rows, d_model]) and the head GEMM.
  void head(float* x, std::int64_t rows, float* logits) const;

  SambaConfig config_;
  SambaRegistry registry_;
  struct Layer {  // exactly one is set (blocks hold mutexes and packed panels: never moved)
    std::unique_ptr<blocks::Mamba3Block> mamba3;
    std::unique_ptr<blocks::TransformerBlock> attention;
  };
  std::vector<Layer> layers_;
  std::vector<float> embed_;   // [vocab, d_model] when untied; empty when tied (head_ holds the table)
  std::vector<float> norm_f_;  // [d_model]
  gemm::PackedRhs head_;       // [vocab, d_model]: embed.weight when tied, lm_head.weight otherwise
};

}  // namespace samebits::models
