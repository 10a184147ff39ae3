// Binding of the Samba config rules and checkpoint readers: Python values <-> the JSON value model, so one
// C++ implementation (and one set of messages) serves samebits.SambaConfig and the checkpoint files.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <memory>
#include <samebits/checkpoint.hpp>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "array_convert.hpp"
#include "bindings.hpp"
#include "samba_convert.hpp"

namespace samebits::python {
namespace {

using json::Value;

constexpr int kMaxDepth = 64;  // configs nest two levels; anything deeper is not a config

nb::object steal_or_throw(PyObject* object) {
  if (object == nullptr) throw nb::python_error();
  return nb::steal(object);
}

// Python value (already normalized by the caller: None, bool, int, float, str, list/tuple, dict) -> JSON.
Value to_value(nb::handle object, int depth) {
  if (depth > kMaxDepth) throw_type_error("samebits.SambaConfig: the value nests too deeply");
  PyObject* p = object.ptr();
  if (object.is_none()) return Value();
  if (PyBool_Check(p)) return Value::make_bool(p == Py_True);
  if (PyLong_Check(p)) {
    nb::object decimal = steal_or_throw(PyNumber_ToBase(p, 10));  // exact, any size
    return Value::make_integer(nb::cast<std::string>(decimal));
  }
  if (PyFloat_Check(p)) return Value::make_float(PyFloat_AsDouble(p));
  if (PyUnicode_Check(p)) {
    Py_UCS4* points = PyUnicode_AsUCS4Copy(p);
    if (points == nullptr) throw nb::python_error();
    std::u32string text(reinterpret_cast<const char32_t*>(points),
                        static_cast<std::size_t>(PyUnicode_GetLength(p)));
    PyMem_Free(points);
    return Value::make_string(std::move(text));
  }
  if (PyList_Check(p) || PyTuple_Check(p)) {
    Value::Array items;
    for (nb::handle item : object) items.push_back(to_value(item, depth + 1));
    return Value::make_array(std::move(items));
  }
  if (PyDict_Check(p)) {
    Value::Object members;
    for (auto [key, item] : nb::borrow<nb::dict>(object)) {
      if (!PyUnicode_Check(key.ptr())) throw_type_error("samebits.SambaConfig: dict keys must be str");
      Value name = to_value(key, depth + 1);
      members.emplace_back(name.as_string(), to_value(item, depth + 1));
    }
    return Value::make_object(std::move(members));
  }
  throw_type_error(
      "samebits.SambaConfig: cannot take a value of type " +
      nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(p))).attr("__name__"))));
}

nb::object to_python(const Value& value) {
  switch (value.type()) {
    case json::Type::Null:
      return nb::none();
    case json::Type::Bool:
      return nb::bool_(value.as_bool());
    case json::Type::Integer:
      return steal_or_throw(PyLong_FromString(value.integer_decimal().c_str(), nullptr, 10));
    case json::Type::Float:
      return steal_or_throw(PyFloat_FromDouble(value.as_float()));
    case json::Type::String: {
      const std::u32string& text = value.as_string();
      return steal_or_throw(
          PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, text.data(), static_cast<Py_ssize_t>(text.size())));
    }
    case json::Type::Array: {
      nb::list items;
      for (const Value& item : value.as_array()) items.append(to_python(item));
      return items;
    }
    case json::Type::Object: {
      nb::dict members;
      for (const auto& [key, item] : value.as_object()) {
        members[steal_or_throw(PyUnicode_FromKindAndData(
            PyUnicode_4BYTE_KIND, key.data(), static_cast<Py_ssize_t>(key.size())))] = to_python(item);
      }
      return members;
    }
  }
  return nb::none();
}

// Canonical JSON text back to a Python value; "" (an absent key) is None.
nb::object parsed_or_none(const std::string& canonical) {
  return canonical.empty() ? nb::none() : to_python(json::parse(canonical));
}

nb::tuple shape_tuple(const std::vector<std::int64_t>& shape) {
  nb::list dims;
  for (std::int64_t d : shape) dims.append(nb::int_(d));
  return nb::tuple(dims);
}

nb::list registry_list(const std::vector<SambaTensorEntry>& registry) {
  nb::list out;
  for (const SambaTensorEntry& entry : registry) {
    out.append(nb::make_tuple(entry.name, shape_tuple(entry.shape), entry.offset, entry.size));
  }
  return out;
}

