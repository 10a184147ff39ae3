// Byte-level BPE tokenizer with the semantics of Hugging Face `tokenizers` (docs/tokenizer.md): added-token
// split, NFC, pre-tokenizer, merges by rank, template post-processing, byte-level decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/tokenizer/pre_tokenizer.hpp"

namespace samebits::models::tokenizer {

// Ids are below this bound (docs/tokenizer.md §2), so id tables stay small.
inline constexpr std::int64_t kMaxTokenId = (std::int64_t{1} << 24) - 1;

// An entry of `added_tokens` (docs/tokenizer.md §2.3).
struct AddedToken {
  std::string content;  // UTF-8
  std::int32_t id = 0;
  bool special = false;
  bool normalized = false;  // matched after normalization (true) or on the raw text (false)
};

// Everything a tokenizer is built from, already decoded from its files (src/io/tokenizer_files).
struct TokenizerSpec {
  std::string source;                                       // the file named in refusals
  std::vector<std::pair<std::string, std::int32_t>> vocab;  // byte spellings and ids, file order
  std::vector<std::pair<std::string, std::string>> merges;  // byte spellings, rank order
  std::vector<AddedToken> added;
  std::vector<PreTokenizerStep> pre_tokenizer;
  bool nfc = false;
  bool ignore_merges = false;
  std::optional<std::int32_t>
      unk_id;  // model.unk_token's id: a byte without a token becomes it (else dropped)
  bool fuse_unk = false;
  std::vector<std::int32_t> bos_ids, eos_ids;  // added around the ids by add_special_tokens
  std::optional<std::int32_t> bos_token_id, eos_token_id;
  // The model's Jinja chat template as written (docs/tokenizer.md §10), when its files carry one.
  std::optional<std::string> chat_template;
};

// A validated tokenizer; immutable after construction and safe to use from several threads at once.
class BpeTokenizer {
 public:
  // Validates `spec` (docs/tokenizer.md §2.4); refusals are samebits::Error (Value) naming file and field.
  explicit BpeTokenizer(TokenizerSpec spec);
  ~BpeTokenizer();

  // The ids of `text`: ill-formed UTF-8 is replaced first (docs/tokenizer.md §3). With `allow_special`
  // false, special added tokens are ordinary text; `add_special_tokens` adds bos_ids/eos_ids.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens, bool allow_special) const;

  // The bytes of `ids` as the ByteLevel decoder gives them; refuses an id that names no token.
  std::string decode_bytes(std::span<const std::int32_t> ids, bool skip_special_tokens) const;

  // The bytes of one id (as decode_bytes of that id alone), or nullopt when it names no token.
  std::optional<std::string_view> token_bytes(std::int32_t id) const;

  bool is_special(std::int32_t id) const;
  std::size_t n_vocab() const noexcept { return id_bytes_.size(); }
  const TokenizerSpec& spec() const noexcept { return spec_; }

 private:
  struct Matcher;
  void bpe_word(std::string_view word, std::vector<std::int32_t>& out) const;
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;

  TokenizerSpec spec_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unordered_map<std::string, std::int32_t> vocab_;
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::int32_t>> merges_;  // pair -> rank, id
  std::int32_t byte_id_[256] = {};
  std::vector<std::string> id_bytes_;  // decoded bytes per id ("" where none)
  std::vector<std::uint8_t> id_kind_;  // 0 none, 1 vocab, 2 added, 3 special added
  std::unique_ptr<Matcher> raw_matcher_, normalized_matcher_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache_;
};

}  // namespace samebits::models::tokenizer
