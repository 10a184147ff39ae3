// Byte-level BPE tokenizer over Hugging Face tokenizer files (tokenizer.json + tokenizer_config.json), with
// the ids of Hugging Face `tokenizers`, and a streaming decoder (docs/tokenizer.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <samebits/errors.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace samebits {

// An immutable tokenizer; copies share it, and any number of threads may encode or decode at once.
class Tokenizer {
 public:
  // Loads a directory holding tokenizer.json (+ tokenizer_config.json), a tokenizer.json path, or a GGUF
  // file's tokenizer metadata (docs/gguf.md §12); every unsupported field is refused (samebits::Error, kind
  // Value) naming file, field and problem.
  static Tokenizer from_pretrained(const std::string& path);

  // The same from file contents in memory; `source` names the tokenizer.json in refusals.
  static Tokenizer from_json(std::string_view tokenizer_json, std::optional<std::string_view> config_json,
                             const std::string& source);

  // The ids of UTF-8 `text` (ill-formed sequences become U+FFFD first). `add_special_tokens` adds the
  // post-processor's bos/eos ids; with `allow_special` false, special added tokens are ordinary text.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true,
                                   bool allow_special = true) const;

  // The bytes the ids stand for (ByteLevel decoding); refuses an id that names no token.
  std::string decode_bytes(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  // decode_bytes as text: each ill-formed UTF-8 subpart becomes U+FFFD.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  // The bytes of one id, or nullopt when it names no token.
  std::optional<std::string> token_bytes(std::int32_t id) const;

  // True when `id` is an added token marked special.
  bool is_special(std::int32_t id) const;

  // One above the largest id of the vocabulary and the added tokens.
  std::size_t n_vocab() const;

  // The ids add_special_tokens puts before and after the text.
  const std::vector<std::int32_t>& bos_ids() const;
  const std::vector<std::int32_t>& eos_ids() const;

  // The bos/eos token ids (post-processor, then tokenizer_config.json's bos_token/eos_token).
  std::optional<std::int32_t> bos_token_id() const;
  std::optional<std::int32_t> eos_token_id() const;

  // The model's Jinja chat template as its files give it (tokenizer_config.json's chat_template, its
  // "default" entry when it is a list, chat_template.jinja, or a GGUF file's tokenizer.chat_template),
  // nullopt when there is none.
  std::optional<std::string> chat_template() const;

  // The tokenizer.json (or GGUF file) this tokenizer was read from.
  const std::string& source() const;

  // A one-line description of the pipeline (normalizer, pre-tokenizer steps, merges).
  std::string describe() const;

  // The Unicode version of the NFC and numeric tables (utf8proc).
  static std::string unicode_version();

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  friend class TokenStreamDecoder;
};

// Decodes ids one at a time into text that is printed once complete: a multi-byte UTF-8 character split
// across tokens is emitted when its last byte arrives; the concatenated output equals decode(all ids).
class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(Tokenizer tokenizer, bool skip_special_tokens = false);

  // The text completed by `id` (possibly empty); refuses an id that names no token.
  std::string push(std::int32_t id);

  // The rest: an incomplete trailing sequence becomes U+FFFD. The decoder is empty afterwards.
  std::string finish();

  // Bytes held back while a character is incomplete.
  std::size_t pending_bytes() const noexcept { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
  std::size_t position_ = 0;  // ids pushed so far (named in refusals)
};

}  // namespace samebits
