#include "models/tokenizer/text.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <samebits/errors.hpp>

#include "core/utf8.hpp"

namespace samebits::models::tokenizer {

namespace {

std::array<char32_t, 256> make_byte_table() {
  std::array<char32_t, 256> table{};
  std::array<bool, 256> printable{};
  for (int b = 0x21; b <= 0x7E; ++b) printable[static_cast<std::size_t>(b)] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[static_cast<std::size_t>(b)] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[static_cast<std::size_t>(b)] = true;
  char32_t next = 256;
  for (std::size_t b = 0; b < 256; ++b) table[b] = printable[b] ? static_cast<char32_t>(b) : next++;
  return table;
}

}  // namespace

const std::array<char32_t, 256>& byte_to_char() {
  static const std::array<char32_t, 256> table = make_byte_table();
  return table;
}

int char_to_byte(char32_t c) {
  // The table maps the printable Latin-1 bytes to themselves and the other 68 bytes to U+0100..U+0143.
  static const std::array<int, 324> inverse = [] {
    std::array<int, 324> inv{};
    inv.fill(-1);
    const auto& table = byte_to_char();
    for (std::size_t b = 0; b < 256; ++b) inv[table[b]] = static_cast<int>(b);
    return inv;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

std::size_t utf8_sequence_length(std::string_view s, std::size_t i, std::size_t* bad) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  *bad = 1;
  if (lead < 0x80) return 1;
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (std::size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      *bad = k;
      return 0;
    }
    const unsigned char c = byte(i + k);
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      *bad = k;
      return 0;
    }
  }
  return need + 1;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    std::size_t bad = 1;
    const std::size_t n = utf8_sequence_length(bytes, i, &bad);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

bool utf8_valid(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t bad = 1;
    const std::size_t n = utf8_sequence_length(bytes, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::u32string utf8_to_u32(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  std::size_t i = 0;
  while (i < utf8.size()) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    std::size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? lead : n == 2 ? (lead & 0x1Fu) : n == 3 ? (lead & 0x0Fu) : (lead & 0x07u);
    for (std::size_t k = 1; k < n && i + k < utf8.size(); ++k)
      c = (c << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3Fu);
    out.push_back(c);
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) { utf8::append(out, c); }

std::string nfc(std::string_view utf8) {
  bool ascii = true;
  for (const char ch : utf8) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(utf8);  // ASCII text is its own NFC form
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                                          static_cast<utf8proc_ssize_t>(utf8.size()), &mapped,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  if (n < 0) throw_runtime_error(std::string("samebits.models.Tokenizer: NFC failed: ") + utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(n));
}

std::string nfc_unicode_version() { return utf8proc_unicode_version(); }

}  // namespace samebits::models::tokenizer
