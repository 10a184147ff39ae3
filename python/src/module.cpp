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

// The Python exception class an engine error becomes (docs/api.md §18).
PyObject* python_exception(ErrorKind kind) {
  const std::pair<ErrorKind, PyObject*> classes[] = {{ErrorKind::Value, PyExc_ValueError},
                                                     {ErrorKind::Type, PyExc_TypeError},
                                                     {ErrorKind::NotImplemented, PyExc_NotImplementedError},
                                                     {ErrorKind::Runtime, PyExc_RuntimeError},
                                                     {ErrorKind::Memory, PyExc_MemoryError},
                                                     {ErrorKind::NotFound, PyExc_FileNotFoundError},
                                                     {ErrorKind::Key, PyExc_KeyError}};
  for (const auto& [error_kind, exception] : classes)
    if (error_kind == kind) return exception;
  return PyExc_RuntimeError;
}

}  // namespace samebits::python

NB_MODULE(_core, m) {
  m.doc() = "samebits native engine (exact fp32 CPU inference)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const samebits::Error& e) {
      PyErr_SetString(samebits::python::python_exception(e.kind()), e.what());
    }
  });
  m.attr("__version__") = samebits::version();
  samebits::python::run_registrations(m);
}
