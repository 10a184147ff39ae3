#define PCRE2_CODE_UNIT_WIDTH 8
#include "models/tokenizer/pre_tokenizer.hpp"

#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <samebits/errors.hpp>
#include <utility>

#include "models/tokenizer/text.hpp"

namespace samebits::models::tokenizer {

namespace {

// The spellings as they read after JSON decoding (docs/tokenizer.md §5.1).
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// `\s` as Oniguruma (the engine of `tokenizers`) reads it: Unicode White_Space. PCRE2's own \s also takes
// U+180E, so every \s and \S is spelled out (docs/tokenizer.md §5.2).
#define SAMEBITS_WS \
  R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})"

constexpr const char* kGpt2Pcre =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" SAMEBITS_WS R"(\p{L}\p{N}]+|[)" SAMEBITS_WS
    R"(]+(?![^)" SAMEBITS_WS R"(])|[)" SAMEBITS_WS R"(]+)";
#define SAMEBITS_LLAMA_FAMILY(DIGITS)                                                          \
  R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|)" DIGITS R"(| ?[^)" SAMEBITS_WS    \
  R"(\p{L}\p{N}]+[\r\n]*|[)" SAMEBITS_WS R"(]*[\r\n]+|[)" SAMEBITS_WS R"(]+(?![^)" SAMEBITS_WS \
  R"(])|[)" SAMEBITS_WS R"(]+)"
constexpr const char* kLlama3Pcre = SAMEBITS_LLAMA_FAMILY(R"(\p{N}{1,3})");
constexpr const char* kQwen2Pcre = SAMEBITS_LLAMA_FAMILY(R"(\p{N})");
#undef SAMEBITS_LLAMA_FAMILY
#undef SAMEBITS_WS

// Each known pattern once: its name, its spelling as tokenizer.json holds it and the PCRE2 spelling compiled.
struct PatternSpellings {
  KnownPattern pattern;
  const char* name;
  std::string_view json;
  const char* pcre;
};
constexpr std::array<PatternSpellings, 3> kPatterns{{
    {KnownPattern::Gpt2, "gpt2", kGpt2, kGpt2Pcre},
    {KnownPattern::Llama3, "llama3", kLlama3, kLlama3Pcre},
    {KnownPattern::Qwen2, "qwen2", kQwen2, kQwen2Pcre},
}};

const PatternSpellings& spellings_of(KnownPattern pattern) {
  for (const PatternSpellings& known : kPatterns)
    if (known.pattern == pattern) return known;
  return kPatterns[0];
}

// Rust's char::is_numeric (general category Nd, Nl or No), the predicate of the Digits step.
bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

struct Span {
  std::size_t begin, end;
  bool match;
};

// Walks `spans` (last to first when `backward`), joining a span onto the one kept before it when
// `joins(span's match, previous span's match)`; every kept span is a non-match. The result is in text order.
template <typename Joins>
std::vector<Span> join_spans(const std::vector<Span>& spans, bool backward, Joins joins) {
  std::vector<Span> merged;
  merged.reserve(spans.size());
  bool previous_match = false;
  for (std::size_t k = 0; k < spans.size(); ++k) {
    const Span& s = spans[backward ? spans.size() - 1 - k : k];
    if (joins(s.match, previous_match) && !merged.empty()) {
      merged.back().begin = std::min(merged.back().begin, s.begin);
      merged.back().end = std::max(merged.back().end, s.end);
    } else {
      merged.push_back({s.begin, s.end, false});
    }
    previous_match = s.match;
  }
  if (backward) std::reverse(merged.begin(), merged.end());
  return merged;
}

// Cuts `piece` by its spans as `tokenizers` does for each behavior (docs/tokenizer.md §5.3).
void cut(std::string_view piece, std::vector<Span>& spans, SplitBehavior behavior, bool invert,
         std::vector<std::string_view>& out) {
  if (invert)
    for (auto& s : spans) s.match = !s.match;
  const auto same_kind = [](bool match, bool previous_match) { return match == previous_match; };
  const auto match_after_non_match = [](bool match, bool previous_match) { return match && !previous_match; };
  std::vector<Span> merged;
  switch (behavior) {
    case SplitBehavior::Isolated:
      merged = spans;
      for (auto& s : merged) s.match = false;
      break;
    case SplitBehavior::Removed:
      merged = spans;
      break;
    case SplitBehavior::Contiguous:
      merged = join_spans(spans, false, same_kind);
      break;
    case SplitBehavior::MergedWithPrevious:
      merged = join_spans(spans, false, match_after_non_match);
      break;
    case SplitBehavior::MergedWithNext:
      merged = join_spans(spans, true, match_after_non_match);
      break;
  }
  for (const Span& s : merged)
    if (!s.match && s.end > s.begin) out.push_back(piece.substr(s.begin, s.end - s.begin));
}

}  // namespace

std::optional<KnownPattern> known_pattern(std::string_view pattern) {
  for (const PatternSpellings& known : kPatterns)
    if (pattern == known.json) return known.pattern;
  return std::nullopt;
}

