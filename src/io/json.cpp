// Strict JSON parser, value accessors and the canonical encoder that matches Python's json.dumps byte for
// byte.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <system_error>
#include <unordered_map>

#include "core/utf8.hpp"

namespace samebits::json {

ParseError::ParseError(const std::string& reason, std::size_t byte_offset)
    : Error(ErrorKind::Value, "invalid JSON at byte " + std::to_string(byte_offset) + ": " + reason),
      byte_offset_(byte_offset) {}

// ---------------------------------------------------------------------------------------------- Value

namespace {

[[noreturn]] void wrong_type(const char* wanted) {
  throw_runtime_error(std::string("json::Value accessed as ") + wanted + " but holds another type");
}

// The accessors: `member` when the value holds type `want`, the refusal naming `wanted` otherwise.
template <typename T>
const T& of_type(Type holds, Type want, const char* wanted, const T& member) {
  if (holds != want) wrong_type(wanted);
  return member;
}

// "-?[0-9]+" with leading zeros removed and "-0" folded to "0".
std::string normalize_decimal(std::string_view decimal) {
  bool negative = !decimal.empty() && decimal.front() == '-';
  std::string_view digits = negative ? decimal.substr(1) : decimal;
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw_value_error("json integer must be a decimal digit string");
  }
  std::size_t first = digits.find_first_not_of('0');
  if (first == std::string_view::npos) return "0";
  std::string result = negative ? "-" : "";
  result.append(digits.substr(first));
  return result;
}

bool has_duplicate_keys(const Value::Object& members) {
  if (members.size() < 2) return false;
  std::vector<const std::u32string*> keys;
  keys.reserve(members.size());
  for (const auto& member : members) keys.push_back(&member.first);
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  for (std::size_t i = 1; i < keys.size(); ++i) {
    if (*keys[i - 1] == *keys[i]) return true;
  }
  return false;
}

}  // namespace

template <typename T>
Value Value::holding(Type type, T Value::*member, T content) {
  Value value;
  value.type_ = type;
  value.*member = std::move(content);
  return value;
}

Value Value::make_bool(bool flag) { return holding(Type::Bool, &Value::bool_, flag); }

Value Value::make_integer(std::string_view decimal) {
  return holding(Type::Integer, &Value::integer_, normalize_decimal(decimal));
}

Value Value::make_integer(std::int64_t number) { return make_integer(std::to_string(number)); }

Value Value::make_float(double number) { return holding(Type::Float, &Value::float_, number); }

Value Value::make_string(std::u32string text) {
  return holding(Type::String, &Value::string_, std::move(text));
}

Value Value::make_string_ascii(std::string_view ascii) { return make_string(from_ascii(ascii)); }

Value Value::make_array(Array items) { return holding(Type::Array, &Value::array_, std::move(items)); }

Value Value::make_object(Object members) {
  if (has_duplicate_keys(members)) throw ParseError("duplicate object key", 0);
  return holding(Type::Object, &Value::object_, std::move(members));
}

bool Value::as_bool() const { return of_type(type_, Type::Bool, "bool", bool_); }

const std::string& Value::integer_decimal() const {
  return of_type(type_, Type::Integer, "integer", integer_);
}

std::optional<std::int64_t> Value::as_int64() const {
  if (type_ != Type::Integer) return std::nullopt;
  std::int64_t number = 0;
  auto [end, error] = std::from_chars(integer_.data(), integer_.data() + integer_.size(), number);
  if (error != std::errc() || end != integer_.data() + integer_.size()) return std::nullopt;
  return number;
}

double Value::as_float() const { return of_type(type_, Type::Float, "float", float_); }

const std::u32string& Value::as_string() const { return of_type(type_, Type::String, "string", string_); }

const Value::Array& Value::as_array() const { return of_type(type_, Type::Array, "array", array_); }

const Value::Object& Value::as_object() const { return of_type(type_, Type::Object, "object", object_); }

const Value* Value::find(std::u32string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto& [name, member] : object_) {
    if (name == key) return &member;
  }
  return nullptr;
}

const Value* Value::find(std::string_view ascii_key) const {
  return find(std::u32string_view(from_ascii(ascii_key)));
}

