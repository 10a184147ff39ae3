// numpy <-> engine conversions shared by the binding files: borrowed float32 views in, fresh arrays out.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <samebits/tensor.hpp>
#include <utility>
#include <vector>

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

// A writable numpy view of a pinned state buffer. Its owner is a capsule holding the pin and the state's
// Python object, so the state stays alive, and exposed (packed, scanned by every call), while any array
// derived from the view lives; when the last one dies the pin goes and the state may be trusted again.
template <typename Pin>
FloatArrayOut pinned_array(nb::handle state, Pin&& pin, std::vector<std::size_t> shape) {
  struct PinnedOwner {
    nb::object state;
    Pin pin;
  };
  auto* owner = new PinnedOwner{nb::borrow(state), std::move(pin)};
  nb::capsule capsule(owner, [](void* p) noexcept { delete static_cast<PinnedOwner*>(p); });
  return FloatArrayOut(owner->pin.data(), shape.size(), shape.data(), capsule);
}

}  // namespace samebits::python