const char* pattern_name(KnownPattern pattern) { return spellings_of(pattern).name; }

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  explicit Compiled(KnownPattern pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    const char* spelling = spellings_of(pattern).pcre;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spelling), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                         &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw_runtime_error(std::string("samebits.models.Tokenizer: PCRE2 refused the ") +
                          pattern_name(pattern) + " pattern: " + reinterpret_cast<const char*>(message));
    }
    std::uint32_t captures = 0;
    pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &captures);
    if (captures != 0) {
      pcre2_code_free(code);
      throw_runtime_error(std::string("samebits.models.Tokenizer: the ") + pattern_name(pattern) +
                          " pattern has a capture group");
    }
    // Without JIT support the interpreter gives the same matches.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
  ~Compiled() { pcre2_code_free(code); }
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;

  // The match/gap spans of `piece` (well-formed UTF-8), as `tokenizers` lists them for a regex.
  void spans(std::string_view piece, std::vector<Span>& out) const {
    // Every known pattern has no capture group (checked at compile), so one match block of one pair per
    // thread serves them all.
    struct MatchData {
      pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
      ~MatchData() { pcre2_match_data_free(data); }
    };
    thread_local const MatchData block;
    pcre2_match_data* data = block.data;
    if (data == nullptr) throw_memory_error("samebits.models.Tokenizer: PCRE2 match data allocation failed");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    std::size_t previous = 0, at = 0;
    while (at <= piece.size()) {
      const int rc = pcre2_match(code, subject, piece.size(), at, PCRE2_NO_UTF_CHECK, data, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0)
        throw_runtime_error("samebits.models.Tokenizer: PCRE2 match failed (code " + std::to_string(rc) +
                            ")");
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
      const std::size_t b = ov[0], e = ov[1];
      if (b > previous) out.push_back({previous, b, false});
      out.push_back({b, e, true});
      previous = e;
      if (e > at) {
        at = e;
      } else {  // an empty match: step over one character
        std::size_t bad = 1;
        const std::size_t n = at < piece.size() ? utf8_sequence_length(piece, at, &bad) : 1;
        at += n == 0 ? 1 : n;
      }
    }
    if (previous < piece.size()) out.push_back({previous, piece.size(), false});
  }
};

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {
  for (const auto& step : steps_) {
    if (step.kind == PreTokenizerStep::Kind::SplitRegex) {
      compiled_.push_back(std::make_unique<Compiled>(step.pattern));
    } else if (step.kind == PreTokenizerStep::Kind::ByteLevel && step.use_regex) {
      compiled_.push_back(std::make_unique<Compiled>(KnownPattern::Gpt2));
    } else {
      compiled_.push_back(nullptr);
    }
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out,
                         std::deque<std::string>& arena) const {
  std::vector<std::string_view> current{text}, next;
  std::vector<Span> spans;
  if (text.empty()) current.clear();
  for (std::size_t k = 0; k < steps_.size(); ++k) {
    const PreTokenizerStep& step = steps_[k];
    next.clear();
    for (std::string_view piece : current) {
      spans.clear();
      switch (step.kind) {
        case PreTokenizerStep::Kind::ByteLevel:
          if (step.add_prefix_space && piece.front() != ' ') {
            std::string prefixed(1, ' ');
            prefixed.append(piece);
            arena.push_back(std::move(prefixed));
            piece = arena.back();
          }
          if (!step.use_regex) {
            next.push_back(piece);
            continue;
          }
          compiled_[k]->spans(piece, spans);
          cut(piece, spans, SplitBehavior::Isolated, false, next);
          continue;
        case PreTokenizerStep::Kind::SplitRegex:
          compiled_[k]->spans(piece, spans);
          break;
        case PreTokenizerStep::Kind::SplitLiteral: {
          std::size_t previous = 0, at = 0;
          while ((at = piece.find(step.literal, previous)) != std::string_view::npos) {
            if (at > previous) spans.push_back({previous, at, false});
            spans.push_back({at, at + step.literal.size(), true});
            previous = at + step.literal.size();
          }
          if (previous < piece.size()) spans.push_back({previous, piece.size(), false});
          break;
        }
        case PreTokenizerStep::Kind::Digits: {
          // Each numeric character is its own match (as for any character predicate in `tokenizers`).
          std::size_t previous = 0, at = 0;
          while (at < piece.size()) {
            std::size_t bad = 1;
            std::size_t n = utf8_sequence_length(piece, at, &bad);
            if (n == 0) n = 1;
            const auto lead = static_cast<unsigned char>(piece[at]);
            char32_t c = n == 1 ? lead : n == 2 ? (lead & 0x1Fu) : n == 3 ? (lead & 0x0Fu) : (lead & 0x07u);
            for (std::size_t j = 1; j < n; ++j)
              c = (c << 6) | (static_cast<unsigned char>(piece[at + j]) & 0x3Fu);
            if (is_numeric(c)) {
              if (at > previous) spans.push_back({previous, at, false});
              spans.push_back({at, at + n, true});
              previous = at + n;
            }
            at += n;
          }
          if (previous < piece.size()) spans.push_back({previous, piece.size(), false});
          const SplitBehavior behavior =
              step.individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous;
          cut(piece, spans, behavior, false, next);
          continue;
        }
      }
      cut(piece, spans, step.behavior, step.invert, next);
    }
    current.swap(next);
  }
  out.insert(out.end(), current.begin(), current.end());
}

}  // namespace samebits::models::tokenizer
