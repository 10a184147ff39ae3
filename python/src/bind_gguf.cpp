// Native helpers behind samebits._gguf: a GGUF file's metadata and tensor table as Python values, a tensor's
// exact float32 values, and the dequantizer over raw blocks (docs/gguf.md §9).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <samebits/gguf.hpp>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace nb = nanobind;

namespace samebits::python {
namespace {

using BytesIn = nb::ndarray<const std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using FloatsOut = nb::ndarray<nb::numpy, float>;

FloatsOut to_numpy(std::vector<float> values, const std::vector<std::size_t>& shape) {
  auto* owned = new std::vector<float>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return FloatsOut(owned->data(), shape.size(), shape.data(), owner);
}

// One item of a value as a Python object.
nb::object item(const GgufValue& v, std::size_t i) {
  const GgufValueType t = v.element;
  if (t == GgufValueType::Bool) return nb::bool_(v.uints[i] != 0);
  if (!v.uints.empty()) return nb::int_(v.uints[i]);
  if (!v.ints.empty()) return nb::int_(v.ints[i]);
  if (!v.floats.empty()) return nb::float_(v.floats[i]);
  return nb::str(v.strings[i].data(), v.strings[i].size());
}

nb::dict describe(const GgufFile& f) {
  nb::dict out;
  out["path"] = f.path();
  out["version"] = f.version();
  out["file_bytes"] = f.file_bytes();
  out["alignment"] = f.alignment();
  out["data_offset"] = f.data_offset();
  nb::list metadata;
  for (const GgufKeyValue& kv : f.metadata()) {
    nb::object value;
    if (kv.value.type == GgufValueType::Array) {
      nb::list items;
      for (std::size_t i = 0; i < kv.value.count(); ++i) items.append(item(kv.value, i));
      value = items;
    } else {
      value = item(kv.value, 0);
    }
    nb::object element = kv.value.type == GgufValueType::Array
                             ? nb::object(nb::str(gguf_value_type_name(kv.value.element).c_str()))
                             : nb::none();
    metadata.append(nb::make_tuple(kv.key, gguf_value_type_name(kv.value.type), element, value));
  }
  out["metadata"] = metadata;
  nb::list tensors;
  for (const GgufTensorInfo& t : f.tensors()) {
    nb::dict row;
    row["name"] = t.name;
    nb::list ne;
    for (std::uint64_t d : t.ne) ne.append(d);
    row["ne"] = ne;
    row["type"] = t.type;
    row["type_name"] = t.type_name;
    row["offset"] = t.offset;
    row["nbytes"] = t.nbytes;
    tensors.append(row);
  }
  out["tensors"] = tensors;
  return out;
}

nb::dict open_file(const std::string& path) { return describe(GgufFile::open(path)); }

FloatsOut tensor(const std::string& path, const std::string& name) {
  const GgufFile f = GgufFile::open(path);
  const GgufTensorInfo* t = f.find_tensor(name);
  std::vector<float> values = f.dequantize(name);  // a KeyError for an unknown name
  std::vector<std::size_t> shape(t->ne.rbegin(), t->ne.rend());
  return to_numpy(std::move(values), shape);
}

FloatsOut dequantize(std::uint32_t type, BytesIn data, std::uint64_t count) {
  std::vector<float> values;
  {
    nb::gil_scoped_release unlocked;
    values = gguf_dequantize(type, data.data(), data.shape(0), count);
  }
  return to_numpy(std::move(values), {values.size()});
}

}  // namespace

void bind_gguf(nb::module_& m) {
  m.def("_gguf_open", &open_file, nb::arg("path"),
        "Open a GGUF file with every container check; a dict of version, alignment, data_offset, file_bytes, "
        "metadata [(key, type, element type or None, value)] and tensors.");
  m.def("_gguf_tensor", &tensor, nb::arg("path"), nb::arg("name"),
        "The exact float32 values of one tensor, in row-major shape (ne reversed).");
  m.def("_gguf_dequantize", &dequantize, nb::arg("type"), nb::arg("data").noconvert(), nb::arg("count"),
        "uint8 blocks of ggml type `type` -> float32 (count,), the exact values of docs/gguf.md §6.");
  m.def(
      "_gguf_type_name", [](std::uint32_t type) { return gguf_tensor_type_name(type); }, nb::arg("type"),
      "The name of a ggml type id.");
}

namespace {
const Registration kRegistration{&bind_gguf, 40};
}  // namespace

}  // namespace samebits::python
