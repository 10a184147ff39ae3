// The native module samebits._core: exception translation plus every area's registration.
#include <nanobind/nanobind.h>

#include "api/samebits.hpp"
#include "bindings.hpp"
#include "core/errors.hpp"

namespace nb = nanobind;

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
      }
    }
  });
  m.attr("__version__") = SAMEBITS_VERSION;
  samebits::python::bind_numerics(m);
  samebits::python::bind_lowbit(m);
  samebits::python::bind_mlp(m);
}
