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
#include <tuple>
#include <utility>

#include "bindings.hpp"
#include "samba_convert.hpp"

namespace nb = nanobind;

namespace samebits::python {
namespace {

// A model and its state kind: fingerprint, save, load.
template <typename Model>
void bind_model(nb::module_& m) {
  m.def("model_fingerprint", [](const Model& model) { return model_fingerprint(model); });
  m.def(
      "save_state",
      [](const std::string& path, const Model& model, const SavedStateOf<Model>& state) {
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

template <typename... Models>
void bind_models(nb::module_& m, std::tuple<Models...>*) {
  (bind_model<Models>(m), ...);
}

// A Samba stack's state travels as Python's per-layer list (what SambaInference.allocate_layers gives): saved
// from copies of the layers, loaded into new ones.
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
  const std::int64_t batch_size = state.batch_size(), max_tokens = state.max_tokens();
  return nb::make_tuple(batch_size, max_tokens, layer_list(state));
}

void bind_state_file(nb::module_& m) {
  // Every model but the Samba stack, whose Python state is a list of layers (below).
  bind_models(m, static_cast<std::tuple<TransformerBlockInference, Mamba1BlockInference, Mamba2BlockInference,
                                        Mamba3BlockInference, CausalLM>*>(nullptr));
  m.def("model_fingerprint", [](const SambaInference& model) { return model_fingerprint(model); });
  m.def("save_samba_state", &save_samba, nb::arg("path"), nb::arg("model"), nb::arg("batch_size"),
        nb::arg("max_tokens"), nb::arg("layers"));
  m.def("load_samba_state", &load_samba, nb::arg("path"), nb::arg("model"));
}

const Registration kRegistration{&bind_state_file, 90};

}  // namespace
}  // namespace samebits::python
