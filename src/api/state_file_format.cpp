// The saved-state container (docs/formats.md §9): writing it and reading it back with every bound checked.
#include "api/state_file_format.hpp"

#include <bit>
#include <cstring>
#include <iterator>
#include <limits>
#include <samebits/errors.hpp>
#include <string_view>
#include <utility>

#include "io/sha256.hpp"
#include "numerics/fp.hpp"

namespace samebits::state_file {

static_assert(std::endian::native == std::endian::little, "the state file is written in host order");

namespace {

constexpr char kMagic[8] = {'S', 'B', 'S', 'T', 'A', 'T', 'E', '\n'};
constexpr std::size_t kFingerprintBytes = 64;  // lowercase hex SHA-256
// magic, version, kind, fingerprint, body length
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + kFingerprintBytes + 8;
constexpr std::size_t kChecksumBytes = 32;
constexpr std::uint8_t kCounterEntry = 0;
constexpr std::uint8_t kArrayEntry = 1;

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
  return true;
}

// A cursor over the body that refuses (through the reader) any read past its end.
class Cursor {
 public:
  Cursor(const Reader& reader, const unsigned char* data, std::size_t begin, std::size_t end)
      : reader_(reader), data_(data), at_(begin), end_(end) {}
  template <typename T>
  T take(const std::string& field) {
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_ + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string text(std::size_t length, const std::string& field) {
    need(length, field);
    std::string out(reinterpret_cast<const char*>(data_ + at_), length);
    at_ += length;
    return out;
  }
  void need(std::uint64_t bytes, const std::string& field) const {
    if (bytes > end_ - at_)
      reader_.refuse(field, "needs " + std::to_string(bytes) + " bytes, " + std::to_string(end_ - at_) +
                                " remain in the body");
  }
  std::size_t at() const { return at_; }
  void skip(std::size_t bytes) { at_ += bytes; }
  bool done() const { return at_ == end_; }

 private:
  const Reader& reader_;
  const unsigned char* data_;
  std::size_t at_;
  std::size_t end_;
};

}  // namespace

std::string kind_name(Kind kind) {
  // In the order of SavedStates (samebits/state_file.hpp).
  static const char* const names[] = {"TransformerState", "Mamba1State", "Mamba2State",
                                      "Mamba3State",      "SambaState",  "CausalLMState"};
  if (kind >= 1 && kind <= std::size(names)) return names[kind - 1];
  return "unknown kind " + std::to_string(kind);
}

void Writer::counter(const std::string& name, std::int64_t value) {
  put<std::uint16_t>(body_, static_cast<std::uint16_t>(name.size()));
  body_ += name;
  put<std::uint8_t>(body_, kCounterEntry);
  put<std::int64_t>(body_, value);
  ++entries_;
}

void Writer::array(const std::string& name, const std::vector<std::int64_t>& shape, const float* data) {
  put<std::uint16_t>(body_, static_cast<std::uint16_t>(name.size()));
  body_ += name;
  put<std::uint8_t>(body_, kArrayEntry);
  put<std::uint8_t>(body_, static_cast<std::uint8_t>(shape.size()));
  std::int64_t count = 1;
  for (std::int64_t extent : shape) {
    put<std::int64_t>(body_, extent);
    count *= extent;
  }
  body_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(count) * sizeof(float));
  ++entries_;
}

std::vector<std::uint8_t> Writer::finish(Kind kind, const std::string& fingerprint) const {
  std::string out(kMagic, sizeof kMagic);
  put<std::uint32_t>(out, kVersion);
  put<std::uint32_t>(out, kind);
  out += fingerprint;
  put<std::uint64_t>(out, 4 + body_.size());
  put<std::uint32_t>(out, entries_);
  out += body_;
  const io::Sha256Digest digest = io::sha256(out);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return std::vector<std::uint8_t>(out.begin(), out.end());
}

