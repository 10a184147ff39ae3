// Binding of Mamba3BlockInference and its state: samebits/_mamba3.py wraps these engine objects. State
// pieces are returned as writable numpy views of the engine's own memory that pin the state while alive.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/mamba3.hpp>
#include <string>
#include <utility>
#include <vector>

#include "array_convert.hpp"
#include "bindings.hpp"

namespace samebits::python {
namespace {

using FloatView = nb::ndarray<nb::numpy, float>;

// A writable view of one state piece (pinned_array).
FloatView piece_view(Mamba3State& state, int piece) {
  return pinned_array(nb::find(&state), state.pin(piece), sizes(state.piece_shape(piece)));
}

using ReportArrays = std::tuple<FloatArrayOut, FloatArrayOut, FloatArrayOut, FloatArrayOut>;

ReportArrays report_arrays(Mamba3Reports&& r, std::int64_t B, std::int64_t H) {
  return {to_numpy(std::move(r.h_last), sizes({B, H, kMamba3HeadDim, kMamba3StateDim})),
          to_numpy(std::move(r.k_last), sizes({B, H, kMamba3StateDim})),
          to_numpy(std::move(r.v_last), sizes({B, H, kMamba3HeadDim})),
          to_numpy(std::move(r.theta_last), sizes({B, H, kMamba3Angles}))};
}

// One call: y with the input's shape, plus the four reports when asked for (None otherwise).
std::pair<FloatArrayOut, std::optional<ReportArrays>> run(const Mamba3BlockInference& self,
                                                          const FloatArrayIn& x, Mamba3State* state,
                                                          bool step, bool reference, bool want_reports) {
  const TensorView view = view_of(x);
  Mamba3Reports reports;
  Mamba3Reports* wanted = want_reports ? &reports : nullptr;
  FloatArrayOut y = computed_array(
      [&] {
        if (step)
          return reference ? self.step_reference(view, state, wanted) : self.step(view, state, wanted);
        return reference ? self.forward_reference(view, state, wanted) : self.forward(view, state, wanted);
      },
      sizes(view.shape));
  std::optional<ReportArrays> out;
  if (want_reports) out = report_arrays(std::move(reports), view.shape[0], self.nheads());
  return {std::move(y), std::move(out)};
}

}  // namespace

void bind_mamba3(nb::module_& m) {
  state_class<Mamba3State>(m, "Mamba3StateEngine", "heads")
      .def_prop_ro("heads", &Mamba3State::heads)
      .def_static("piece_names",
                  [] {
                    std::vector<std::string> names;
                    for (int p = 0; p < Mamba3State::kPieceCount; ++p)
                      names.emplace_back(Mamba3State::piece_name(p));
                    return names;
                  })
      .def(
          "piece", [](Mamba3State& self, int piece) { return piece_view(self, piece); }, nb::arg("index"))
      .def_prop_rw("buffered_tokens", &Mamba3State::buffered_tokens, &Mamba3State::set_buffered_tokens)
      .def_prop_rw("pending", &Mamba3State::pending, &Mamba3State::set_pending)
      .def(
          "set_input_states",
          [](Mamba3State& self, const FloatArrayIn& theta, const FloatArrayIn& h, const FloatArrayIn& k,
             const FloatArrayIn& v) {
            const int pieces[4] = {0, 1, 8, 9};
            const FloatArrayIn* given[4] = {&theta, &h, &k, &v};
            for (int i = 0; i < 4; ++i)
              if (static_cast<std::int64_t>(given[i]->size()) != self.piece_elements(pieces[i]))
                throw_value_error(std::string("Mamba3State.set_input_states: ") +
                                  Mamba3State::piece_name(pieces[i]) + " has the wrong size");
            self.set_input_states(theta.data(), h.data(), k.data(), v.data());
          },
          nb::arg("theta"), nb::arg("h"), nb::arg("k"), nb::arg("v"))
      // Diagnostics: whether a call may skip its scan, and whether a view of a piece is alive.
      .def_prop_ro("trusted", &Mamba3State::trusted)
      .def_prop_ro("pinned", &Mamba3State::pinned);

  auto mamba3 = block_class<Mamba3BlockInference>(m, "Mamba3Engine");
  bind_named_weights_init(mamba3, "Mamba3Engine");
  for (const bool step : {false, true})
    mamba3.def(
        step ? "step" : "forward",
        [step](const Mamba3BlockInference& self, const FloatArrayIn& x, Mamba3State* state, bool reference,
               bool reports) { return run(self, x, state, step, reference, reports); },
        nb::arg("x"), nb::arg("state").none(), nb::arg("reference") = false, nb::arg("reports") = true);
  mamba3.def("check_tokens", &Mamba3BlockInference::check_tokens, nb::arg("shape"), nb::arg("step"))
      .def(
          "reports",
          [](const Mamba3BlockInference& self, const Mamba3State& state) {
            Mamba3Reports reports;
            {
              nb::gil_scoped_release release;
              reports = self.reports_of(state);
            }
            return report_arrays(std::move(reports), state.batch(), state.heads());
          },
          nb::arg("state"))
      .def_prop_ro("nheads", &Mamba3BlockInference::nheads)
      .def_prop_ro("d_in_proj", &Mamba3BlockInference::d_in_proj);
}

namespace {
const Registration kRegistration{&bind_mamba3, 50};
}  // namespace

}  // namespace samebits::python
