// numpy <-> engine conversions shared by the binding files: borrowed float32 views in, fresh arrays out.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <samebits/errors.hpp>
#include <samebits/tensor.hpp>
#include <string>
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

// Engine extents as numpy's.
inline std::vector<std::size_t> sizes(std::initializer_list<std::int64_t> dims) {
  std::vector<std::size_t> out;
  for (auto d : dims) out.push_back(static_cast<std::size_t>(d));
  return out;
}
inline std::vector<std::size_t> sizes(const std::vector<std::int64_t>& dims) {
  return std::vector<std::size_t>(dims.begin(), dims.end());
}

// The named weights a block constructor takes, from the parallel lists the Python layer passes.
inline NamedTensors named(const std::vector<std::string>& names, const std::vector<FloatArrayIn>& arrays,
                          const char* engine) {
  if (names.size() != arrays.size())
    throw_value_error(std::string(engine) + ": names and arrays differ in length");
  NamedTensors weights;
  for (std::size_t i = 0; i < names.size(); ++i) weights.emplace_back(names[i], view_of(arrays[i]));
  return weights;
}

// Hands a vector's memory to a new numpy array (no copy); the array owns it from then on.
inline FloatArrayOut to_numpy(std::vector<float>&& values, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<float>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return FloatArrayOut(owned->data(), shape.size(), shape.data(), owner);
}

// Runs `compute` (returning std::vector<float>) with the GIL released, and hands its result to numpy.
template <typename Compute>
FloatArrayOut computed_array(Compute&& compute, std::vector<std::size_t> shape) {
  std::vector<float> values;
  {
    nb::gil_scoped_release release;
    values = compute();
  }
  return to_numpy(std::move(values), std::move(shape));
}

// A copy of weight `index` of a block, shaped by the block's weight table.
template <typename Block>
FloatArrayOut weight_copy(const Block& block, int index, const char* engine) {
  const std::vector<TensorInfo> table = block.weight_table();
  if (index < 0 || index >= static_cast<int>(table.size()))
    throw_value_error(std::string(engine) + ": no weight index");
  return to_numpy(block.weight(static_cast<std::size_t>(index)),
                  sizes(table[static_cast<std::size_t>(index)].shape));
}

// A Mamba-style block's class with what every one exposes alike: the static weight checks (in upstream's
// refusal order), allocate_state, backward, weight(i), d_model, d_inner and weight_format.
template <typename Block>
nb::class_<Block> block_class(nb::module_& m, const char* name) {
  nb::class_<Block> cls(m, name);
  cls.def_static("weight_names", &Block::weight_names)
      .def_static("check_keys", &Block::check_keys)
      .def_static("check_norm_weight", &Block::check_norm_weight)
      .def_static("check_weight", &Block::check_weight)
      .def("allocate_state", &Block::allocate_state, nb::arg("batch_size"))
      .def("backward", &Block::backward)
      .def("weight", [name](const Block& self, int index) { return weight_copy(self, index, name); })
      .def_prop_ro("d_model", &Block::d_model)
      .def_prop_ro("d_inner", &Block::d_inner)
      .def_prop_ro("weight_format", [](const Block& self) { return self.weight_format(); });
  return cls;
}

// The constructor from (names, arrays, weight_format) of a block that takes nothing else.
template <typename Block>
void bind_named_weights_init(nb::class_<Block>& cls, const char* engine) {
  cls.def(
      "__init__",
      [engine](Block* self, const std::vector<std::string>& names, const std::vector<FloatArrayIn>& arrays,
               const std::string& weight_format) {
        new (self) Block(named(names, arrays, engine), weight_format);
      },
      nb::arg("names"), nb::arg("arrays"), nb::arg("weight_format") = "float32");
}

// A block state's class: made from (batch, width) as `width_name` names it, with batch_size and clone.
template <typename State>
nb::class_<State> state_class(nb::module_& m, const char* name, const char* width_name) {
  nb::class_<State> cls(m, name);
  cls.def(nb::init<std::int64_t, std::int64_t>(), nb::arg("batch"), nb::arg(width_name))
      .def_prop_ro("batch_size", &State::batch)
      .def("clone", &State::clone);
  return cls;
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