Reader::Reader(const unsigned char* data, std::uint64_t size, std::string source, Kind kind,
               const std::string& fingerprint)
    : data_(data), source_(std::move(source)) {
  // The container first: length, magic, version, declared length, checksum (so a truncated or altered file
  // is named as such before any field of it is believed).
  if (size < kHeaderBytes + kChecksumBytes)
    refuse("file", "truncated: " + std::to_string(size) + " bytes, a header and checksum need " +
                       std::to_string(kHeaderBytes + kChecksumBytes));
  if (std::memcmp(data, kMagic, sizeof kMagic) != 0) refuse("magic", "not a samebits saved state");
  std::uint32_t version = 0, stored_kind = 0;
  std::memcpy(&version, data + 8, 4);
  std::memcpy(&stored_kind, data + 12, 4);
  if (version ==
      1)  // docs/formats.md §9.1: its fingerprint left optional tensors out, so it cannot be trusted
    refuse("version",
           "version 1, written before the fingerprint covered every tensor; this build reads version " +
               std::to_string(kVersion) + " (save the state again with this build)");
  if (version != kVersion)
    refuse("version",
           "version " + std::to_string(version) + ", this build reads version " + std::to_string(kVersion));
  std::uint64_t body = 0;
  std::memcpy(&body, data + 16 + kFingerprintBytes, 8);
  const std::uint64_t room = size - kHeaderBytes - kChecksumBytes;
  if (body > room)
    refuse("body_length", "truncated: the header declares " + std::to_string(body) +
                              " body bytes, the file holds " + std::to_string(room));
  if (body < room)
    refuse("body_length", std::to_string(room - body) + " trailing bytes after the declared body");
  const io::Sha256Digest digest = io::sha256(data, static_cast<std::size_t>(size - kChecksumBytes));
  if (std::memcmp(digest.data(), data + size - kChecksumBytes, kChecksumBytes) != 0)
    refuse("checksum", "SHA-256 mismatch: the file was altered or damaged");
  if (stored_kind != kind) refuse("kind", "holds a " + kind_name(stored_kind) + ", not a " + kind_name(kind));
  const std::string stored(reinterpret_cast<const char*>(data + 16), kFingerprintBytes);
  if (stored != fingerprint)
    refuse("fingerprint", "saved from another model (" + stored.substr(0, 16) + "..., this model is " +
                              fingerprint.substr(0, 16) + "...)");

  Cursor cursor(*this, data, kHeaderBytes, static_cast<std::size_t>(kHeaderBytes + body));
  const auto entries = cursor.take<std::uint32_t>("entry_count");
  for (std::uint32_t e = 0; e < entries; ++e) {
    const std::string at = "entry " + std::to_string(e);
    const auto length = cursor.take<std::uint16_t>(at + " name_length");
    const std::string name = cursor.text(length, at + " name");
    if (!valid_name(name)) refuse(at + " name", "not 1-64 characters of [a-z0-9._]");
    if (counters_.count(name) != 0 || arrays_.count(name) != 0) refuse(name, "appears twice");
    const auto type = cursor.take<std::uint8_t>(name + " type");
    if (type == kCounterEntry) {
      counters_[name] = cursor.take<std::int64_t>(name);
      continue;
    }
    if (type != kArrayEntry) refuse(name + " type", "unknown entry type " + std::to_string(type));
    const auto rank = cursor.take<std::uint8_t>(name + " rank");
    if (rank < 1 || rank > kMaxRank)
      refuse(name + " rank", "rank " + std::to_string(rank) + " is not in [1, 6]");
    Array array;
    for (std::uint8_t d = 0; d < rank; ++d) {
      const auto extent = cursor.take<std::int64_t>(name + " shape");
      if (extent < 1) refuse(name + " shape", "extent " + std::to_string(extent) + " is not positive");
      array.shape.push_back(extent);
    }
    array.count = element_count(*this, name + " shape", array.shape);
    if (static_cast<std::uint64_t>(array.count) > std::numeric_limits<std::uint64_t>::max() / sizeof(float))
      refuse(name + " shape", "too many elements");
    cursor.need(static_cast<std::uint64_t>(array.count) * sizeof(float), name + " payload");
    array.offset = cursor.at();
    cursor.skip(static_cast<std::size_t>(array.count) * sizeof(float));
    for (std::int64_t i = 0; i < array.count; ++i) {
      float value;
      std::memcpy(&value, data + array.offset + static_cast<std::size_t>(i) * sizeof(float), sizeof value);
      if (!fp::is_finite(value)) refuse(name, "element " + std::to_string(i) + " is not finite");
    }
    arrays_[name] = std::move(array);
  }
  if (!cursor.done()) refuse("body", "bytes after the last entry");
}

std::int64_t Reader::counter(const std::string& name, std::int64_t lo, std::int64_t hi) const {
  const auto found = counters_.find(name);
  if (found == counters_.end()) refuse(name, "missing");
  if (lo == hi && found->second != lo)  // a value the rest of the file or the model fixes
    refuse(name, std::to_string(found->second) + ", where this state needs " + std::to_string(lo));
  if (found->second < lo || found->second > hi)
    refuse(name, std::to_string(found->second) + " is not in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return found->second;
}

void Reader::expect(const std::string& name, const std::vector<std::int64_t>& shape) const {
  const auto found = arrays_.find(name);
  if (found == arrays_.end()) refuse(name, "missing");
  if (found->second.shape != shape) {
    auto text = [](const std::vector<std::int64_t>& s) {
      std::string out = "(";
      for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
      return out + ")";
    };
    refuse(name, "shape " + text(found->second.shape) + ", this model needs " + text(shape));
  }
}

void Reader::expect_only(const std::vector<std::string>& known) const {
  std::map<std::string, bool> seen;
  for (const std::string& name : known) seen[name] = true;
  for (const auto& entry : counters_)
    if (seen.count(entry.first) == 0) refuse(entry.first, "not a field of this state kind");
  for (const auto& entry : arrays_)
    if (seen.count(entry.first) == 0) refuse(entry.first, "not a field of this state kind");
}

void Reader::copy_into(const std::string& name, const BufferPin& pin) const {
  const Array& array = arrays_.at(name);
  if (array.count != pin.size())
    refuse(name, "holds " + std::to_string(array.count) + " floats, the state " + std::to_string(pin.size()));
  std::memcpy(pin.data(), data_ + array.offset, static_cast<std::size_t>(array.count) * sizeof(float));
}

void Reader::refuse(const std::string& field, const std::string& problem) const {
  throw_value_error("samebits saved state " + source_ + ": " + field + ": " + problem);
}

std::int64_t element_count(const Reader& reader, const std::string& field,
                           const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (std::int64_t extent : shape)
    if (extent < 0 || __builtin_mul_overflow(count, extent, &count))
      reader.refuse(field, "size overflows 64 bits");
  return count;
}

}  // namespace samebits::state_file
