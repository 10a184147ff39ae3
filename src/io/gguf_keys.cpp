// Typed reads of GGUF metadata: the type checks the model and tokenizer mappings share.
#include "io/gguf_keys.hpp"

#include <samebits/errors.hpp>

namespace samebits::io {
namespace {

const GgufValue* scalar(const GgufFile& file, std::string_view key, const char* wanted) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return nullptr;
  if (v->type == GgufValueType::Array)
    throw_value_error(gguf_where(file) + "key '" + std::string(key) + "' is an ARRAY of " +
                      gguf_type_name(v->element) + "; samebits reads one " + wanted +
                      " value (per-layer arrays are not supported)");
  return v;
}

[[noreturn]] void wrong_type(const GgufFile& file, std::string_view key, const GgufValue& v,
                             const char* wanted) {
  throw_value_error(gguf_where(file) + "key '" + std::string(key) + "' is " + gguf_type_name(v.type) +
                    ", not " + wanted);
}

}  // namespace

std::string gguf_where(const GgufFile& file) { return "samebits gguf: " + file.path() + ": "; }

std::optional<std::string> gguf_string(const GgufFile& file, std::string_view key) {
  const GgufValue* v = scalar(file, key, "STRING");
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::String) wrong_type(file, key, *v, "STRING");
  return v->strings.at(0);
}

std::optional<std::uint64_t> gguf_uint(const GgufFile& file, std::string_view key) {
  const GgufValue* v = scalar(file, key, "integer");
  if (v == nullptr) return std::nullopt;
  switch (v->type) {
    case GgufValueType::Uint8:
    case GgufValueType::Uint16:
    case GgufValueType::Uint32:
    case GgufValueType::Uint64:
      return v->uints.at(0);
    case GgufValueType::Int8:
    case GgufValueType::Int16:
    case GgufValueType::Int32:
    case GgufValueType::Int64:
      if (v->ints.at(0) < 0)
        throw_value_error(gguf_where(file) + "key '" + std::string(key) + "' is " +
                          std::to_string(v->ints.at(0)) + "; a count or id cannot be negative");
      return static_cast<std::uint64_t>(v->ints.at(0));
    default:
      wrong_type(file, key, *v, "an integer");
  }
}

std::optional<double> gguf_float(const GgufFile& file, std::string_view key) {
  const GgufValue* v = scalar(file, key, "FLOAT32");
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::Float32 && v->type != GgufValueType::Float64)
    wrong_type(file, key, *v, "FLOAT32");
  return v->floats.at(0);
}

std::optional<bool> gguf_bool(const GgufFile& file, std::string_view key) {
  const GgufValue* v = scalar(file, key, "BOOL");
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::Bool) wrong_type(file, key, *v, "BOOL");
  return v->uints.at(0) != 0;
}

const GgufValue* gguf_array(const GgufFile& file, std::string_view key, GgufValueType element) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return nullptr;
  if (v->type != GgufValueType::Array || v->element != element)
    throw_value_error(
        gguf_where(file) + "key '" + std::string(key) + "' is " + gguf_type_name(v->type) +
        (v->type == GgufValueType::Array ? std::string(" of ") + gguf_type_name(v->element) : "") +
        ", not an ARRAY of " + gguf_type_name(element));
  return v;
}

}  // namespace samebits::io
