// Binding of Mamba1BlockInference / Mamba2BlockInference and their states: samebits/_mamba.py wraps these
// engine objects. State pieces are writable numpy views of the engine's own memory, owned by the state's
// Python object, so an edit through a view changes the next call.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/mamba.hpp>
#include <string>
#include <utility>
#include <vector>

#include "array_convert.hpp"
#include "bindings.hpp"

namespace samebits::python {
namespace {

using FloatView = nb::ndarray<nb::numpy, float>;

// A writable view of one Mamba-2 array (pinned_array); pinning settles the last call's report first, so
// edits through the view cannot reach it.
FloatView pinned_view(Mamba2State& state, Mamba2State::Buffer buffer) {
  return pinned_array(nb::find(&state), state.pin(buffer), sizes(state.buffer_shape(buffer)));
}

std::vector<std::size_t> shape_of(const TensorView& view) { return sizes(view.shape); }

// The Mamba-2 report handle Python keeps as the block's h_last_ source: the fast path's (evaluated on
// first read) or the twin's (given directly).
struct Mamba2ReportHandle {
  Mamba2Report report;
  std::optional<std::vector<float>> direct;
  std::int64_t batch = 0, heads = 0;
};

FloatArrayOut run_mamba1(const Mamba1BlockInference& self, const FloatArrayIn& x, Mamba1State* state,
                         bool step, bool reference) {
  const TensorView view = view_of(x);
  return computed_array(
      [&] {
        if (step) return reference ? self.step_reference(view, state) : self.step(view, state);
        return reference ? self.forward_reference(view, state) : self.forward(view, state);
      },
      shape_of(view));
}

std::pair<FloatArrayOut, Mamba2ReportHandle> run_mamba2(const Mamba2BlockInference& self,
                                                        const FloatArrayIn& x, Mamba2State* state, bool step,
                                                        bool reference,
                                                        const Mamba2ReportHandle* superseded) {
  const Mamba2Report* previous = superseded && superseded->report.valid() ? &superseded->report : nullptr;
  const TensorView view = view_of(x);
  std::vector<float> y;
  Mamba2ReportHandle handle;
  handle.heads = self.nheads();
  handle.batch = view.shape.empty() ? 0 : view.shape[0];
  {
    nb::gil_scoped_release release;
    if (reference) {
      std::vector<float> h_last;
      y = step ? self.step_reference(view, state, &h_last) : self.forward_reference(view, state, &h_last);
      handle.direct = std::move(h_last);
    } else {
      y = step ? self.step(view, state, &handle.report, previous)
               : self.forward(view, state, &handle.report, previous);
    }
  }
  return {to_numpy(std::move(y), shape_of(view)), std::move(handle)};
}

}  // namespace

void bind_mamba(nb::module_& m) {
  state_class<Mamba1State>(m, "Mamba1StateEngine", "d_inner")
      .def_prop_ro("d_inner", &Mamba1State::d_inner)
      .def_prop_ro(
          "conv_window",
          [](Mamba1State& s) {
            return pinned_array(nb::find(&s), s.pin_conv_window(),
                                sizes({s.batch(), s.d_inner(), kMambaConvWidth}));
          },
          nb::rv_policy::automatic)
      .def_prop_ro(
          "h",
          [](Mamba1State& s) {
            return pinned_array(nb::find(&s), s.pin_h(), sizes({s.batch(), s.d_inner(), kMamba1StateDim}));
          },
          nb::rv_policy::automatic);

  auto mamba2_state = state_class<Mamba2State>(m, "Mamba2StateEngine", "d_model");
  for (const auto buffer :
       {Mamba2State::kConvWindow, Mamba2State::kH, Mamba2State::kBufferXbc, Mamba2State::kBufferDtraw})
    mamba2_state.def_prop_ro(
        Mamba2State::buffer_name(buffer), [buffer](Mamba2State& s) { return pinned_view(s, buffer); },
        nb::rv_policy::automatic);
  mamba2_state.def_prop_ro("d_model", &Mamba2State::d_model)
      .def_prop_ro("nheads", &Mamba2State::nheads)
      .def_prop_ro("conv_dim", &Mamba2State::conv_dim)
      .def_prop_rw(
          "buffered_tokens", [](const Mamba2State& s) { return s.buffered_tokens(); },
          [](Mamba2State& s, std::int64_t value) { s.set_buffered_tokens(value); })
      .def("settle", &Mamba2State::settle_pending_report)
      // Diagnostics: whether a call may skip its scan, and whether a view of an array is alive.
      .def_prop_ro("trusted", &Mamba2State::trusted)
      .def_prop_ro("pinned", &Mamba2State::pinned);

  nb::class_<Mamba2ReportHandle>(m, "Mamba2ReportEngine")
      .def("h_last",
           [](Mamba2ReportHandle& self) {
             std::vector<float> values;
             if (self.direct) {
               values = *self.direct;
             } else {
               nb::gil_scoped_release release;
               values = self.report.h_last();
             }
             return to_numpy(std::move(values),
                             sizes({self.batch, self.heads, kMamba2HeadDim, kMamba2StateDim}));
           })
      .def_prop_ro("evaluated", [](Mamba2ReportHandle& self) {
        return self.direct.has_value() || self.report.evaluated();
      });

  auto mamba1 = block_class<Mamba1BlockInference>(m, "Mamba1Engine");
  bind_named_weights_init(mamba1, "Mamba engine");
  mamba1
      .def(
          "check_tokens",
          [](const Mamba1BlockInference& self, const std::vector<std::int64_t>& shape, bool step,
             const std::string& what) { self.check_tokens(shape, step, what); },
          nb::arg("shape"), nb::arg("step"), nb::arg("what"))
      .def_prop_ro("dt_rank", &Mamba1BlockInference::dt_rank);
  for (const bool step : {false, true})
    mamba1.def(
        step ? "step" : "forward",
        [step](const Mamba1BlockInference& self, const FloatArrayIn& x, Mamba1State* state, bool reference) {
          return run_mamba1(self, x, state, step, reference);
        },
        nb::arg("x"), nb::arg("state").none(), nb::arg("reference") = false);

  auto mamba2 = block_class<Mamba2BlockInference>(m, "Mamba2Engine");
  mamba2
      .def(
          "__init__",
          [](Mamba2BlockInference* self, const std::vector<std::string>& names,
             const std::vector<FloatArrayIn>& arrays, double dt_lo, double dt_hi,
             const std::string& weight_format) {
            new (self)
                Mamba2BlockInference(named(names, arrays, "Mamba engine"), dt_lo, dt_hi, weight_format);
          },
          nb::arg("names"), nb::arg("arrays"), nb::arg("dt_lo"), nb::arg("dt_hi"),
          nb::arg("weight_format") = "float32")
      .def(
          "check_tokens",
          [](const Mamba2BlockInference& self, const std::vector<std::int64_t>& shape, bool step,
             const std::string& what) { self.check_tokens(shape, step, what); },
          nb::arg("shape"), nb::arg("step"), nb::arg("what"))
      .def_prop_ro("dt_limit", &Mamba2BlockInference::dt_limit)
      .def_prop_ro("nheads", &Mamba2BlockInference::nheads)
      .def_prop_ro("conv_dim", &Mamba2BlockInference::conv_dim);
  for (const bool step : {false, true})
    mamba2.def(
        step ? "step" : "forward",
        [step](const Mamba2BlockInference& self, const FloatArrayIn& x, Mamba2State* state, bool reference,
               const Mamba2ReportHandle* superseded) {
          return run_mamba2(self, x, state, step, reference, superseded);
        },
        nb::arg("x"), nb::arg("state").none(), nb::arg("reference") = false,
        nb::arg("superseded").none() = nb::none());
}

namespace {
const Registration kRegistration{&bind_mamba, 40};
}  // namespace

}  // namespace samebits::python
