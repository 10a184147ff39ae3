// Binding of SambaInference: the engine over borrowed per-layer states (Mamba-3 engine states and KV
// caches in the caller's numpy buffers); the Python classes live in samebits/_samba.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/samba_inference.hpp"
#include "array_convert.hpp"
#include "bindings.hpp"
#include "samba_convert.hpp"

namespace samebits::python {
namespace {

using IdsArrayIn = nb::ndarray<const std::int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using FloatArrayInOut = nb::ndarray<float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Python's per-layer state handles: a Mamba3StateEngine, or (k_cache, v_cache, batch, max_tokens,
// cached_tokens, spread, trusted, private_buffers, key_tiles) for an attention layer whose buffers the
// engine reads and writes in place (spread to private_buffers: TransformerStateView's bookkeeping, kept by
// the Python state; key_tiles: its kv_tiles buffer or None).
struct BorrowedLayers {
  std::vector<TransformerStateView> views;
  std::vector<blocks::KvCache> caches;
  std::vector<models::SambaLayerState> refs;
};

BorrowedLayers borrow(const SambaInference& self, const nb::list& layers) {
  BorrowedLayers out;
  out.views.resize(layers.size());
  out.caches.resize(layers.size());
  out.refs.resize(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    nb::handle layer = layers[i];
    if (nb::isinstance<blocks::Mamba3State>(layer)) {
      out.refs[i].mamba3 = &nb::cast<blocks::Mamba3State&>(layer);
      continue;
    }
    const auto items = nb::cast<nb::tuple>(layer);
    auto k = nb::cast<FloatArrayInOut>(items[0]);
    auto v = nb::cast<FloatArrayInOut>(items[1]);
    TransformerStateView& view = out.views[i];
    view.k_cache = k.data();
    view.v_cache = v.data();
    view.batch_size = nb::cast<std::int64_t>(items[2]);
    view.max_tokens = nb::cast<std::int64_t>(items[3]);
    view.cached_tokens = nb::cast<std::int64_t>(items[4]);
    view.spread = nb::cast<bool>(items[5]);
    view.trusted = nb::cast<bool>(items[6]);
    view.private_buffers = nb::cast<bool>(items[7]);
    if (view.spread && items.size() > 8 && i < static_cast<std::size_t>(self.model().layer_count()) &&
        self.model().layer_kind(static_cast<std::int64_t>(i)) == models::SambaLayerKind::Attention) {
      const blocks::TransformerDims& dims = self.model().attention(static_cast<std::int64_t>(i)).dims();
      view.k_tiles =
          borrowed_key_tiles(items[8], view.batch_size * dims.n_kv_heads, dims.head_dim, view.max_tokens);
    }
    blocks::KvCache& kv = out.caches[i] = engine_cache(view, view.batch_size);
    const bool attention =
        static_cast<std::int64_t>(i) < self.model().layer_count() &&
        self.model().layer_kind(static_cast<std::int64_t>(i)) == models::SambaLayerKind::Attention;
    if (!attention || kv.batch < 1 || kv.max_tokens < 1 || kv.cached_tokens < 0 ||
        static_cast<std::int64_t>(k.shape(0)) !=
            kv.floats(self.model().attention(static_cast<std::int64_t>(i)).dims()) ||
        k.shape(0) != v.shape(0))
      throw_value_error("samebits SambaInference: layer " + std::to_string(i) +
                        " of the state does not match the stack (allocate_state makes a matching one)");
    out.refs[i].kv = &kv;
  }
  return out;
}

// Returns (logits, per layer: None for Mamba-3, (cached_tokens, trusted) for attention).
nb::tuple run(const SambaInference& self, const IdsArrayIn& ids, const nb::object& layers, bool step,
              bool reference) {
  const IdsView view{ids.data(), static_cast<std::int64_t>(ids.shape(0)),
                     static_cast<std::int64_t>(ids.shape(1))};
  const std::string what = std::string("samebits SambaInference.") + (step ? "step" : "forward");
  std::vector<float> logits;
  nb::list outcome;
  if (layers.is_none()) {
    nb::gil_scoped_release release;
    logits = reference ? self.forward_reference(view) : self.forward(view);
  } else {
    BorrowedLayers borrowed = borrow(self, nb::cast<nb::list>(layers));
    {
      nb::gil_scoped_release release;
      logits = self.run_borrowed(view, borrowed.refs, what, reference);
      self.finish_kv_calls(borrowed.views, borrowed.refs, view.length, reference);
    }
    for (std::size_t i = 0; i < borrowed.refs.size(); ++i) {
      if (borrowed.refs[i].kv)
        outcome.append(nb::make_tuple(borrowed.views[i].cached_tokens, borrowed.views[i].trusted));
      else
        outcome.append(nb::none());
    }
  }
  const auto vocab = static_cast<std::size_t>(self.config().vocab());
  return nb::make_tuple(to_numpy(std::move(logits), {static_cast<std::size_t>(view.batch),
                                                     static_cast<std::size_t>(view.length), vocab}),
                        outcome);
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
      .def("parameter",
           [](const SambaInference& self, const std::string& name) {
             const auto& registry = self.model().registry();
             const std::size_t index = registry.index_of(name);
             if (index == models::SambaRegistry::npos)
               throw_value_error("samebits.SambaInference: no tensor " + name);
             const auto& entry = registry.entries[index];
             std::vector<std::size_t> shape(entry.shape.begin(), entry.shape.end());
             return to_numpy(self.model().tensor_copy(index), shape);
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
      .def("mamba3_heads", [](const SambaInference& self,
                              std::int64_t layer) { return self.model().mamba3(layer).dims().heads; })
      .def_prop_ro("weight_format", [](const SambaInference& self) { return self.weight_format(); })
      .def("__repr__", &SambaInference::repr);
}

const Registration kRegistration{&bind_samba, 70};

}  // namespace
}  // namespace samebits::python
