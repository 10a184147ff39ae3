// Binding of CausalLM and CausalLMState: the Python classes in samebits/_causal_lm.py wrap these engine
// objects (docs/models.md §17-§19).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <samebits/causal_lm.hpp>
#include <samebits/errors.hpp>
#include <string>

#include "array_convert.hpp"
#include "bindings.hpp"

namespace samebits::python {
namespace {

using IdsArrayIn = nb::ndarray<const std::int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using IdsArrayOut = nb::ndarray<nb::numpy, std::int32_t>;

IdsView ids_view(const IdsArrayIn& ids) {
  return {ids.data(), static_cast<std::int64_t>(ids.shape(0)), static_cast<std::int64_t>(ids.shape(1))};
}

IdsArrayOut ids_to_numpy(std::vector<std::int32_t>&& values, std::size_t rows, std::size_t cols) {
  auto* owned = new std::vector<std::int32_t>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::int32_t>*>(p); });
  const std::size_t shape[2] = {rows, cols};
  return IdsArrayOut(owned->data(), 2, shape, owner);
}

void bind_causal_lm(nb::module_& m) {
  nb::class_<CausalLMState>(m, "CausalLMStateEngine")
      .def("clone", &CausalLMState::clone)
      .def_prop_ro("batch_size", &CausalLMState::batch_size)
      .def_prop_ro("max_tokens", &CausalLMState::max_tokens)
      .def_prop_ro("layers", &CausalLMState::layers)
      .def_prop_ro("positions", &CausalLMState::positions)
      .def("belongs_to", &CausalLMState::belongs_to)
      .def("layer_copy",
           [](const CausalLMState& self, std::int64_t i) -> nb::object {
             // An independent copy of layer i's state, as the block's own state class (docs/models.md §18).
             if (const TransformerState* kv = self.transformer(i)) return nb::cast(kv->clone());
             if (const Mamba1State* m1 = self.mamba1(i)) return nb::cast(m1->clone());
             return nb::cast(self.mamba2(i)->clone());
           })
      .def("buffers_bytes", [](const CausalLMState& self) {
        // Every layer's buffers, in stack order, as one bytes object (tests compare states with it).
        std::string out;
        auto add = [&](const float* data, std::size_t count) {
          out.append(reinterpret_cast<const char*>(data), count * sizeof(float));
        };
        for (std::int64_t i = 0; i < self.layers(); ++i) {
          if (const TransformerState* kv = self.transformer(i)) {
            const std::int64_t cached = kv->cached_tokens();
            out.append(reinterpret_cast<const char*>(&cached), sizeof cached);
            const std::vector<float> k = kv->k_cache_copy(), v = kv->v_cache_copy();
            add(k.data(), k.size());
            add(v.data(), v.size());
          } else if (const Mamba1State* m1 = self.mamba1(i)) {
            add(m1->conv_window(), static_cast<std::size_t>(m1->conv_window_size()));
            add(m1->h(), static_cast<std::size_t>(m1->h_size()));
          } else if (const Mamba2State* m2 = self.mamba2(i)) {
            const std::int64_t buffered = m2->buffered_tokens();
            out.append(reinterpret_cast<const char*>(&buffered), sizeof buffered);
            add(m2->conv_window(), static_cast<std::size_t>(m2->conv_window_size()));
            add(m2->h(), static_cast<std::size_t>(m2->h_size()));
            add(m2->buffer_xbc(), static_cast<std::size_t>(m2->buffer_xbc_size()));
            add(m2->buffer_dtraw(), static_cast<std::size_t>(m2->buffer_dtraw_size()));
          }
        }
        return nb::bytes(out.data(), out.size());
      });

  nb::class_<CausalLM>(m, "CausalLMEngine")
      .def_static("load", &CausalLM::load, nb::arg("path"), nb::arg("weight_format") = "float32",
                  nb::arg("max_positions") = nb::none(), nb::arg("loader") = "samebits")
      .def(
          "forward",
          [](const CausalLM& self, const IdsArrayIn& ids, CausalLMState* state) {
            const IdsView view = ids_view(ids);
            std::vector<float> logits;
            {
              nb::gil_scoped_release release;
              logits = state == nullptr ? self.forward(view) : self.forward(view, *state);
            }
            return to_numpy(std::move(logits),
                            {static_cast<std::size_t>(view.batch), static_cast<std::size_t>(view.length),
                             static_cast<std::size_t>(self.vocab_size())});
          },
          nb::arg("ids"), nb::arg("state").none())
      .def("step",
           [](const CausalLM& self, const IdsArrayIn& ids, CausalLMState& state) {
             const IdsView view = ids_view(ids);
             std::vector<float> logits;
             {
               nb::gil_scoped_release release;
               logits = self.step(view, state);
             }
             return to_numpy(std::move(logits), {static_cast<std::size_t>(view.batch),
                                                 static_cast<std::size_t>(self.vocab_size())});
           })
      .def("step_many",
           [](const CausalLM& self, const std::vector<std::int32_t>& ids,
              const std::vector<CausalLMState*>& states) {
             std::vector<float> logits;
             {
               nb::gil_scoped_release release;
               logits = self.step_many(ids, states);
             }
             return to_numpy(std::move(logits), {ids.size(), static_cast<std::size_t>(self.vocab_size())});
           })
      .def("allocate_state", &CausalLM::allocate_state)
      .def("reset_state", [](const CausalLM& self, CausalLMState& state) { self.reset_state(state); })
      .def("generate",
           [](const CausalLM& self, const IdsArrayIn& ids, std::int64_t max_new_tokens) {
             const IdsView view = ids_view(ids);
             std::vector<std::int32_t> out;
             {
               nb::gil_scoped_release release;
               out = self.generate(view, max_new_tokens);
             }
             const auto rows = static_cast<std::size_t>(view.batch);
             const std::size_t cols = out.size() / rows;  // the engine refused B < 1
             return ids_to_numpy(std::move(out), rows, cols);
           })
      .def("generate_with",
           [](const CausalLM& self, const IdsArrayIn& ids, std::int64_t max_new_tokens, bool greedy,
              double temperature, std::int64_t top_k, double top_p, double min_p, double repetition_penalty,
              std::int64_t repetition_window, double presence_penalty, double frequency_penalty,
              std::uint64_t seed, std::vector<std::int32_t> stop_ids) {
             GenerateOptions options;
             options.greedy = greedy;
             options.sampling = {temperature,
                                 top_k,
                                 top_p,
                                 min_p,
                                 repetition_penalty,
                                 repetition_window,
                                 presence_penalty,
                                 frequency_penalty,
                                 seed};
             options.stop_ids = std::move(stop_ids);
             const IdsView view = ids_view(ids);
             std::vector<std::int32_t> out;
             {
               nb::gil_scoped_release release;
               out = self.generate(view, max_new_tokens, options);
             }
             const auto rows = static_cast<std::size_t>(view.batch);
             const std::size_t cols = out.size() / rows;  // the engine refused B < 1
             return ids_to_numpy(std::move(out), rows, cols);
           })
      .def("parameters",
           [](const CausalLM& self) {
             nb::dict out;
             for (NamedTensorCopy& p : self.parameters()) {
               std::vector<std::size_t> shape(p.shape.begin(), p.shape.end());
               out[nb::str(p.name.c_str())] = to_numpy(std::move(p.values), shape);
             }
             return out;
           })
      .def_prop_ro("unused_names", &CausalLM::unused_names)
      .def_prop_ro("model_type", &CausalLM::model_type)
      .def_prop_ro("kind", &CausalLM::kind)
      .def_prop_ro("weight_format", &CausalLM::weight_format)
      .def_prop_ro("loader", &CausalLM::loader)
      .def_prop_ro("d_model", &CausalLM::d_model)
      .def_prop_ro("vocab_size", &CausalLM::vocab_size)
      .def_prop_ro("n_layers", &CausalLM::n_layers)
      .def_prop_ro("tie_embeddings", &CausalLM::tie_embeddings)
      .def_prop_ro("norm_eps", &CausalLM::norm_eps)
      .def_prop_ro("max_positions", &CausalLM::max_positions)
      .def("__repr__", &CausalLM::repr);
}

const Registration kRegistration{&bind_causal_lm, 60};

}  // namespace
}  // namespace samebits::python
