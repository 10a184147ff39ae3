// Shared declarations of the nanobind module: each binding file registers itself with a static
// Registration, so adding a block's binding never touches module.cpp.
#pragma once

#include <nanobind/nanobind.h>

namespace samebits::python {

using BindFunction = void (*)(nanobind::module_& m);

// Registers `bind` to run when the module initializes; lower `order` runs first (numerics 0,
// lowbit 10, models 20+). Use at namespace scope: `static const Registration kReg{&bind_x, 30};`
struct Registration {
  Registration(BindFunction bind, int order);
};

// Runs every registered binding in order (called once from module.cpp).
void run_registrations(nanobind::module_& m);

}  // namespace samebits::python
