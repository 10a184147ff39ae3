// GGUF reader: the checklist of docs/gguf.md §3 in file order, with checked 64-bit arithmetic; a declared
// count or length is compared with the bytes that remain before anything is allocated from it.
#include "io/gguf.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <samebits/errors.hpp>

#include "io/file_bytes.hpp"
#include "numerics/gguf_quants.hpp"

namespace samebits::io {
namespace {

const std::string kPrefix = "samebits gguf: ";
constexpr std::uint64_t kMaxItems = std::uint64_t{1} << 30;  // strings and arrays (docs/gguf.md §2.3)
constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 62;

std::string name_text(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F && c != '\'' && c != '\\') {
      out += c;
    } else {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", u);
      out += buffer;
    }
  }
  return out + "'";
}

bool printable_ascii(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7E) return false;
  return true;
}

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment, bool& overflow) {
  const std::uint64_t rest = value % alignment;
  std::uint64_t out = value;
  if (rest != 0) overflow = overflow || __builtin_add_overflow(value, alignment - rest, &out);
  return out;
}

// The smallest encoding of one item of a type: a number's width (a string is at least its 8-byte length).
std::uint64_t min_item_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::Uint8:
    case GgufValueType::Int8:
    case GgufValueType::Bool:
      return 1;
    case GgufValueType::Uint16:
    case GgufValueType::Int16:
      return 2;
    case GgufValueType::Uint32:
    case GgufValueType::Int32:
    case GgufValueType::Float32:
      return 4;
    default:
      return 8;
  }
}

bool is_quantized(std::uint32_t type) { return type != 0 && type != 1 && type != 30; }

// Reads little-endian fields off the bytes, refusing (with the field's name) anything past the end.
class Cursor {
 public:
  Cursor(const unsigned char* bytes, std::uint64_t size, const std::string& where)
      : bytes_(bytes), size_(size), where_(where) {}
  std::uint64_t at() const { return pos_; }
  std::uint64_t remaining() const { return size_ - pos_; }
  [[noreturn]] void refuse(const std::string& what) const { throw_value_error(where_ + ": " + what); }
  void need(std::uint64_t bytes, const std::string& field) const {
    if (bytes > remaining())
      refuse(field + " at byte " + std::to_string(pos_) + " needs " + std::to_string(bytes) + " bytes, " +
             std::to_string(remaining()) + " remain (truncated file)");
  }
  std::uint64_t uint(int bytes, const std::string& field) {
    need(static_cast<std::uint64_t>(bytes), field);
    std::uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | bytes_[pos_ + static_cast<std::uint64_t>(i)];
    pos_ += static_cast<std::uint64_t>(bytes);
    return value;
  }
  std::uint32_t u32(const std::string& field) { return static_cast<std::uint32_t>(uint(4, field)); }
  std::uint64_t u64(const std::string& field) { return uint(8, field); }
  // A string: u64 length, bounded by the bytes remaining and by `limit`, then the bytes.
  std::string string(const std::string& field, std::uint64_t limit) {
    const std::uint64_t length = u64(field + " length");
    if (length > remaining())
      refuse(field + " declares " + std::to_string(length) + " bytes at byte " + std::to_string(pos_) + ", " +
             std::to_string(remaining()) + " remain");
    if (length > limit)
      refuse(field + " declares " + std::to_string(length) + " bytes, more than the limit " +
             std::to_string(limit));
    std::string out(reinterpret_cast<const char*>(bytes_ + pos_), static_cast<std::size_t>(length));
    pos_ += length;
    return out;
  }

 private:
  const unsigned char* bytes_;
  std::uint64_t size_;
  std::uint64_t pos_ = 0;
  const std::string& where_;
};

// A two's-complement integer of `width` bytes (1, 2, 4 or 8), read zero-extended, as its signed value.
std::int64_t sign_extended(std::uint64_t bits, int width) {
  const auto unused = static_cast<unsigned>(64 - 8 * width);
  return static_cast<std::int64_t>(bits << unused) >> unused;
}

