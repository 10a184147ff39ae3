// Native helpers behind samebits.lowbit: bf16 narrowing/widening and int8 quantization over numpy arrays.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <samebits/errors.hpp>
#include <samebits/lowbit.hpp>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace nb = nanobind;

namespace samebits::python {

namespace {

// Inputs: C-contiguous host arrays of exactly this element type. The arguments are marked noconvert, so
// nanobind refuses anything else with a TypeError instead of copying; samebits.lowbit converts first.
template <typename T, typename... Extra>
using HostIn = nb::ndarray<const T, nb::c_contig, nb::device::cpu, Extra...>;
template <typename T>
using NumpyOut = nb::ndarray<nb::numpy, T>;

std::size_t element_count(const std::vector<std::size_t>& shape) {
  std::size_t count = 1;
  for (std::size_t extent : shape) count *= extent;
  return count;
}

// A fresh C-order numpy array owning its memory (freed when numpy drops it). The filler runs before the
// array object exists, so an exception leaves nothing behind.
template <typename T, typename Fill>
NumpyOut<T> fresh_array(const std::vector<std::size_t>& shape, Fill&& fill) {
  const std::size_t count = element_count(shape);
  T* data = new T[count > 0 ? count : 1];
  try {
    fill(data);
  } catch (...) {
    delete[] data;
    throw;
  }
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return NumpyOut<T>(data, shape.size(), shape.data(), owner);
}

template <typename Array>
std::vector<std::size_t> shape_of(const Array& a) {
  std::vector<std::size_t> shape(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) shape[d] = a.shape(d);
  return shape;
}

NumpyOut<std::uint16_t> to_bf16(HostIn<float, nb::ndim<2>> w) {
  std::vector<std::size_t> shape = {w.shape(0), w.shape(1)};
  const float* in = w.data();
  return fresh_array<std::uint16_t>(shape, [&](std::uint16_t* out) {
    nb::gil_scoped_release unlocked;
    lowbit::bf16_from_f32_array(in, element_count(shape), out);
  });
}

NumpyOut<float> from_bf16(HostIn<std::uint16_t> bits) {
  std::vector<std::size_t> shape = shape_of(bits);
  const std::uint16_t* in = bits.data();
  return fresh_array<float>(shape, [&](float* out) {
    nb::gil_scoped_release unlocked;
    lowbit::f32_from_bf16_array(in, element_count(shape), out);
  });
}

std::pair<NumpyOut<std::int8_t>, NumpyOut<std::int32_t>> quantize_int8(HostIn<float, nb::ndim<2>> w) {
  const std::size_t rows = w.shape(0), cols = w.shape(1);
  const float* in = w.data();
  std::vector<std::int32_t> exponents(rows);
  NumpyOut<std::int8_t> codes = fresh_array<std::int8_t>({rows, cols}, [&](std::int8_t* out) {
    nb::gil_scoped_release unlocked;
    lowbit::quantize_int8_matrix(in, rows, cols, out, exponents.data());
  });
  NumpyOut<std::int32_t> exps = fresh_array<std::int32_t>(
      {rows}, [&](std::int32_t* out) { std::copy(exponents.begin(), exponents.end(), out); });
  return {codes, exps};
}

NumpyOut<float> dequantize_int8(HostIn<std::int8_t, nb::ndim<2>> codes,
                                HostIn<std::int32_t, nb::ndim<1>> exponents) {
  const std::size_t rows = codes.shape(0), cols = codes.shape(1);
  if (exponents.shape(0) != rows) {
    throw_value_error("samebits.lowbit: exponents must be int32 of shape (rows,): " + std::to_string(rows) +
                      " rows of codes, " + std::to_string(exponents.shape(0)) + " exponents");
  }
  const std::int8_t* q = codes.data();
  const std::int32_t* e = exponents.data();
  return fresh_array<float>({rows, cols}, [&](float* out) {
    nb::gil_scoped_release unlocked;
    lowbit::dequantize_int8_matrix(q, e, rows, cols, out);
  });
}

}  // namespace

void bind_lowbit(nb::module_& m) {
  m.def("_lowbit_to_bf16", &to_bf16, nb::arg("weights").noconvert(),
        "float32 (rows, cols) C-contiguous -> uint16 bf16 bits (docs/formats.md §5.2, contract L-2).");
  m.def("_lowbit_from_bf16", &from_bf16, nb::arg("bits").noconvert(),
        "uint16 bf16 bits of any rank, C-contiguous -> float32 of the same shape (exact widening).");
  m.def("_lowbit_quantize_int8", &quantize_int8, nb::arg("weights").noconvert(),
        "float32 (rows, cols) C-contiguous -> (int8 codes (rows, cols), int32 exponents (rows,)).");
  m.def("_lowbit_dequantize_int8", &dequantize_int8, nb::arg("codes").noconvert(),
        nb::arg("exponents").noconvert(),
        "int8 codes (rows, cols) and int32 exponents (rows,) -> float32 (rows, cols), exact.");
}

namespace {
const Registration kRegistration{&bind_lowbit, 10};
}  // namespace

}  // namespace samebits::python
