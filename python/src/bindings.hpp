// Shared declarations of the nanobind module: each area of the binding registers itself.
#pragma once

#include <nanobind/nanobind.h>

namespace samebits::python {

void bind_numerics(nanobind::module_& m);  // threads, SIMD target, gemm/rmsnorm for tests
void bind_lowbit(nanobind::module_& m);    // bf16 / int8 packing and exact materialization
void bind_mlp(nanobind::module_& m);       // MLPInference engine and its checkpoint reader

}  // namespace samebits::python
