// CausalLM (docs/models.md §17-§19): a language model over a Hugging Face checkpoint directory (llama /
// smollm, mistral, qwen2, qwen3, phi3, mamba, mamba2) or a GGUF file (docs/gguf.md §10): embedding -> blocks
// -> final RMSNorm -> head, its decode state, and greedy or sampled generation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <samebits/mamba.hpp>
#include <samebits/sampler.hpp>
#include <samebits/tensor.hpp>
#include <samebits/transformer.hpp>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

class CausalLM;
struct CausalLMModel;  // what a CausalLM holds (opaque here)
struct ApiAccess;

// One sequence batch's decode state (docs/models.md §18): one block state per layer, in stack order, and the
// positions consumed. It belongs to the model that allocated it.
class CausalLMState {
 public:
  CausalLMState(CausalLMState&&) noexcept;
  CausalLMState& operator=(CausalLMState&&) noexcept;
  ~CausalLMState();
  // An independent copy (same owner); continuing it gives the bits the original would.
  CausalLMState clone() const;

  std::int64_t batch_size() const;
  std::int64_t max_tokens() const;
  std::int64_t layers() const;
  std::int64_t positions() const;
  // Layer i's state, read-only: the one of the layer's kind, nullptr for the others.
  const TransformerState* transformer(std::int64_t i) const;
  const Mamba1State* mamba1(std::int64_t i) const;
  const Mamba2State* mamba2(std::int64_t i) const;
  // Whether `model` allocated this state.
  bool belongs_to(const CausalLM& model) const;
  // Writable layer states and the position count, for restoring a saved state (docs/formats.md §9); the
  // next call checks whatever was written.
  TransformerState* transformer(std::int64_t i);
  Mamba1State* mamba1(std::int64_t i);
  Mamba2State* mamba2(std::int64_t i);
  void set_positions(std::int64_t positions);

 private:
  friend class CausalLM;
  struct Impl;
  explicit CausalLMState(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// How generate chooses and when it stops (docs/models.md §19).
struct GenerateOptions {
  // true: upstream's argmax loop (ties to the lowest id); false: the shared sampler with `sampling`.
  bool greedy = true;
  // The sampler's options; row b draws with seed sampling.seed + b and penalizes its own prompt and picks.
  SamplerOptions sampling;
  // A row ends once it has produced one of these ids (kept as its last token); later positions hold -1.
  std::vector<std::int32_t> stop_ids;
};

// One named tensor copied out of a model: name, shape, float32 values.
struct NamedTensorCopy {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

class CausalLM {
 public:
  // Loads the directory `path` (config.json + safetensors) or a GGUF file (llama, qwen2, qwen3, phi3;
  // docs/gguf.md §10, loader "samebits" only): weight_format "float32", "bfloat16" or "int8";
  // max_positions as the transformer's position ceiling (default min(max_position_embeddings, 8192));
  // loader "samebits" (the checkpoint as its config defines it) or "mojolearn" (upstream's quirks).
  static CausalLM load(const std::string& path, const std::string& weight_format = "float32",
                       std::optional<std::int64_t> max_positions = std::nullopt,
                       const std::string& loader = "samebits");

  // Stateless logits (B, L, vocab) for ids (B, L): transformer layers on a fresh cache of L positions.
  std::vector<float> forward(const IdsView& ids) const;
  // Carried: continues `state` by L positions (every state check before any kernel runs).
  std::vector<float> forward(const IdsView& ids, CausalLMState& state) const;
  // One token per row (ids (B, 1)): logits (B, vocab).
  std::vector<float> step(const IdsView& ids, CausalLMState& state) const;
  // One token for each of N independent sequences (docs/api.md §18): ids[i] continues states[i], a one-row
  // state at its own position -> (N, vocab) logits, row i bit for bit step({ids[i]}, *states[i]). Every
  // layer's norms and projections run over all N rows at once (the weights are read once). Every state is
  // checked (step's refusals; a state listed twice is refused) before any kernel runs; when a layer
  // refuses, every state is put back.
  std::vector<float> step_many(const std::vector<std::int32_t>& ids,
                               const std::vector<CausalLMState*>& states) const;
  // Zero state for batch_size rows and up to max_tokens positions (both >= 1; <= max_positions).
  CausalLMState allocate_state(std::int64_t batch_size, std::int64_t max_tokens) const;
  // New zero layer states of the same shape, positions 0 (the state must be this model's).
  CausalLMState& reset_state(CausalLMState& state) const;
  // Greedy decoding (docs/models.md §19): (B, L + max_new_tokens) int32, row-major.
  std::vector<std::int32_t> generate(const IdsView& ids, std::int64_t max_new_tokens) const;
  // Greedy or sampled decoding with stop ids: (B, L + m) int32, row-major, m <= max_new_tokens the most any
  // row produced (exactly max_new_tokens without stop ids); a row that stopped early is padded with -1.
  std::vector<std::int32_t> generate(const IdsView& ids, std::int64_t max_new_tokens,
                                     const GenerateOptions& options) const;

  // Embedding, final norm, head (untied) and every block's base weights, by checkpoint name, as the model
  // holds them (materialized float32); phi3's split rows are put back into their fused tensors.
  std::vector<NamedTensorCopy> parameters() const;
  // Checkpoint tensors the plan does not read (sorted).
  const std::vector<std::string>& unused_names() const;

  const std::string& model_type() const;
  // "transformer", "mamba1" or "mamba2".
  const std::string& kind() const;
  const std::string& weight_format() const;
  const std::string& loader() const;
  std::int64_t d_model() const;
  std::int64_t vocab_size() const;
  std::int64_t n_layers() const;
  bool tie_embeddings() const;
  // The final norm's eps as the config gives it (a double).
  double norm_eps() const;
  // The position ceiling (none for a Mamba model loaded without one).
  std::optional<std::int64_t> max_positions() const;
  // Layer i's block: the one of the layer's kind, nullptr for the others.
  const TransformerBlockInference* transformer_block(std::int64_t i) const;
  const Mamba1BlockInference* mamba1_block(std::int64_t i) const;
  const Mamba2BlockInference* mamba2_block(std::int64_t i) const;
  // "CausalLM(model_type='llama', layers=2, d_model=32, vocab=64, weight_format='float32', device='cpu')".
  std::string repr() const;

 private:
  friend class CausalLMState;
  friend struct ApiAccess;
  explicit CausalLM(std::shared_ptr<const CausalLMModel> model);
  std::vector<float> run(const IdsView& ids, CausalLMState* state, bool step, const std::string& what) const;
  void check_state(const CausalLMState& state, std::int64_t batch, std::int64_t length,
                   const std::string& what) const;

  std::shared_ptr<const CausalLMModel> model_;
};

}  // namespace samebits