GgufValueType value_type(Cursor& in, const std::string& field, bool element) {
  const std::uint32_t code = in.u32(field);
  if (code > 12) in.refuse(field + " is " + std::to_string(code) + ", not a GGUF value type (0..12)");
  if (element && code == 9) in.refuse(field + " is ARRAY: nested arrays are refused (docs/gguf.md §4)");
  return static_cast<GgufValueType>(code);
}

void read_item(Cursor& in, GgufValueType type, GgufValue& value, const std::string& field) {
  switch (type) {
    case GgufValueType::Uint8:
    case GgufValueType::Uint16:
    case GgufValueType::Uint32:
    case GgufValueType::Uint64:
      value.uints.push_back(in.uint(static_cast<int>(min_item_bytes(type)), field));
      break;
    case GgufValueType::Int8:
    case GgufValueType::Int16:
    case GgufValueType::Int32:
    case GgufValueType::Int64: {
      const auto width = static_cast<int>(min_item_bytes(type));
      value.ints.push_back(sign_extended(in.uint(width, field), width));
      break;
    }
    case GgufValueType::Float32: {
      const auto bits = static_cast<std::uint32_t>(in.uint(4, field));
      float f;
      std::memcpy(&f, &bits, 4);
      value.floats.push_back(static_cast<double>(f));
      break;
    }
    case GgufValueType::Float64: {
      const std::uint64_t bits = in.uint(8, field);
      double f;
      std::memcpy(&f, &bits, 8);
      value.floats.push_back(f);
      break;
    }
    case GgufValueType::Bool: {
      const std::uint64_t byte = in.uint(1, field);
      if (byte > 1) in.refuse(field + " is a BOOL byte " + std::to_string(byte) + ", not 0 or 1");
      value.uints.push_back(byte);
      break;
    }
    case GgufValueType::String:
      value.strings.push_back(in.string(field, kMaxItems));
      break;
    case GgufValueType::Array:
      break;  // refused by value_type before any item is read
  }
}

}  // namespace

