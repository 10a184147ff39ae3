// Binding of SambaInference: the engine over the per-layer C++ states a Python SambaState holds (Mamba-3
// and KV-cache states); the Python classes live in samebits/_samba.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <samebits/errors.hpp>
#include <samebits/samba.hpp>
#include <string>
#include <utility>
#include <vector>

#include "array_convert.hpp"
#include "bindings.hpp"
#include "samba_convert.hpp"

namespace samebits::python {
namespace {

using IdsArrayIn = nb::ndarray<const std::int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// Python's per-layer states: each a Mamba3StateEngine or a TransformerStateEngine (the C++ states
// themselves; an attention layer's state applies its own layout policy inside the call).
std::vector<SambaLayerRef> layer_refs(const SambaInference& self, const nb::list& layers) {
  std::vector<SambaLayerRef> refs(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    nb::handle layer = layers[i];
    if (nb::isinstance<Mamba3State>(layer)) {
      refs[i].mamba3 = &nb::cast<Mamba3State&>(layer);
      continue;
    }
    // Every kind but "mamba3" is an attention layer (docs/formats.md §1.2).
    const std::vector<std::string>& kinds = self.config().layers();
    const bool attention = i < kinds.size() && kinds[i] != "mamba3";
    TransformerState* kv =
        nb::isinstance<TransformerState>(layer) ? &nb::cast<TransformerState&>(layer) : nullptr;
    // A cache of other sizes than the stack's would be misread.
    if (kv == nullptr || !attention || kv->batch_size() < 1 || kv->max_tokens() < 1 ||
        kv->cached_tokens() < 0 || kv->window() != 0 || kv->n_kv_heads() != self.config().n_kv_heads() ||
        kv->head_dim() != self.config().head_dim())
      throw_value_error("samebits SambaInference: layer " + std::to_string(i) +
                        " of the state does not match the stack (allocate_state makes a matching one)");
    refs[i].attention = kv;
  }
  return refs;
}

// (B, L, vocab) logits; every layer state is read and updated in place.
FloatArrayOut run(const SambaInference& self, const IdsArrayIn& ids, const nb::object& layers, bool step,
                  bool reference) {
  const IdsView view{ids.data(), static_cast<std::int64_t>(ids.shape(0)),
                     static_cast<std::int64_t>(ids.shape(1))};
  const std::string what = std::string("samebits SambaInference.") + (step ? "step" : "forward");
  std::vector<float> logits;
  if (layers.is_none()) {
    nb::gil_scoped_release release;
    logits = reference ? self.forward_reference(view) : self.forward(view);
  } else {
    const std::vector<SambaLayerRef> refs = layer_refs(self, nb::cast<nb::list>(layers));
    nb::gil_scoped_release release;
    logits = self.run_layers(view, refs, what, reference);
  }
  const auto vocab = static_cast<std::size_t>(self.config().vocab());
  return to_numpy(std::move(logits),
                  {static_cast<std::size_t>(view.batch), static_cast<std::size_t>(view.length), vocab});
}

// (N, vocab) logits: ids[i] continues the one-row per-layer states sequences[i].
FloatArrayOut step_many(const SambaInference& self, const std::vector<std::int32_t>& ids,
                        const std::vector<nb::list>& sequences) {
  std::vector<std::vector<SambaLayerRef>> refs;
  for (const nb::list& layers : sequences) refs.push_back(layer_refs(self, layers));
  std::vector<float> logits;
  {
    nb::gil_scoped_release release;
    logits = self.step_many_layers(ids, refs);
  }
  return to_numpy(std::move(logits), {ids.size(), static_cast<std::size_t>(self.config().vocab())});
}

// A zero state per layer, in stack order (the Python SambaState holds them).
nb::list allocate_layers(const SambaInference& self, std::int64_t batch_size, std::int64_t max_tokens) {
  SambaState state = self.allocate_state(batch_size, max_tokens);
  return layer_list(state);
}

void bind_samba(nb::module_& m) {
  nb::class_<SambaInference>(m, "SambaEngine")
      .def(
          "__init__",
          [](SambaInference* self, const nb::dict& config, const std::vector<std::string>& names,
             const std::vector<FloatArrayIn>& arrays, const std::string& weight_format) {
            SambaInference::NamedWeights weights;
            for (std::size_t i = 0; i < names.size() && i < arrays.size(); ++i)
              weights.emplace_back(names[i], view_of(arrays[i]));
            new (self) SambaInference(samba_config_of(config), weights, weight_format);
          },
          nb::arg("config"), nb::arg("names"), nb::arg("arrays"), nb::arg("weight_format"))
      .def("run", &run, nb::arg("ids"), nb::arg("layers").none(), nb::arg("step"),
           nb::arg("reference") = false)
      .def("step_many", &step_many, nb::arg("ids"), nb::arg("sequences"))
      .def("allocate_layers", &allocate_layers, nb::arg("batch_size"), nb::arg("max_tokens"))
      .def("parameter",
           [](const SambaInference& self, const std::string& name) {
             for (const SambaTensorEntry& entry : self.config().registry()) {
               if (entry.name != name) continue;
               std::vector<std::size_t> shape(entry.shape.begin(), entry.shape.end());
               return to_numpy(self.parameter(name), shape);
             }
             throw_value_error("samebits.SambaInference: no tensor " + name);
           })
      // SambaInference.from_checkpoint: the file read straight into the engine (no numpy copy of the
      // weights), returned with its config's to_dict() form.
      .def_static(
          "from_checkpoint",
          [](const std::string& path) {
            std::unique_ptr<SambaInference> engine;
            {
              nb::gil_scoped_release release;
              engine = std::make_unique<SambaInference>(SambaInference::from_checkpoint(path));
            }
            return engine.release();
          },
          nb::arg("path"), nb::rv_policy::take_ownership)
      .def_prop_ro("config_dict", [](const SambaInference& self) { return samba_config_dict(self.config()); })
      .def_prop_ro("weight_format", [](const SambaInference& self) { return self.weight_format(); })
      .def("__repr__", &SambaInference::repr);
}

const Registration kRegistration{&bind_samba, 70};

}  // namespace
}  // namespace samebits::python
