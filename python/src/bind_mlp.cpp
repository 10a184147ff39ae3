// Binding of MLPInference: the Python class in samebits/_mlp.py wraps this engine object.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <samebits/errors.hpp>
#include <samebits/mlp.hpp>
#include <string>

#include "array_convert.hpp"
#include "bindings.hpp"

namespace samebits::python {

void bind_mlp(nb::module_& m) {
  // Per-tensor and batch-shape checks, so the Python layer can interleave them with its dtype checks in
  // upstream's order while the wording stays in the C++ API.
  m.def("mlp_check_tensor", [](const std::string& name, const FloatArrayIn& value) {
    MLPInference::check_tensor(name, view_of(value));
  });
  m.def("mlp_check_batch_shape",
        [](const std::vector<std::int64_t>& shape) { MLPInference::check_batch_shape(shape); });
  nb::class_<MLPInference>(m, "MLPEngine")
      .def(
          "__init__",
          [](MLPInference* self, const FloatArrayIn& w1, const FloatArrayIn& b1, const FloatArrayIn& w2,
             const FloatArrayIn& b2, const std::string& weight_format) {
            new (self) MLPInference(view_of(w1), view_of(b1), view_of(w2), view_of(b2), weight_format);
          },
          nb::arg("weight1"), nb::arg("bias1"), nb::arg("weight2"), nb::arg("bias2"),
          nb::arg("weight_format") = "float32")
      .def_static("from_checkpoint",
                  [](const std::string& path) { return MLPInference::from_checkpoint(path); })
      .def("predict_logits",
           [](const MLPInference& self, const FloatArrayIn& X) {
             const TensorView view = view_of(X);
             return computed_array([&] { return self.predict_logits(view); }, sizes({view.shape[0], 3}));
           })
      .def("predict_logits_reference",
           [](const MLPInference& self, const FloatArrayIn& X) {
             const TensorView view = view_of(X);
             std::vector<float> logits = self.predict_logits_reference(view);
             return to_numpy(std::move(logits), {static_cast<std::size_t>(view.shape[0]), 3});
           })
      .def("weight",
           [](const MLPInference& self, const std::string& name) {
             for (const TensorInfo& info : MLPInference::weight_table()) {
               if (info.name != name) continue;
               std::vector<std::size_t> shape(info.shape.begin(), info.shape.end());
               return to_numpy(self.weight(name), shape);
             }
             throw_value_error("MLPInference has no weight named '" + name + "'");
           })
      .def_prop_ro("weight_format", [](const MLPInference& self) { return self.weight_format(); })
      .def("__repr__", &MLPInference::repr);
}

namespace {
const Registration kRegistration{&bind_mlp, 20};
}  // namespace

}  // namespace samebits::python
