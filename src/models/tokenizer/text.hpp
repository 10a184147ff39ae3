// Text helpers of the byte-level BPE tokenizer (docs/tokenizer.md §3, §6): the GPT-2 byte table, UTF-8
// decoding with replacement by maximal subpart (what Python's errors="replace" and Rust's
// String::from_utf8_lossy do), and NFC through utf8proc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace samebits::models::tokenizer {

// The GPT-2 byte <-> character table: byte b is spelled as code point byte_to_char()[b].
const std::array<char32_t, 256>& byte_to_char();

// The byte a table character stands for, or -1 when `c` is not in the table.
int char_to_byte(char32_t c);

// Length of the valid UTF-8 sequence starting at `s[i]`, or 0 when the bytes there start no valid
// sequence (then `*bad` is the length of the maximal subpart that one U+FFFD replaces, at least 1).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i, std::size_t* bad);

// `bytes` with every ill-formed maximal subpart replaced by U+FFFD (docs/tokenizer.md §3).
std::string utf8_lossy(std::string_view bytes);

// True when `bytes` is well-formed UTF-8.
bool utf8_valid(std::string_view bytes);

// Decodes well-formed UTF-8 (checked by the caller) into code points.
std::u32string utf8_to_u32(std::string_view utf8);

// Appends the UTF-8 of code point `c` (a scalar value) to `out`.
void append_utf8(std::string& out, char32_t c);

// The NFC form of well-formed UTF-8 `utf8` (utf8proc; docs/tokenizer.md §4).
std::string nfc(std::string_view utf8);

// The Unicode version of the NFC tables (utf8proc's).
std::string nfc_unicode_version();

}  // namespace samebits::models::tokenizer
