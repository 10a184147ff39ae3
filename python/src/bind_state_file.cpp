// Binding of saved decode states (docs/formats.md §9): model fingerprints, save and load for every state kind
// (the Python classes call these from samebits/_state_file.py).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <samebits/causal_lm.hpp>
#include <samebits/errors.hpp>
#include <samebits/mamba.hpp>
#include <samebits/mamba3.hpp>
#include <samebits/samba.hpp>
#include <samebits/state_file.hpp>
#include <samebits/transformer.hpp>
#include <string>
#include <utility>

#include "bindings.hpp"

namespace nb = nanobind;

namespace samebits::python {
namespace {

// A block model and its state kind: fingerprint, save, load.
template <typename Model, typename State>
void bind_block(nb::module_& m) {
  m.def("model_fingerprint", [](const Model& model) { return model_fingerprint(model); });
  m.def(
      "save_state",
      [](const std::string& path, const Model& model, const State& state) {
        nb::gil_scoped_release release;
        save_state(path, model, state);
      },
      nb::arg("path"), nb::arg("model"), nb::arg("state"));
  m.def(
      "load_state",
      [](const std::string& path, const Model& model) {
        nb::gil_scoped_release release;
        return load_state(path, model);
      },
      nb::arg("path"), nb::arg("model"));
}

// A Samba stack's state travels as Python's per-layer list (a Mamba3StateEngine or TransformerStateEngine
// per layer, what SambaInference.allocate_layers gives): saved from copies of them, loaded into new ones.
void save_samba(const std::string& path, const SambaInference& model, std::int64_t batch_size,
                std::int64_t max_tokens, const nb::list& layers) {
  SambaState state(batch_size, max_tokens);
  for (nb::handle layer : layers) {
    if (nb::isinstance<Mamba3State>(layer))
      state.add_mamba3(nb::cast<const Mamba3State&>(layer).clone());
    else if (nb::isinstance<TransformerState>(layer))
      state.add_attention(nb::cast<const TransformerState&>(layer).clone());
    else
      throw_value_error("samebits saved state " + path +
                        ": a layer state is neither a Mamba3State nor a TransformerState");
  }
  nb::gil_scoped_release release;
  save_state(path, model, state);
}

nb::tuple load_samba(const std::string& path, const SambaInference& model) {
  SambaState state = [&] {
    nb::gil_scoped_release release;
    return load_state(path, model);
  }();
  nb::list layers;
  for (std::int64_t i = 0; i < state.layer_count(); ++i) {
    if (Mamba3State* mamba3 = state.mamba3(i))
      layers.append(nb::cast(std::move(*mamba3), nb::rv_policy::move));
    else
      layers.append(nb::cast(std::move(*state.attention(i)), nb::rv_policy::move));
  }
  return nb::make_tuple(state.batch_size(), state.max_tokens(), layers);
}

void bind_state_file(nb::module_& m) {
  bind_block<TransformerBlockInference, TransformerState>(m);
  bind_block<Mamba1BlockInference, Mamba1State>(m);
  bind_block<Mamba2BlockInference, Mamba2State>(m);
  bind_block<Mamba3BlockInference, Mamba3State>(m);
  bind_block<CausalLM, CausalLMState>(m);
  m.def("model_fingerprint", [](const SambaInference& model) { return model_fingerprint(model); });
  m.def("save_samba_state", &save_samba, nb::arg("path"), nb::arg("model"), nb::arg("batch_size"),
        nb::arg("max_tokens"), nb::arg("layers"));
  m.def("load_samba_state", &load_samba, nb::arg("path"), nb::arg("model"));
}

const Registration kRegistration{&bind_state_file, 90};

}  // namespace
}  // namespace samebits::python
