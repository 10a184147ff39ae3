// Strict JSON: a value model, a refusing parser and the Python-compatible canonical encoder
// (docs/formats.md §3.12).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <samebits/errors.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace samebits::json {

// Containers nested deeper than this are refused. CPython's json module gives up with a RecursionError
// somewhere near depth 1000 (it depends on the caller's stack), so every document accepted here is one
// Python also accepts; the checkpoint formats never nest deeper than about a dozen levels.
inline constexpr std::size_t kMaxNestingDepth = 512;

// CPython (3.11+) refuses to convert integer literals longer than this many digits
// (sys.int_info.default_max_str_digits), so json.loads rejects them; so do we.
inline constexpr std::size_t kMaxIntegerDigits = 4300;

// Any refusal of the parser. The reader above it replaces the message with its format's own sentence.
class ParseError : public Error {
 public:
  ParseError(const std::string& reason, std::size_t byte_offset);
  std::size_t byte_offset() const noexcept { return byte_offset_; }

 private:
  std::size_t byte_offset_;
};

enum class Type { Null, Bool, Integer, Float, String, Array, Object };

class Value {
 public:
  using Array = std::vector<Value>;
  using Member = std::pair<std::u32string, Value>;
  // Members in document order (Python dicts keep insertion order, which validators walk in).
  using Object = std::vector<Member>;

  Value() = default;  // null
  static Value make_bool(bool flag);
  // `decimal` must match -?[0-9]+; leading zeros and "-0" are normalized away, as Python's int() does.
  static Value make_integer(std::string_view decimal);
  static Value make_integer(std::int64_t number);
  static Value make_float(double number);
  static Value make_string(std::u32string text);
  static Value make_string_ascii(std::string_view ascii);
  static Value make_array(Array items);
  // Refuses duplicate keys with a ParseError (offset 0), like the parser does.
  static Value make_object(Object members);

  Type type() const noexcept { return type_; }
  bool is_null() const noexcept { return type_ == Type::Null; }
  bool is_bool() const noexcept { return type_ == Type::Bool; }
  bool is_integer() const noexcept { return type_ == Type::Integer; }
  bool is_float() const noexcept { return type_ == Type::Float; }
  bool is_string() const noexcept { return type_ == Type::String; }
  bool is_array() const noexcept { return type_ == Type::Array; }
  bool is_object() const noexcept { return type_ == Type::Object; }

  // Accessors; asking for the wrong type is a programming error (samebits::Error, kind Runtime).
  bool as_bool() const;
  const std::string& integer_decimal() const;    // normalized "-?[0-9]+"
  std::optional<std::int64_t> as_int64() const;  // nullopt when outside int64 (or not an integer)
  double as_float() const;
  const std::u32string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Object member by key, or nullptr when absent (or when this is not an object).
  const Value* find(std::u32string_view key) const;
  const Value* find(std::string_view ascii_key) const;
  // True when this is a string holding exactly these ASCII characters.
  bool is_string_equal(std::string_view ascii) const;
  // True when this is an object whose key set is exactly `ascii_keys` (in any order).
  bool has_exactly_keys(std::initializer_list<std::string_view> ascii_keys) const;

 private:
  // A value of type `type` whose `member` holds `content` (what every make_* builds).
  template <typename T>
  static Value holding(Type type, T Value::*member, T content);

  Type type_ = Type::Null;
  bool bool_ = false;
  double float_ = 0.0;
  std::string integer_;
  std::u32string string_;
  Array array_;
  Object object_;
};

// Strict: the checkpoint formats' own JSON. Python: what Python's json.loads accepts beyond RFC 8259, for
// files written by other tools (Hugging Face config.json, safetensors headers): the literals NaN, Infinity
// and -Infinity, and a repeated key, which keeps its first position and takes its last value.
enum class Dialect { Strict, Python };

// Parses one UTF-8 JSON document (RFC 8259) and refuses, with ParseError: a byte order mark, invalid
// UTF-8 (including encoded surrogates and overlong forms), raw control characters in strings,
// numbers that overflow a double, integers longer than kMaxIntegerDigits, nesting deeper than
// kMaxNestingDepth, anything after the document but whitespace, and (Strict only) NaN/Infinity and
// duplicate keys. Escaped surrogate pairs are combined and lone escaped surrogates kept, as Python does.
Value parse(std::string_view utf8_text, Dialect dialect = Dialect::Strict);

// json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False):
// ASCII bytes. A non-finite float is refused (samebits::Error, kind Value), as allow_nan=False does.
std::string canonical_json(const Value& value);

// Python's repr() of a finite double: shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16.
std::string float_repr(double number);

// Python's int.bit_length() of a decimal integer "-?[0-9]+" (the sign is ignored).
std::size_t integer_bit_length(std::string_view decimal);

// UTF-8 of code points; a lone surrogate is written as its three-byte form (like Python's surrogatepass).
std::string to_utf8(std::u32string_view text);
std::u32string from_ascii(std::string_view ascii);

}  // namespace samebits::json
