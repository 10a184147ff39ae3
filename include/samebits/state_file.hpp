// Saved decode states (docs/formats.md §9): one versioned, checksummed file format for every state kind,
// bound to the model that made it by the model's fingerprint; and that fingerprint.
#pragma once

#include <cstdint>
#include <samebits/causal_lm.hpp>
#include <samebits/mamba.hpp>
#include <samebits/mamba3.hpp>
#include <samebits/samba.hpp>
#include <samebits/transformer.hpp>
#include <string>
#include <vector>

namespace samebits {

// The model's fingerprint: SHA-256 (lowercase hex) of its kind, configuration, weight format and every
// weight's name, shape and bits. Computed on first use per loaded model and cached while the model lives.
std::string model_fingerprint(const TransformerBlockInference& model);
std::string model_fingerprint(const Mamba1BlockInference& model);
std::string model_fingerprint(const Mamba2BlockInference& model);
std::string model_fingerprint(const Mamba3BlockInference& model);
std::string model_fingerprint(const SambaInference& model);
std::string model_fingerprint(const CausalLM& model);

// A state as the bytes of a saved-state file. The state is only read.
std::vector<std::uint8_t> state_bytes(const TransformerBlockInference& model, const TransformerState& state);
std::vector<std::uint8_t> state_bytes(const Mamba1BlockInference& model, const Mamba1State& state);
std::vector<std::uint8_t> state_bytes(const Mamba2BlockInference& model, const Mamba2State& state);
std::vector<std::uint8_t> state_bytes(const Mamba3BlockInference& model, const Mamba3State& state);
std::vector<std::uint8_t> state_bytes(const SambaInference& model, const SambaState& state);
std::vector<std::uint8_t> state_bytes(const CausalLM& model, const CausalLMState& state);

// Writes state_bytes to `path` through a temporary sibling renamed into place (a reader never sees half a
// file). ValueError naming the path when the file cannot be written.
void save_state(const std::string& path, const TransformerBlockInference& model,
                const TransformerState& state);
void save_state(const std::string& path, const Mamba1BlockInference& model, const Mamba1State& state);
void save_state(const std::string& path, const Mamba2BlockInference& model, const Mamba2State& state);
void save_state(const std::string& path, const Mamba3BlockInference& model, const Mamba3State& state);
void save_state(const std::string& path, const SambaInference& model, const SambaState& state);
void save_state(const std::string& path, const CausalLM& model, const CausalLMState& state);

// A new state from saved bytes (`source` names them in messages). ValueError naming the source, the field
// and the problem for a truncated or altered file, another version or kind, another model's fingerprint,
// or shapes and counters the model cannot hold; sizes are checked against the bytes before anything is
// allocated, and nothing outside the returned state is touched.
TransformerState transformer_state_from_bytes(const std::vector<std::uint8_t>& bytes,
                                              const TransformerBlockInference& model,
                                              const std::string& source);
Mamba1State mamba1_state_from_bytes(const std::vector<std::uint8_t>& bytes, const Mamba1BlockInference& model,
                                    const std::string& source);
Mamba2State mamba2_state_from_bytes(const std::vector<std::uint8_t>& bytes, const Mamba2BlockInference& model,
                                    const std::string& source);
Mamba3State mamba3_state_from_bytes(const std::vector<std::uint8_t>& bytes, const Mamba3BlockInference& model,
                                    const std::string& source);
SambaState samba_state_from_bytes(const std::vector<std::uint8_t>& bytes, const SambaInference& model,
                                  const std::string& source);
CausalLMState causal_lm_state_from_bytes(const std::vector<std::uint8_t>& bytes, const CausalLM& model,
                                         const std::string& source);

// The same from a file (its path names it in messages).
TransformerState load_state(const std::string& path, const TransformerBlockInference& model);
Mamba1State load_state(const std::string& path, const Mamba1BlockInference& model);
Mamba2State load_state(const std::string& path, const Mamba2BlockInference& model);
Mamba3State load_state(const std::string& path, const Mamba3BlockInference& model);
SambaState load_state(const std::string& path, const SambaInference& model);
CausalLMState load_state(const std::string& path, const CausalLM& model);

}  // namespace samebits
