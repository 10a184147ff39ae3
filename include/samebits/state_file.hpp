// Saved decode states (docs/formats.md §9): one versioned, checksummed file format for every state kind,
// bound to the model that made it by the model's fingerprint; and that fingerprint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <samebits/causal_lm.hpp>
#include <samebits/mamba.hpp>
#include <samebits/mamba3.hpp>
#include <samebits/samba.hpp>
#include <samebits/transformer.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace samebits {

// The models whose states can be saved, and their state kinds, in the same order (the file's kind number is
// the position here plus one).
using SavedStateModels = std::tuple<TransformerBlockInference, Mamba1BlockInference, Mamba2BlockInference,
                                    Mamba3BlockInference, SambaInference, CausalLM>;
using SavedStates =
    std::tuple<TransformerState, Mamba1State, Mamba2State, Mamba3State, SambaState, CausalLMState>;

namespace state_file_detail {
// The position of T in a tuple's types; a type that is not there does not compile.
template <typename T, typename Tuple>
struct IndexIn;
template <typename T, typename... Ts>
struct IndexIn<T, std::tuple<Ts...>> {
  static constexpr std::size_t value = [] {
    std::size_t i = 0;
    (void)((std::is_same_v<T, Ts> ? false : (++i, true)) && ...);
    return i;
  }();
  static_assert(value < sizeof...(Ts), "samebits: not a model with a saved state (see SavedStateModels)");
};
}  // namespace state_file_detail

// The state kind of a model: SavedStateOf<SambaInference> is SambaState.
template <typename Model>
using SavedStateOf =
    std::tuple_element_t<state_file_detail::IndexIn<Model, SavedStateModels>::value, SavedStates>;

// The model's fingerprint: SHA-256 (lowercase hex) of its kind, configuration, weight format and every
// tensor it computes with (optional ones included), by exact float32 value, so a GGUF model's packed and
// materialized twins share it. Computed on first use per loaded model and cached while the model lives.
template <typename Model>
std::string model_fingerprint(const Model& model);

// A state as the bytes of a saved-state file. The state is only read.
template <typename Model>
std::vector<std::uint8_t> state_bytes(const Model& model, const SavedStateOf<Model>& state);

// Writes state_bytes to `path` through a temporary sibling renamed into place (a reader never sees half a
// file). ValueError naming the path when the file cannot be written.
template <typename Model>
void save_state(const std::string& path, const Model& model, const SavedStateOf<Model>& state);

// A new state from saved bytes (`source` names them in messages). ValueError naming the source, the field
// and the problem for a truncated or altered file, another version or kind, another model's fingerprint,
// or shapes and counters the model cannot hold; sizes are checked against the bytes before anything is
// allocated, and nothing outside the returned state is touched.
template <typename Model>
SavedStateOf<Model> state_from_bytes(const std::vector<std::uint8_t>& bytes, const Model& model,
                                     const std::string& source);

// The same from a file (its path names it in messages).
template <typename Model>
SavedStateOf<Model> load_state(const std::string& path, const Model& model);

}  // namespace samebits