bool Value::is_string_equal(std::string_view ascii) const {
  return type_ == Type::String && string_.size() == ascii.size() &&
         std::equal(ascii.begin(), ascii.end(), string_.begin(), [](char a, char32_t c) {
           return static_cast<char32_t>(static_cast<unsigned char>(a)) == c;
         });
}

bool Value::has_exactly_keys(std::initializer_list<std::string_view> ascii_keys) const {
  // Keys are unique on both sides, so equal sizes plus every wanted key present means equal sets.
  if (type_ != Type::Object || object_.size() != ascii_keys.size()) return false;
  return std::all_of(ascii_keys.begin(), ascii_keys.end(),
                     [this](std::string_view key) { return find(key) != nullptr; });
}

// --------------------------------------------------------------------------------------------- parser

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

bool is_high_surrogate(char32_t c) { return c >= 0xD800 && c <= 0xDBFF; }
bool is_low_surrogate(char32_t c) { return c >= 0xDC00 && c <= 0xDFFF; }

// Whether a float literal (already matching the JSON grammar) is at least 1 in magnitude. Used only
// when from_chars reports out-of-range, to tell overflow (refused) from underflow (rounds to zero).
bool magnitude_at_least_one(std::string_view literal) {
  if (!literal.empty() && literal.front() == '-') literal.remove_prefix(1);
  std::size_t exponent_at = literal.find_first_of("eE");
  std::string_view mantissa = literal.substr(0, exponent_at);
  // Saturating parse of the decimal exponent; anything past a billion is as good as infinite here.
  std::int64_t exponent = 0;
  if (exponent_at != std::string_view::npos) {
    std::string_view text = literal.substr(exponent_at + 1);
    bool negative = !text.empty() && text.front() == '-';
    if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.remove_prefix(1);
    for (char c : text) exponent = std::min<std::int64_t>(exponent * 10 + (c - '0'), 1'000'000'000);
    if (negative) exponent = -exponent;
  }
  std::size_t point = mantissa.find('.');
  std::string_view integer_part = mantissa.substr(0, point);
  std::int64_t leading_exponent;  // decimal exponent of the first nonzero digit
  if (integer_part != "0") {
    leading_exponent = static_cast<std::int64_t>(integer_part.size()) - 1;
  } else {
    std::string_view fraction =
        point == std::string_view::npos ? std::string_view() : mantissa.substr(point + 1);
    std::size_t first = fraction.find_first_not_of('0');
    if (first == std::string_view::npos) return false;  // the value is zero
    leading_exponent = -static_cast<std::int64_t>(first) - 1;
  }
  return leading_exponent + exponent >= 0;
}

class Parser {
 public:
  Parser(std::string_view text, Dialect dialect) : text_(text), python_(dialect == Dialect::Python) {}

  Value parse_document() {
    if (text_.starts_with("\xEF\xBB\xBF")) fail("a byte order mark is not allowed");
    skip_whitespace();
    Value value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected data after the document");
    return value;
  }

 private:
  [[noreturn]] void fail(const char* reason) const { throw ParseError(reason, pos_); }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  void expect_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("invalid literal");
    pos_ += word.size();
  }

  Value parse_value(std::size_t depth) {
    switch (peek()) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"':
        return Value::make_string(parse_string());
      case 't':
        expect_literal("true");
        return Value::make_bool(true);
      case 'f':
        expect_literal("false");
        return Value::make_bool(false);
      case 'n':
        expect_literal("null");
        return Value();
      case 'N':
        if (!python_) break;
        expect_literal("NaN");
        return Value::make_float(std::numeric_limits<double>::quiet_NaN());
      case 'I':
        if (!python_) break;
        expect_literal("Infinity");
        return Value::make_float(std::numeric_limits<double>::infinity());
      default:
        if (python_ && text_.substr(pos_, 9) == "-Infinity") {
          pos_ += 9;
          return Value::make_float(-std::numeric_limits<double>::infinity());
        }
        if (peek() == '-' || is_digit(peek())) return parse_number();
        break;
    }
    fail(at_end() ? "unexpected end of input" : "unexpected character");
  }

  // Past a container's opening bracket (after the depth check) and the whitespace that follows it; true,
  // with `close` consumed too, when the container is empty.
  bool open_is_empty(std::size_t depth, char close) {
    if (depth > kMaxNestingDepth) fail("nesting is too deep");
    ++pos_;  // '{' or '['
    skip_whitespace();
    if (peek() != close) return false;
    ++pos_;
    return true;
  }

  // After a member or an item: true past a ',' (another one follows), false past `close`; anything else is
  // refused as `expected`.
  bool another(char close, const char* expected) {
    skip_whitespace();
    if (peek() == ',') {
      ++pos_;
      return true;
    }
    if (peek() != close) fail(expected);
    ++pos_;
    return false;
  }

  Value parse_object(std::size_t depth) {
    Value::Object members;
    if (open_is_empty(depth, '}')) return Value::make_object(std::move(members));
    std::size_t start = pos_;
    do {
      skip_whitespace();
      if (peek() != '"') fail("object keys must be strings");
      std::u32string key = parse_string();
      skip_whitespace();
      if (peek() != ':') fail("expected ':' after an object key");
      ++pos_;
      skip_whitespace();
      members.emplace_back(std::move(key), parse_value(depth));
    } while (another('}', "expected ',' or '}' in an object"));
    if (python_) keep_last_duplicates(members);
    try {
      return Value::make_object(std::move(members));
    } catch (const ParseError&) {
      throw ParseError("duplicate object key", start);  // report where the object starts
    }
  }

  // Python's dict: a repeated key keeps its first position and takes its last value.
  static void keep_last_duplicates(Value::Object& members) {
    std::unordered_map<std::u32string, std::size_t> first;
    Value::Object kept;
    kept.reserve(members.size());
    for (auto& member : members) {
      const auto [at, fresh] = first.try_emplace(member.first, kept.size());
      if (fresh)
        kept.push_back(std::move(member));
      else
        kept[at->second].second = std::move(member.second);
    }
    members = std::move(kept);
  }

  Value parse_array(std::size_t depth) {
    Value::Array items;
    if (open_is_empty(depth, ']')) return Value::make_array(std::move(items));
    do {
      skip_whitespace();
      items.push_back(parse_value(depth));
    } while (another(']', "expected ',' or ']' in an array"));
    return Value::make_array(std::move(items));
  }

  Value parse_number() {
    std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (is_digit(peek())) {
      while (is_digit(peek())) ++pos_;
    } else {
      fail("invalid number");
    }
    std::size_t integer_digits = pos_ - start - (text_[start] == '-' ? 1 : 0);
    bool is_float = false;
    if (peek() == '.') {
      ++pos_;
      if (!is_digit(peek())) fail("invalid number");
      while (is_digit(peek())) ++pos_;
      is_float = true;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) fail("invalid number");
      while (is_digit(peek())) ++pos_;
      is_float = true;
    }
    std::string_view literal = text_.substr(start, pos_ - start);
    if (!is_float) {
      if (integer_digits > kMaxIntegerDigits) fail("integer has too many digits");
      return Value::make_integer(literal);
    }
    double number = 0.0;
    auto [end, error] = std::from_chars(literal.data(), literal.data() + literal.size(), number);
    if (end != literal.data() + literal.size()) fail("invalid number");
    if (error == std::errc::result_out_of_range) {
      if (magnitude_at_least_one(literal)) fail("number overflows a double");
      number = literal.front() == '-' ? -0.0 : 0.0;  // total underflow rounds to zero, as in Python
    } else if (error != std::errc()) {
      fail("invalid number");
    }
    if (!std::isfinite(number)) fail("number overflows a double");
    return Value::make_float(number);
  }

  // One code point of strictly valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
  char32_t decode_utf8() {
    auto byte_at = [this](std::size_t i) -> unsigned { return static_cast<unsigned char>(text_[i]); };
    unsigned lead = byte_at(pos_);
    std::size_t extra;
    char32_t code;
    unsigned low = 0x80, high = 0xBF;  // allowed range of the first continuation byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      extra = 1;
      code = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      extra = 2;
      code = lead & 0x0F;
      if (lead == 0xE0) low = 0xA0;   // overlong
      if (lead == 0xED) high = 0x9F;  // UTF-16 surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      extra = 3;
      code = lead & 0x07;
      if (lead == 0xF0) low = 0x90;   // overlong
      if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
    } else {
      fail("invalid UTF-8");
    }
    if (pos_ + extra >= text_.size()) fail("invalid UTF-8");
    for (std::size_t i = 1; i <= extra; ++i) {
      unsigned continuation = byte_at(pos_ + i);
      if (continuation < low || continuation > high) fail("invalid UTF-8");
      low = 0x80;
      high = 0xBF;
      code = (code << 6) | (continuation & 0x3F);
    }
    pos_ += extra + 1;
    return code;
  }

  char32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("invalid \\u escape");
    char32_t code = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      int digit = hex_value(static_cast<unsigned char>(text_[pos_ + i]));
      if (digit < 0) fail("invalid \\u escape");
      code = (code << 4) | static_cast<char32_t>(digit);
    }
    pos_ += 4;
    return code;
  }

  std::u32string parse_string() {
    ++pos_;  // opening quote
    std::u32string text;
    while (true) {
      if (at_end()) fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return text;
      }
      if (c < 0x20) fail("control character in a string");
      if (c >= 0x80) {
        text.push_back(decode_utf8());
        continue;
      }
      ++pos_;
      if (c != '\\') {
        text.push_back(c);
        continue;
      }
      if (at_end()) fail("unterminated string");
      char escape = text_[pos_++];
      // The one-character escapes: \" \\ \/ \b \f \n \r \t stand for the character at the same place.
      constexpr std::string_view kEscapes = "\"\\/bfnrt";
      constexpr std::u32string_view kEscaped = U"\"\\/\b\f\n\r\t";
      if (const std::size_t i = kEscapes.find(escape); i != std::string_view::npos) {
        text.push_back(kEscaped[i]);
        continue;
      }
      switch (escape) {
        case 'u': {
          char32_t code = parse_hex4();
          // A high surrogate escape directly followed by a low one is one code point; otherwise
          // each surrogate stays as it is (Python keeps lone surrogates in str).
          if (is_high_surrogate(code) && text_.substr(pos_, 2) == "\\u") {
            std::size_t saved = pos_;
            pos_ += 2;
            char32_t next = parse_hex4();
            if (is_low_surrogate(next)) {
              code = 0x10000 + ((code - 0xD800) << 10) + (next - 0xDC00);
            } else {
              pos_ = saved;
            }
          }
          text.push_back(code);
          break;
        }
        default:
          --pos_;
          fail("invalid escape");
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  bool python_ = false;  // Dialect::Python
};

}  // namespace

