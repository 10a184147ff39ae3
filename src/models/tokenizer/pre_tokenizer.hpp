// The pre-tokenizer steps of a byte-level BPE tokenizer (docs/tokenizer.md §5): Split on one of the known
// regex spellings (compiled with PCRE2) or on a literal, Digits, and ByteLevel, each cutting every piece
// of the previous step, as Hugging Face `tokenizers` applies a Sequence.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace samebits::models::tokenizer {

// How the matches of a Split cut a piece (the `behavior` field of `tokenizers`).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// The regex spellings a Split or ByteLevel may carry (docs/tokenizer.md §5.1).
enum class KnownPattern { Gpt2, Llama3, Qwen2 };

// The known spelling `pattern` equals exactly, or nullopt.
std::optional<KnownPattern> known_pattern(std::string_view pattern);

// The name of a known pattern ("gpt2", "llama3", "qwen2").
const char* pattern_name(KnownPattern pattern);

// One step of the pre-tokenizer.
struct PreTokenizerStep {
  enum class Kind { ByteLevel, SplitRegex, SplitLiteral, Digits };
  Kind kind = Kind::ByteLevel;
  bool add_prefix_space = false;  // ByteLevel: prepend a space to a piece that does not start with one
  bool use_regex = true;          // ByteLevel: cut with the gpt2 pattern
  KnownPattern pattern = KnownPattern::Gpt2;  // SplitRegex
  std::string literal;                        // SplitLiteral (non-empty)
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool individual_digits = false;  // Digits
};

// A compiled step list; immutable and safe to share between threads.
class PreTokenizer {
 public:
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of `text` (well-formed UTF-8) to `out`, in order and never empty. Pieces point
  // into `text` or into strings kept in `arena` (a prepended space makes a new string).
  void split(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena) const;

  const std::vector<PreTokenizerStep>& steps() const noexcept { return steps_; }

 private:
  struct Compiled;
  std::vector<PreTokenizerStep> steps_;
  std::vector<std::unique_ptr<Compiled>> compiled_;  // one per step (null for non-regex steps)
};

}  // namespace samebits::models::tokenizer
