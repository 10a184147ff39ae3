// The native module samebits._core: exception translation, then every registered binding.
#include <nanobind/nanobind.h>

#include <algorithm>
#include <samebits/engine.hpp>
#include <samebits/errors.hpp>
#include <utility>
#include <vector>

#include "bindings.hpp"

namespace nb = nanobind;

namespace samebits::python {
namespace {
std::vector<std::pair<int, BindFunction>>& registry() {
  static std::vector<std::pair<int, BindFunction>> entries;
  return entries;
}
}  // namespace

Registration::Registration(BindFunction bind, int order) { registry().emplace_back(order, bind); }

void run_registrations(nb::module_& m) {
  auto entries = registry();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& entry : entries) entry.second(m);
}

}  // namespace samebits::python

NB_MODULE(_core, m) {
  m.doc() = "samebits native engine (exact fp32 CPU inference)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const samebits::Error& e) {
      switch (e.kind()) {
        case samebits::ErrorKind::Value:
          PyErr_SetString(PyExc_ValueError, e.what());
          break;
        case samebits::ErrorKind::Type:
          PyErr_SetString(PyExc_TypeError, e.what());
          break;
        case samebits::ErrorKind::NotImplemented:
          PyErr_SetString(PyExc_NotImplementedError, e.what());
          break;
        case samebits::ErrorKind::Runtime:
          PyErr_SetString(PyExc_RuntimeError, e.what());
          break;
        case samebits::ErrorKind::Memory:
          PyErr_SetString(PyExc_MemoryError, e.what());
          break;
        case samebits::ErrorKind::NotFound:
          PyErr_SetString(PyExc_FileNotFoundError, e.what());
          break;
        case samebits::ErrorKind::Key:
          PyErr_SetString(PyExc_KeyError, e.what());
          break;
      }
    }
  });
  m.attr("__version__") = samebits::version();
  samebits::python::run_registrations(m);
}
