// Binding of the engine-wide controls (threads, SIMD target) and the exact GEMM for tests and tools.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <samebits/engine.hpp>
#include <samebits/errors.hpp>
#include <string>

#include "array_convert.hpp"
#include "bindings.hpp"

namespace samebits::python {
namespace {

// C = A_eff * B_eff for the named orientation; shapes follow docs/numerics.md §3.1.
FloatArrayOut run_gemm(const FloatArrayIn& a, const FloatArrayIn& b, const std::string& orientation,
                       bool reference) {
  if (a.ndim() != 2 || b.ndim() != 2) throw_value_error("samebits.gemm: a and b must be 2-D float32 arrays");
  std::int64_t m, n, k;
  const auto a0 = static_cast<std::int64_t>(a.shape(0)), a1 = static_cast<std::int64_t>(a.shape(1));
  const auto b0 = static_cast<std::int64_t>(b.shape(0)), b1 = static_cast<std::int64_t>(b.shape(1));
  if (orientation == "NT") {
    m = a0, k = a1, n = b0;
    if (b1 != k) throw_value_error("samebits.gemm: NT needs a (m, k) and b (n, k)");
  } else if (orientation == "NN") {
    m = a0, k = a1, n = b1;
    if (b0 != k) throw_value_error("samebits.gemm: NN needs a (m, k) and b (k, n)");
  } else if (orientation == "TN") {
    k = a0, m = a1, n = b1;
    if (b0 != k) throw_value_error("samebits.gemm: TN needs a (k, m) and b (k, n)");
  } else {
    throw_value_error("samebits.gemm: orientation must be 'NT', 'NN' or 'TN', got '" + orientation + "'");
  }
  std::vector<float> c(static_cast<std::size_t>(m * n));
  {
    nb::gil_scoped_release release;
    matmul(orientation, a.data(), b.data(), c.data(), m, n, k, reference);
  }
  return to_numpy(std::move(c), {static_cast<std::size_t>(m), static_cast<std::size_t>(n)});
}

}  // namespace

void bind_numerics(nb::module_& m) {
  m.def("set_num_threads", [](int n) {
    if (n < 1)
      throw_value_error("samebits.set_num_threads: n must be a positive integer, got " + std::to_string(n));
    set_num_threads(n);
  });
  m.def("get_num_threads", [] { return num_threads(); });
  m.def("simd_targets", &simd_targets);
  m.def("simd_target", &simd_target);
  m.def("set_simd_target", &set_simd_target);
  m.def("reset_simd_target", &reset_simd_target);
  m.def("gemm", &run_gemm, nb::arg("a"), nb::arg("b"), nb::arg("orientation") = "NT",
        nb::arg("reference") = false);
  m.def("neural_arithmetic_profile", [] { return std::string(neural_arithmetic_profile()); });
  m.def("numeric_mode", [] { return std::string(numeric_mode()); });
  m.def("vendor", [] { return std::string("cpu"); });
  m.def("sabotage", &sabotage_build);
}

namespace {
const Registration kRegistration{&bind_numerics, 0};
}  // namespace

}  // namespace samebits::python
