// The tokenizer equality corpus (docs/tokenizer.md §8): the same SplitMix64 generator as
// tools/make_tokenizer_fixtures.py, byte for byte, over the committed samples.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/utf8.hpp"

namespace samebits::test {

struct TokenizerCorpus {
  std::string bytes;
  std::vector<std::string> chunks;
};

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t state_;
};

inline void append_code_point(std::string& out, std::uint32_t c) { utf8::append(out, c); }

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline TokenizerCorpus make_tokenizer_corpus(const std::string& fixture_dir) {
  const std::vector<std::string> samples = {read_file_bytes(fixture_dir + "/english.txt"),
                                            read_file_bytes(fixture_dir + "/code.txt"),
                                            read_file_bytes(fixture_dir + "/multilingual.txt")};
  const std::vector<std::string> whitespace = {" ",      "  ",     "\t",     "\n",     "\r\n",
                                               "\u3000", "\u00a0", "\u2009", "\n\n\n", "   \n  ",
                                               "\r",     "\u2028", "\u0085"};
  const std::vector<std::vector<std::uint32_t>> digit_sets = {
      {0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39},
      {0x660, 0x661, 0x662, 0x663, 0x664, 0x665, 0x666, 0x667, 0x668, 0x669},
      {0xFF10, 0xFF11, 0xFF12, 0xFF13, 0xFF14, 0xFF15, 0xFF16, 0xFF17, 0xFF18, 0xFF19},
      {0x966, 0x967, 0x968, 0x969, 0x96A, 0x96B, 0x96C, 0x96D, 0x96E, 0x96F}};
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges = {
      {0x20, 0x7E},     {0xA0, 0x24F},    {0x370, 0x3FF},     {0x400, 0x4FF},     {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0x3040, 0x30FF}, {0x1F300, 0x1F64F}, {0x2000, 0x206F},   {0x600, 0x6FF},
      {0x900, 0x97F},   {0x2150, 0x218F}, {0xFF00, 0xFFEF},   {0x1D400, 0x1D7FF}, {0x20000, 0x2A6DF}};
  const std::vector<std::string> specials = {
      "<|im_start|>", "<|im_end|>", "<|endoftext|>",          "<|im_start",    "|>",
      "<repo_name>",  "<filename>", "<|im_end|><|im_start|>", "<|endoftext|>x"};
  const std::vector<std::string> contractions = {"'s", "'S",      "'t",      "'re",    "'RE", "'ve",
                                                 "'m", "'ll",     "'LL",     "'d",     "'D",  "'\u017f",
                                                 "'x", "\u2019s", "'\u212a", "'\ufb05"};
  const std::vector<std::string> emoji = {"\U0001F468\u200d\U0001F469\u200d\U0001F467",
                                          "\U0001F1EB\U0001F1F7",
                                          "\u2764\ufe0f",
                                          "\U0001F44D\U0001F3FD",
                                          "1\ufe0f\u20e3",
                                          "\U0001F9D1\u200d\U0001F4BB"};
  const char* bases = "aeiouAEOUnc";
  SplitMix64 rng(0x5A3EB175u);
  TokenizerCorpus corpus;
  std::string& out = corpus.bytes;
  const auto cont = [](const std::string& s, std::size_t i) {
    return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  };
  while (out.size() < (std::size_t{1} << 20)) {
    const std::uint64_t kind = rng.below(20);
    if (kind < 10) {
      const std::string& s = samples[rng.below(samples.size())];
      std::size_t start = rng.below(s.size());
      std::size_t end = std::min<std::size_t>(s.size(), start + 1 + rng.below(400));
      if (rng.below(10) != 0) {
        while (start < s.size() && cont(s, start)) ++start;
        while (end < s.size() && cont(s, end)) ++end;
      }
      if (end > start) out.append(s, start, end - start);
    } else if (kind < 12) {
      const std::string& w = whitespace[rng.below(whitespace.size())];
      const std::uint64_t n = 1 + rng.below(6);
      for (std::uint64_t k = 0; k < n; ++k) out += w;
    } else if (kind == 12) {
      const auto& digits = digit_sets[rng.below(digit_sets.size())];
      const std::uint64_t n = 1 + rng.below(14);
      for (std::uint64_t k = 0; k < n; ++k) append_code_point(out, digits[rng.below(10)]);
    } else if (kind == 13) {
      const auto [lo, hi] = ranges[rng.below(ranges.size())];
      const std::uint64_t n = 1 + rng.below(8);
      for (std::uint64_t k = 0; k < n; ++k)
        append_code_point(out, lo + static_cast<std::uint32_t>(rng.below(hi - lo + 1)));
    } else if (kind == 14) {
      out.push_back(bases[rng.below(11)]);
      append_code_point(out, 0x300 + static_cast<std::uint32_t>(rng.below(0x70)));
    } else if (kind == 15) {
      append_code_point(out, 0x1100 + static_cast<std::uint32_t>(rng.below(19)));
      append_code_point(out, 0x1161 + static_cast<std::uint32_t>(rng.below(21)));
      if (rng.below(2) != 0) append_code_point(out, 0x11A8 + static_cast<std::uint32_t>(rng.below(27)));
    } else if (kind == 16) {
      out += specials[rng.below(specials.size())];
    } else if (kind == 17) {
      out += contractions[rng.below(contractions.size())];
    } else if (kind == 18) {
      const std::uint64_t n = 1 + rng.below(3);
      for (std::uint64_t k = 0; k < n; ++k) out.push_back(static_cast<char>(rng.below(256)));
    } else {
      out += emoji[rng.below(emoji.size())];
    }
  }
  std::size_t pos = 0;
  while (pos < out.size()) {
    const std::size_t n = 1 + rng.below(8192);
    corpus.chunks.push_back(out.substr(pos, n));
    pos += n;
  }
  return corpus;
}

}  // namespace samebits::test
