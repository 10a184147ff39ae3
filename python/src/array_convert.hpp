// numpy <-> engine conversions shared by the binding files: borrowed float32 views in, fresh arrays out.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "api/samebits.hpp"

namespace samebits::python {

namespace nb = nanobind;

using FloatArrayIn = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using FloatArrayOut = nb::ndarray<nb::numpy, float>;

inline TensorView view_of(const FloatArrayIn& array) {
  TensorView view;
  view.data = array.data();
  for (std::size_t i = 0; i < array.ndim(); ++i)
    view.shape.push_back(static_cast<std::int64_t>(array.shape(i)));
  return view;
}

// Hands a vector's memory to a new numpy array (no copy); the array owns it from then on.
inline FloatArrayOut to_numpy(std::vector<float>&& values, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<float>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return FloatArrayOut(owned->data(), shape.size(), shape.data(), owner);
}

}  // namespace samebits::python
