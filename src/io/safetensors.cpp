// Safetensors reader: the header's every bound checked before anything is allocated from it, tensors copied
// out of a read-only map with exact widening, and checkpoint directories with their sharded index.
#include "io/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <samebits/errors.hpp>
#include <samebits/lowbit.hpp>
#include <samebits/tensor.hpp>
#include <set>

#include "io/file_bytes.hpp"
#include "models/samba_config.hpp"

namespace samebits::io {
namespace {

namespace fs = std::filesystem;

const std::string kPrefix = "samebits.models.safetensors: ";

std::string repr_of(std::string_view text) { return models::python_str_repr(text); }

std::string list_repr(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + repr_of(items[i]);
  return out + "]";
}

SafetensorsDtype kind_of(std::string_view dtype) {
  if (dtype == "F32") return SafetensorsDtype::F32;
  if (dtype == "BF16") return SafetensorsDtype::BF16;
  if (dtype == "F16") return SafetensorsDtype::F16;
  if (dtype == "I32") return SafetensorsDtype::I32;
  if (dtype == "I64") return SafetensorsDtype::I64;
  return SafetensorsDtype::Other;
}

std::uint64_t item_bytes(SafetensorsDtype kind) {
  switch (kind) {
    case SafetensorsDtype::F32:
    case SafetensorsDtype::I32:
      return 4;
    case SafetensorsDtype::BF16:
    case SafetensorsDtype::F16:
      return 2;
    case SafetensorsDtype::I64:
      return 8;
    case SafetensorsDtype::Other:
      break;
  }
  return 0;
}

// A JSON string as UTF-8 (tensor names and dtypes).
std::string utf8_of(const json::Value& value) { return json::to_utf8(value.as_string()); }

template <typename T>
T load(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

std::int64_t SafetensorsEntry::elements() const {
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  return count;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  bytes_ = std::make_unique<FileBytes>(path, kPrefix + path, "a .safetensors file", 8, [](std::uint64_t) {
    return std::string(" is shorter than its 8-byte header length");
  });
  parse(bytes_->data(), bytes_->size());
}

SafetensorsFile::SafetensorsFile(std::string name, std::string bytes) : path_(std::move(name)) {
  bytes_ = std::make_unique<FileBytes>(std::move(bytes), kPrefix + path_, 8, [](std::uint64_t) {
    return std::string(" is shorter than its 8-byte header length");
  });
  parse(bytes_->data(), bytes_->size());
}

void SafetensorsFile::parse(const unsigned char* bytes, std::uint64_t file_bytes) {
  const std::string where = kPrefix + path_;
  const auto header_bytes = load<std::uint64_t>(bytes);  // little-endian on every host samebits runs on
  if (header_bytes > kSafetensorsHeaderLimit)
    throw_value_error(where + ": header length " + std::to_string(header_bytes) + " exceeds " +
                      std::to_string(kSafetensorsHeaderLimit));
  if (header_bytes > file_bytes - 8)
    throw_value_error(where + ": header is truncated (" + std::to_string(file_bytes - 8) + " of " +
                      std::to_string(header_bytes) + " bytes)");
  data_ = bytes + 8 + header_bytes;
  data_bytes_ = file_bytes - 8 - header_bytes;
  json::Value header;
  try {
    header = json::parse(
        std::string_view(reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(header_bytes)),
        json::Dialect::Python);
  } catch (const json::ParseError& e) {
    throw_value_error(where + ": the header is not JSON: " + e.what());
  }
  if (!header.is_object()) throw_value_error(where + ": the header is not a JSON object");
  for (const auto& [key, value] : header.as_object()) {
    const std::string name = json::to_utf8(key);
    if (name == "__metadata__") {
      metadata_ = value;
      continue;
    }
    const std::string tensor = where + ": tensor " + repr_of(name);
    const json::Value* dtype = value.find("dtype");
    const json::Value* shape = value.find("shape");
    const json::Value* offsets = value.find("data_offsets");
    if (!value.is_object() || dtype == nullptr || shape == nullptr || offsets == nullptr)
      throw_value_error(tensor + " lacks dtype/shape/data_offsets");
    SafetensorsEntry entry;
    entry.name = name;
    if (!dtype->is_string()) throw_value_error(tensor + ": dtype must be a string");
    entry.dtype = utf8_of(*dtype);
    entry.kind = kind_of(entry.dtype);
    if (!shape->is_array()) throw_value_error(tensor + ": shape must be a list of non-negative integers");
    std::uint64_t elements = 1;
    bool overflow = false;
    for (const json::Value& d : shape->as_array()) {
      const std::optional<std::int64_t> extent = d.is_integer() ? d.as_int64() : std::nullopt;
      if (!extent || *extent < 0)
        throw_value_error(tensor + ": shape must be a list of non-negative integers");
      entry.shape.push_back(*extent);
      overflow = overflow || __builtin_mul_overflow(elements, static_cast<std::uint64_t>(*extent), &elements);
    }
    if (!offsets->is_array() || offsets->as_array().size() != 2)
      throw_value_error(tensor + ": data_offsets must be [begin, end]");
    for (int i = 0; i < 2; ++i) {
      const json::Value& o = offsets->as_array()[static_cast<std::size_t>(i)];
      const std::optional<std::int64_t> at = o.is_integer() ? o.as_int64() : std::nullopt;
      (i == 0 ? entry.begin : entry.end) =
          at && *at >= 0 ? static_cast<std::uint64_t>(*at) : ~std::uint64_t{0};
    }
    if (entry.begin > entry.end || entry.end > data_bytes_)
      throw_value_error(tensor + " offsets [" + json::canonical_json(offsets->as_array()[0]) + ", " +
                        json::canonical_json(offsets->as_array()[1]) + ") fall outside the " +
                        std::to_string(data_bytes_) + "-byte data section");
    const std::uint64_t itemsize = item_bytes(entry.kind);
    std::uint64_t needed = 0;
    const bool too_big = overflow || __builtin_mul_overflow(elements, itemsize, &needed);
    if (itemsize != 0 && (too_big || needed != entry.end - entry.begin))
      throw_value_error(tensor + " of " + entry.dtype + " shape " + shape_repr(entry.shape) + " needs " +
                        (too_big ? std::string("more than 2^64") : std::to_string(needed)) +
                        " bytes, the offsets give " + std::to_string(entry.end - entry.begin));
    index_[entry.name] = entries_.size();
    entries_.push_back(std::move(entry));
  }
}

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const SafetensorsEntry& SafetensorsFile::entry(std::string_view name) const {
  const SafetensorsEntry* found = find(name);
  if (found == nullptr) throw_key_error(kPrefix + path_ + " holds no tensor " + repr_of(name));
  return *found;
}

const unsigned char* SafetensorsFile::bytes_of(const SafetensorsEntry& entry) const {
  return data_ + entry.begin;
}

void SafetensorsFile::refuse_dtype(const SafetensorsEntry& entry, const char* wanted) const {
  if (entry.kind == SafetensorsDtype::Other)
    throw_type_error(kPrefix + "tensor " + repr_of(entry.name) + " in " + path_ + " has dtype " +
                     entry.dtype +
                     ", which this reader refuses by name; it reads ['BF16', 'F16', 'F32', 'I32', 'I64'] and "
                     "downcasts nothing");
  throw_type_error(kPrefix + "tensor " + repr_of(entry.name) + " in " + path_ + " is " + entry.dtype + "; " +
                   wanted);
}

std::vector<float> SafetensorsFile::read_float32(std::string_view name) const {
  const SafetensorsEntry& e = entry(name);
  const auto count = static_cast<std::size_t>(e.elements());
  const unsigned char* at = bytes_of(e);
  std::vector<float> out(count);
  switch (e.kind) {
    case SafetensorsDtype::F32:
      if (count > 0) std::memcpy(out.data(), at, count * 4);
      return out;
    case SafetensorsDtype::BF16:
      for (std::size_t i = 0; i < count; ++i) out[i] = lowbit::f32_from_bf16(load<std::uint16_t>(at + 2 * i));
      return out;
    case SafetensorsDtype::F16:
      for (std::size_t i = 0; i < count; ++i) out[i] = lowbit::f32_from_f16(load<std::uint16_t>(at + 2 * i));
      return out;
    default:
      refuse_dtype(e, "a weight must be F32, F16 or BF16");
  }
}

std::vector<std::uint16_t> SafetensorsFile::read_bf16_bits(std::string_view name) const {
  const SafetensorsEntry& e = entry(name);
  if (e.kind != SafetensorsDtype::BF16) refuse_dtype(e, "its bf16 bits exist only for a BF16 tensor");
  std::vector<std::uint16_t> out(static_cast<std::size_t>(e.elements()));
  if (!out.empty()) std::memcpy(out.data(), bytes_of(e), out.size() * 2);
  return out;
}

std::vector<std::int64_t> SafetensorsFile::read_integers(std::string_view name) const {
  const SafetensorsEntry& e = entry(name);
  const auto count = static_cast<std::size_t>(e.elements());
  const unsigned char* at = bytes_of(e);
  std::vector<std::int64_t> out(count);
  if (e.kind == SafetensorsDtype::I32) {
    for (std::size_t i = 0; i < count; ++i) out[i] = load<std::int32_t>(at + 4 * i);
  } else if (e.kind == SafetensorsDtype::I64) {
    for (std::size_t i = 0; i < count; ++i) out[i] = load<std::int64_t>(at + 8 * i);
  } else {
    refuse_dtype(e, "integers are read only from I32 or I64");
  }
  return out;
}

// ------------------------------------------------------------------------------ checkpoints

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& path) : path_(path) {
  const std::string where = kPrefix + path;
  std::error_code error;
  if (!fs::exists(path, error)) throw_not_found(where + " does not exist");
  std::vector<std::string> shards;
  std::map<std::string, std::string> weight_map;  // name -> shard file name, from the index
  if (fs::is_directory(path, error)) {
    const fs::path dir(path);
    const fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(index, error)) {
      const std::string index_path = index.string();
      json::Value value;
      {
        std::ifstream in(index_path, std::ios::binary);
        if (!in) throw_value_error(kPrefix + index_path + " cannot be read");
        const std::uint64_t size = fs::file_size(index, error);
        if (error || size > kSafetensorsHeaderLimit)
          throw_value_error(kPrefix + index_path + " is larger than " +
                            std::to_string(kSafetensorsHeaderLimit) + " bytes");
        std::string text(static_cast<std::size_t>(size), '\0');
        in.read(text.data(), static_cast<std::streamsize>(size));
        try {
          value = json::parse(text, json::Dialect::Python);
        } catch (const json::ParseError& e) {
          throw_value_error(kPrefix + index_path + " is not JSON: " + e.what());
        }
      }
      const json::Value* map = value.is_object() ? value.find("weight_map") : nullptr;
      if (map == nullptr || !map->is_object() || map->as_object().empty())
        throw_value_error(kPrefix + index_path + " has no weight_map");
      std::set<std::string> files;
      for (const auto& [name, file] : map->as_object()) {
        if (!file.is_string())
          throw_value_error(kPrefix + index_path + ": weight_map maps " + repr_of(json::to_utf8(name)) +
                            " to a non-string");
        const std::string shard = utf8_of(file);
        // A shard is a file beside the index, never a path elsewhere.
        if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
          throw_value_error(kPrefix + index_path + ": weight_map names the shard " + repr_of(shard) +
                            ", not a file name in this directory");
        files.insert(shard);
        weight_map[json::to_utf8(name)] = shard;
      }
      std::vector<std::string> missing;
      for (const std::string& file : files) {
        if (fs::is_regular_file(dir / file, error))
          shards.push_back((dir / file).string());
        else
          missing.push_back(file);
      }
      if (!missing.empty()) throw_not_found(where + " names shards that do not exist: " + list_repr(missing));
    } else if (fs::is_regular_file(dir / "model.safetensors", error)) {
      shards.push_back((dir / "model.safetensors").string());
    } else {
      std::vector<std::string> found;
      for (const auto& item : fs::directory_iterator(dir, error))
        if (item.path().extension() == ".safetensors") found.push_back(item.path().filename().string());
      std::sort(found.begin(), found.end());
      if (found.size() != 1)
        throw_not_found(where + " holds neither model.safetensors nor model.safetensors.index.json (found " +
                        list_repr(found) + "; one unnamed shard set is not an index)");
      shards.push_back((dir / found[0]).string());
    }
  } else {
    shards.push_back(path);
  }
  for (const std::string& shard : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(shard));
    const std::size_t index = files_.size() - 1;
    for (const SafetensorsEntry& e : files_.back()->entries()) {
      const auto [at, fresh] = where_.try_emplace(e.name, index);
      if (!fresh)
        throw_value_error(where + ": tensor " + repr_of(e.name) + " appears in both " +
                          files_[at->second]->path() + " and " + shard);
    }
  }
  for (const auto& [name, shard] : weight_map) {
    const auto at = where_.find(name);
    const std::string expected = (fs::path(path) / shard).string();
    if (at == where_.end() || files_[at->second]->path() != expected)
      throw_value_error(where + ": the index maps " + repr_of(name) + " to " + expected +
                        " but that shard does not hold it");
  }
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& entry : where_) out.push_back(entry.first);
  return out;
}

const SafetensorsFile& SafetensorsCheckpoint::file_of(std::string_view name) const {
  const auto at = where_.find(name);
  if (at == where_.end()) throw_key_error(kPrefix + path_ + " holds no tensor " + repr_of(name));
  return *files_[at->second];
}

const SafetensorsEntry& SafetensorsCheckpoint::entry(std::string_view name) const {
  return *file_of(name).find(name);
}

std::vector<std::string> SafetensorsCheckpoint::files() const {
  std::vector<std::string> out;
  for (const auto& file : files_) out.push_back(file->path());
  return out;
}

}  // namespace samebits::io