nb::dict info_dict(const SambaCheckpointContents& checkpoint) {
  const SambaCheckpointInfo& info = checkpoint.info;
  nb::dict out;
  out["format"] = info.format == SambaCheckpointFormat::StreamV2 ? "stream-v2" : "legacy-json";
  out["schema"] = info.schema;
  out["file_bytes"] = nb::int_(info.file_bytes);
  out["header_bytes"] = nb::int_(info.header_bytes);
  out["integrity_sha256"] = info.integrity_sha256;
  nb::list arrays;
  for (const SambaArrayRecord& record : info.arrays) {
    nb::dict item;
    item["name"] = record.name;
    item["dtype"] = record.dtype;
    item["elements"] = nb::int_(record.elements);
    item["sha256"] = record.sha256;
    arrays.append(item);
  }
  out["arrays"] = arrays;
  out["numeric_mode"] = info.numeric_mode;
  out["numeric_profile"] = info.numeric_profile;
  out["t"] = parsed_or_none(info.step_json);
  out["optimizer"] = parsed_or_none(info.optimizer_json);
  out["schedule"] = parsed_or_none(info.schedule_json);
  out["rng"] = parsed_or_none(info.rng_json);
  out["parameter_count"] = nb::int_(info.parameter_count);
  out["tensor_count"] = nb::int_(info.tensor_count);
  out["registry"] = registry_list(checkpoint.registry);
  return out;
}

// {name: float32 array} in registry order: writable views of one engine-owned buffer (the tensors are
// disjoint slices, so no array can see another's writes).
nb::dict weight_dict(SambaCheckpointContents& checkpoint) {
  auto* owned = new std::vector<float>(std::move(checkpoint.parameters));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  nb::dict out;
  for (const SambaTensorEntry& entry : checkpoint.registry) {
    std::vector<std::size_t> shape(entry.shape.begin(), entry.shape.end());
    out[nb::str(entry.name.c_str())] =
        FloatArrayOut(owned->data() + entry.offset, shape.size(), shape.data(), owner);
  }
  return out;
}

}  // namespace

SambaConfig samba_config_of(const nb::dict& fields) { return SambaConfig::from_json(to_value(fields, 0)); }

nb::object samba_config_dict(const SambaConfig& config) { return to_python(config.to_json()); }

nb::list layer_list(SambaState& state) {
  nb::list layers;
  for (std::int64_t i = 0; i < state.layer_count(); ++i) {
    if (Mamba3State* mamba3 = state.mamba3(i))
      layers.append(nb::cast(std::move(*mamba3), nb::rv_policy::move));
    else
      layers.append(nb::cast(std::move(*state.attention(i)), nb::rv_policy::move));
  }
  return layers;
}

void bind_samba_io(nb::module_& m) {
  // The SambaConfig rules. `fields` holds the constructor's ten values after Python's int()/str()/bool()
  // /float() (samebits/_samba_config.py does those); the result is to_dict() of the validated config.
  m.def("samba_config_validate",
        [](const nb::dict& fields) { return samba_config_dict(samba_config_of(fields)); });
  m.def("samba_config_registry",
        [](const nb::dict& fields) { return registry_list(samba_config_of(fields).registry()); });
  m.def("samba_config_block_shapes", [](const nb::dict& fields, const std::string& kind) {
    nb::list out;
    for (const TensorInfo& spec : samba_config_of(fields).block_shapes(kind)) {
      out.append(nb::make_tuple(spec.name, shape_tuple(spec.shape)));
    }
    return out;
  });
  // SambaInference.from_checkpoint's reading half: (config dict, {name: float32 array}, info dict).
  m.def("samba_read_checkpoint", [](const std::string& path) {
    std::unique_ptr<SambaCheckpointContents> checkpoint;
    {
      nb::gil_scoped_release release;
      checkpoint = std::make_unique<SambaCheckpointContents>(read_samba_checkpoint(path));
    }
    nb::object config = samba_config_dict(checkpoint->config);
    nb::dict info = info_dict(*checkpoint);
    nb::dict weights = weight_dict(*checkpoint);
    return nb::make_tuple(config, weights, info);
  });
}

namespace {
const Registration kRegistration{&bind_samba_io, 60};
}  // namespace

}  // namespace samebits::python