Value parse(std::string_view utf8_text, Dialect dialect) {
  return Parser(utf8_text, dialect).parse_document();
}

// -------------------------------------------------------------------------------------------- encoder

std::string float_repr(double number) {
  if (!std::isfinite(number)) throw_value_error("Out of range float values are not JSON compliant");
  // Shortest round-trip digits in scientific form "[-]d[.ddd]e±XX", then laid out as Python's repr.
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, number, std::chars_format::scientific);
  (void)error;  // 64 bytes always suffice for a double
  std::string_view text(buffer, static_cast<std::size_t>(end - buffer));
  bool negative = text.front() == '-';
  if (negative) text.remove_prefix(1);
  std::size_t e_at = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e_at)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::string_view exponent_text = text.substr(e_at + 1);
  if (exponent_text.front() == '+') exponent_text.remove_prefix(1);
  std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

  std::string result = negative ? "-" : "";
  int point = exponent + 1;  // digits before the decimal point in fixed notation
  int count = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      result.append("0.").append(static_cast<std::size_t>(-point), '0').append(digits);
    } else if (point < count) {
      std::size_t split = static_cast<std::size_t>(point);
      result.append(digits, 0, split).append(".").append(digits, split);
    } else {
      result.append(digits).append(static_cast<std::size_t>(point - count), '0').append(".0");
    }
    return result;
  }
  result.push_back(digits.front());
  if (count > 1) result.append(".").append(digits, 1);
  result += exponent < 0 ? "e-" : "e+";
  int magnitude = exponent < 0 ? -exponent : exponent;
  if (magnitude < 10) result += '0';
  result += std::to_string(magnitude);
  return result;
}