const char* gguf_type_name(GgufValueType type) {
  static constexpr const char* kNames[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                           "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                           "UINT64", "INT64",   "FLOAT64"};
  const auto code = static_cast<std::uint32_t>(type);
  return code < 13 ? kNames[code] : "unknown";
}

GgufFile::GgufFile(const std::string& path) : path_(path) {
  bytes_ = std::make_unique<FileBytes>(path, kPrefix + path, "a GGUF file", 24, [](std::uint64_t size) {
    return " is " + std::to_string(size) + " bytes, shorter than the 24-byte GGUF header";
  });
  parse(bytes_->data(), bytes_->size());
}

GgufFile::GgufFile(std::string name, std::string bytes) : path_(std::move(name)) {
  bytes_ = std::make_unique<FileBytes>(std::move(bytes), kPrefix + path_, 24, [](std::uint64_t size) {
    return " is " + std::to_string(size) + " bytes, shorter than the 24-byte GGUF header";
  });
  parse(bytes_->data(), bytes_->size());
}

GgufFile::~GgufFile() = default;

void GgufFile::parse(const unsigned char* bytes, std::uint64_t size) {
  const std::string where = kPrefix + path_;
  file_bytes_ = size;
  Cursor in(bytes, size, where);
  // 1. header (docs/gguf.md §3 step 1)
  if (std::memcmp(bytes, "GGUF", 4) != 0) {
    char hex[40];
    std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", bytes[0], bytes[1], bytes[2], bytes[3]);
    in.refuse(std::string("magic is ") + hex + ", not 'GGUF' (47 47 55 46)");
  }
  in.u32("magic");
  version_ = in.u32("version");
  if (version_ != 0 && (version_ & 0xFFFFu) == 0)
    in.refuse("version field is " + std::to_string(version_) +
              ": big-endian (byte-swapped) GGUF is not supported");
  if (version_ != 2 && version_ != 3)
    in.refuse("GGUF version " + std::to_string(version_) + " is not supported (2 and 3 are)");
  const std::uint64_t tensor_count = in.u64("tensor_count");
  const std::uint64_t kv_count = in.u64("metadata_kv_count");
  // 2. counts against the smallest records they could describe
  if (tensor_count > in.remaining() / 24)
    in.refuse("tensor_count " + std::to_string(tensor_count) + " cannot fit in the " +
              std::to_string(in.remaining()) + " bytes after the header (a tensor info takes at least 24)");
  if (kv_count > in.remaining() / 14)
    in.refuse("metadata_kv_count " + std::to_string(kv_count) + " cannot fit in the " +
              std::to_string(in.remaining()) + " bytes after the header (a key/value takes at least 14)");
  // 3. metadata records
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    const std::string record = "metadata record " + std::to_string(i);
    std::string key = in.string(record + " key", 65535);
    if (key.empty()) in.refuse(record + " has an empty key");
    if (!printable_ascii(key)) in.refuse(record + " key " + name_text(key) + " is not printable ASCII");
    if (values_.count(key) != 0) in.refuse("metadata key " + name_text(key) + " appears twice");
    const std::string field = "metadata " + name_text(key);
    GgufValue value;
    value.type = value_type(in, field + " value type", false);
    value.element = value.type;
    if (value.type == GgufValueType::Array) {
      value.element = value_type(in, field + " array element type", true);
      const std::uint64_t count = in.u64(field + " array count");
      if (count > kMaxItems) in.refuse(field + " array count " + std::to_string(count) + " exceeds 2^30");
      if (count > in.remaining() / min_item_bytes(value.element))
        in.refuse(field + " array of " + std::to_string(count) + " " + gguf_type_name(value.element) +
                  " cannot fit in the " + std::to_string(in.remaining()) + " bytes that remain");
      for (std::uint64_t k = 0; k < count; ++k) read_item(in, value.element, value, field + " item");
    } else {
      read_item(in, value.type, value, field);
    }
    keys_.push_back(key);
    values_.emplace(std::move(key), std::move(value));
  }
  // 4. alignment
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufValueType::Uint32)
      in.refuse("general.alignment is " + std::string(gguf_type_name(a->type)) + ", not UINT32");
    const std::uint64_t value = a->uints[0];
    if (value == 0 || (value & (value - 1)) != 0)
      in.refuse("general.alignment " + std::to_string(value) + " is not a power of two");
    alignment_ = value;
  }
  // 5. tensor infos
  bool any_quantized = false;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    t.name = in.string("tensor info " + std::to_string(i) + " name", 63);
    if (t.name.empty()) in.refuse("tensor info " + std::to_string(i) + " has an empty name");
    if (!printable_ascii(t.name))
      in.refuse("tensor info " + std::to_string(i) + " name " + name_text(t.name) +
                " is not printable ASCII");
    const std::string tensor = "tensor " + name_text(t.name);
    if (tensor_index_.count(t.name) != 0) in.refuse(tensor + " appears twice");
    const std::uint32_t n_dims = in.u32(tensor + " n_dims");
    if (n_dims < 1 || n_dims > 4) in.refuse(tensor + " has n_dims " + std::to_string(n_dims) + ", not 1..4");
    std::uint64_t elements = 1;
    bool overflow = false;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t ne = in.u64(tensor + " ne[" + std::to_string(d) + "]");
      if (ne == 0 || ne >= kMaxDim)
        in.refuse(tensor + " ne[" + std::to_string(d) + "] is " + std::to_string(ne) + ", not in [1, 2^62)");
      overflow = overflow || __builtin_mul_overflow(elements, ne, &elements);
      t.ne.push_back(ne);
    }
    if (overflow || elements >= (std::uint64_t{1} << 63)) in.refuse(tensor + " has more than 2^63 elements");
    t.elements = elements;
    t.type = in.u32(tensor + " type");
    const numerics::GgmlTypeInfo info = numerics::ggml_type_info(t.type);
    if (t.type >= 43) in.refuse(tensor + " has unknown ggml type " + std::to_string(t.type));
    if (std::string_view(info.name) == "removed")
      in.refuse(tensor + " has removed ggml type " + std::to_string(t.type));
    if (!info.supported)
      in.refuse(tensor + " has type " + info.name + " (" + std::to_string(t.type) +
                "), which samebits refuses by name (docs/gguf.md §5)");
    if (t.ne[0] % info.block_elements != 0)
      in.refuse(tensor + " of type " + info.name + " has ne[0] " + std::to_string(t.ne[0]) +
                ", not a multiple of its block of " + std::to_string(info.block_elements));
    // The row count times the row bytes; elements < 2^63 bounds the first product.
    std::uint64_t nbytes = (t.ne[0] / info.block_elements) * info.block_bytes;
    if (__builtin_mul_overflow(nbytes, elements / t.ne[0], &nbytes))
      in.refuse(tensor + " needs more than 2^64 bytes");
    t.nbytes = nbytes;
    t.offset = in.u64(tensor + " offset");
    any_quantized = any_quantized || is_quantized(t.type);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  // 6. data section: contiguity and bounds
  bool overflow = false;
  data_offset_ = tensor_count > 0 ? align_up(in.at(), alignment_, overflow) : in.at();
  std::uint64_t expected = 0;
  for (const GgufTensor& t : tensors_) {
    const std::string tensor = "tensor " + name_text(t.name);
    if (t.offset != expected)
      in.refuse(tensor + " has offset " + std::to_string(t.offset) + ", expected " +
                std::to_string(expected) + " (tensors are stored in info order, each padded to " +
                std::to_string(alignment_) + ")");
    std::uint64_t end = 0;
    if (__builtin_add_overflow(data_offset_, t.offset, &end) || __builtin_add_overflow(end, t.nbytes, &end) ||
        end > size)
      in.refuse(tensor + " data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                ") lies beyond the end of the file (" + std::to_string(size) + " bytes, data section at " +
                std::to_string(data_offset_) + ")");
    expected = align_up(t.offset + t.nbytes, alignment_, overflow);
  }
  // 7. trailing bytes: at most the padding of the last tensor
  std::uint64_t limit = 0;
  if (tensors_.empty())
    limit = align_up(in.at(), alignment_, overflow);
  else if (__builtin_add_overflow(data_offset_, expected, &limit))
    overflow = true;
  if (!overflow && size > limit)
    in.refuse(std::to_string(size - limit) + " trailing bytes after the data section (which ends at byte " +
              std::to_string(limit) + ")");
  data_ = bytes + data_offset_;
  // 9. container-level model checks
  if (const GgufValue* type = find("general.type")) {
    if (type->type != GgufValueType::String) in.refuse("general.type is not a STRING");
    if (type->strings[0] != "model")
      in.refuse("general.type " + name_text(type->strings[0]) + " is refused: only 'model' files are read");
  }
  if (const GgufValue* split = find("split.count")) {
    const std::uint64_t n = !split->uints.empty() ? split->uints[0] : 0;
    if (split->count() != 1 || !split->strings.empty() || !split->floats.empty() || !split->ints.empty() ||
        n > 1)
      in.refuse("multi-file (split) GGUF is not supported (split.count)");
  }
  const GgufValue* qv = find("general.quantization_version");
  if (qv != nullptr && (qv->type != GgufValueType::Uint32 || qv->uints[0] != 2))
    in.refuse("general.quantization_version must be UINT32 2");
  if (qv == nullptr && any_quantized) in.refuse("quantized tensors but no general.quantization_version");
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::check_finite(const GgufTensor& t) const {
  const numerics::GgmlTypeInfo info = numerics::ggml_type_info(t.type);
  const std::uint64_t blocks = t.elements / info.block_elements;
  const unsigned char* at = tensor_bytes(t);
  for (std::uint64_t b = 0; b < blocks; ++b)
    if (numerics::ggml_block_nonfinite(t.type, at + b * info.block_bytes))
      throw_value_error(kPrefix + path_ + ": tensor " + name_text(t.name) + " (" + info.name +
                        ") holds a non-finite " + (info.block_elements == 1 ? "value" : "scale") +
                        " at block " + std::to_string(b) + "; refused (docs/gguf.md §7.2)");
}

std::vector<float> GgufFile::dequantize(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (t == nullptr) throw_key_error(kPrefix + path_ + " holds no tensor " + name_text(name));
  const numerics::GgmlTypeInfo info = numerics::ggml_type_info(t->type);
  std::vector<float> out(static_cast<std::size_t>(t->elements));
  if (numerics::ggml_dequantize_twin(t->type, tensor_bytes(*t), t->elements / info.block_elements,
                                     out.data()) >= 0)
    check_finite(*t);  // names the block
  return out;
}

}  // namespace samebits::io