namespace {

void append_u_escape(std::string& out, unsigned code) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHexDigits[(code >> shift) & 15]);
}

// Python's ensure_ascii string encoder: printable ASCII (' ' to '~') as is, short escapes for the
// five common controls, \uXXXX for everything else (DEL included), surrogate pairs above U+FFFF.
void append_string(std::string& out, std::u32string_view text) {
  out.push_back('"');
  for (char32_t c : text) {
    switch (c) {
      case U'"':
        out += "\\\"";
        break;
      case U'\\':
        out += "\\\\";
        break;
      case U'\n':
        out += "\\n";
        break;
      case U'\r':
        out += "\\r";
        break;
      case U'\t':
        out += "\\t";
        break;
      case U'\b':
        out += "\\b";
        break;
      case U'\f':
        out += "\\f";
        break;
      default:
        if (c >= U' ' && c <= U'~') {
          out.push_back(static_cast<char>(c));
        } else if (c > 0xFFFF) {
          char32_t offset = c - 0x10000;
          append_u_escape(out, 0xD800 + (offset >> 10));
          append_u_escape(out, 0xDC00 + (offset & 0x3FF));
        } else {
          append_u_escape(out, c);
        }
    }
  }
  out.push_back('"');
}

void append_canonical(std::string& out, const Value& value) {
  switch (value.type()) {
    case Type::Null:
      out += "null";
      return;
    case Type::Bool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Type::Integer:
      out += value.integer_decimal();
      return;
    case Type::Float:
      out += float_repr(value.as_float());
      return;
    case Type::String:
      append_string(out, value.as_string());
      return;
    case Type::Array: {
      out.push_back('[');
      bool first = true;
      for (const Value& item : value.as_array()) {
        if (!first) out.push_back(',');
        first = false;
        append_canonical(out, item);
      }
      out.push_back(']');
      return;
    }
    case Type::Object: {
      // sort_keys=True: Python compares str by code point, which is u32string's order.
      std::vector<const Value::Member*> members;
      for (const auto& member : value.as_object()) members.push_back(&member);
      std::sort(members.begin(), members.end(),
                [](const auto* a, const auto* b) { return a->first < b->first; });
      out.push_back('{');
      bool first = true;
      for (const auto* member : members) {
        if (!first) out.push_back(',');
        first = false;
        append_string(out, member->first);
        out.push_back(':');
        append_canonical(out, member->second);
      }
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

std::string canonical_json(const Value& value) {
  std::string out;
  append_canonical(out, value);
  return out;
}

// ------------------------------------------------------------------------------------------ utilities

std::size_t integer_bit_length(std::string_view decimal) {
  if (!decimal.empty() && decimal.front() == '-') decimal.remove_prefix(1);
  // Little-endian base-2^32 limbs; feed nine decimal digits at a time (10^9 < 2^32).
  std::vector<std::uint32_t> limbs;
  std::size_t i = 0;
  while (i < decimal.size()) {
    std::size_t take = std::min<std::size_t>(9, decimal.size() - i);
    std::uint64_t scale = 1, chunk = 0;
    for (std::size_t k = 0; k < take; ++k) {
      scale *= 10;
      chunk = chunk * 10 + static_cast<std::uint64_t>(decimal[i + k] - '0');
    }
    i += take;
    std::uint64_t carry = chunk;
    for (std::uint32_t& limb : limbs) {
      std::uint64_t product = static_cast<std::uint64_t>(limb) * scale + carry;
      limb = static_cast<std::uint32_t>(product);
      carry = product >> 32;
    }
    if (carry != 0) limbs.push_back(static_cast<std::uint32_t>(carry));
  }
  while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
  if (limbs.empty()) return 0;
  return 32 * (limbs.size() - 1) + static_cast<std::size_t>(std::bit_width(limbs.back()));
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  for (char32_t c : text) utf8::append(out, c);
  return out;
}

std::u32string from_ascii(std::string_view ascii) {
  std::u32string text;
  text.reserve(ascii.size());
  for (char c : ascii) text.push_back(static_cast<char32_t>(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace samebits::json
