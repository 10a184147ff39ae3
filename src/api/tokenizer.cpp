// samebits::Tokenizer and TokenStreamDecoder over the engine's byte-level BPE (docs/tokenizer.md).
#include <samebits/tokenizer.hpp>
#include <utility>

#include "io/tokenizer_files.hpp"
#include "models/tokenizer/bpe.hpp"
#include "models/tokenizer/text.hpp"

namespace samebits {

namespace tk = models::tokenizer;

struct Tokenizer::Impl {
  explicit Impl(tk::TokenizerSpec spec) : bpe(std::move(spec)) {}
  tk::BpeTokenizer bpe;
};

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::from_pretrained(const std::string& path) {
  return Tokenizer(std::make_shared<const Impl>(io::read_tokenizer_files(path)));
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::optional<std::string_view> config_json,
                               const std::string& source) {
  return Tokenizer(
      std::make_shared<const Impl>(io::decode_tokenizer_json(tokenizer_json, config_json, source)));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                            bool allow_special) const {
  return impl_->bpe.encode(text, add_special_tokens, allow_special);
}

std::string Tokenizer::decode_bytes(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  return impl_->bpe.decode_bytes(ids, skip_special_tokens);
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  return tk::utf8_lossy(impl_->bpe.decode_bytes(ids, skip_special_tokens));
}

std::optional<std::string> Tokenizer::token_bytes(std::int32_t id) const {
  const auto bytes = impl_->bpe.token_bytes(id);
  if (!bytes) return std::nullopt;
  return std::string(*bytes);
}

bool Tokenizer::is_special(std::int32_t id) const { return impl_->bpe.is_special(id); }
std::size_t Tokenizer::n_vocab() const { return impl_->bpe.n_vocab(); }
const std::vector<std::int32_t>& Tokenizer::bos_ids() const { return impl_->bpe.spec().bos_ids; }
const std::vector<std::int32_t>& Tokenizer::eos_ids() const { return impl_->bpe.spec().eos_ids; }
std::optional<std::int32_t> Tokenizer::bos_token_id() const { return impl_->bpe.spec().bos_token_id; }
std::optional<std::int32_t> Tokenizer::eos_token_id() const { return impl_->bpe.spec().eos_token_id; }
std::optional<std::string> Tokenizer::chat_template() const { return impl_->bpe.spec().chat_template; }
const std::string& Tokenizer::source() const { return impl_->bpe.spec().source; }
std::string Tokenizer::unicode_version() { return tk::nfc_unicode_version(); }

std::string Tokenizer::describe() const {
  const tk::TokenizerSpec& s = impl_->bpe.spec();
  std::string out = std::string("normalizer ") + (s.nfc ? "NFC" : "none") + ", pre-tokenizer [";
  for (std::size_t k = 0; k < s.pre_tokenizer.size(); ++k) {
    const auto& step = s.pre_tokenizer[k];
    if (k > 0) out += ", ";
    switch (step.kind) {
      case tk::PreTokenizerStep::Kind::ByteLevel:
        out += step.use_regex ? "ByteLevel(gpt2)" : "ByteLevel";
        break;
      case tk::PreTokenizerStep::Kind::SplitRegex:
        out += std::string("Split(") + tk::pattern_name(step.pattern) + ")";
        break;
      case tk::PreTokenizerStep::Kind::SplitLiteral:
        out += "Split('" + step.literal + "')";
        break;
      case tk::PreTokenizerStep::Kind::Digits:
        out += step.individual_digits ? "Digits(individual)" : "Digits";
        break;
    }
  }
  out += "], " + std::to_string(s.merges.size()) + " merges, n_vocab " + std::to_string(n_vocab());
  return out;
}

TokenStreamDecoder::TokenStreamDecoder(Tokenizer tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {}

std::string TokenStreamDecoder::push(std::int32_t id) {
  const std::int32_t one[1] = {id};
  std::string bytes;
  try {
    bytes = tokenizer_.impl_->bpe.decode_bytes(one, skip_special_tokens_);
  } catch (const Error&) {
    throw_value_error("samebits.models.Tokenizer: id " + std::to_string(id) + " at position " +
                      std::to_string(position_) + " is outside [0, n_vocab) and no added token");
  }
  ++position_;
  pending_ += bytes;
  // Emit every character that is decided; keep a valid but truncated tail (docs/tokenizer.md §6).
  std::string out;
  std::size_t i = 0;
  while (i < pending_.size()) {
    std::size_t bad = 1;
    const std::size_t n = tk::utf8_sequence_length(pending_, i, &bad);
    if (n > 0) {
      out.append(pending_, i, n);
      i += n;
      continue;
    }
    const auto lead = static_cast<unsigned char>(pending_[i]);
    if (i + bad == pending_.size() && lead >= 0xC2 && lead <= 0xF4) break;  // may still complete
    out.append("\xEF\xBF\xBD");
    i += bad;
  }
  pending_.erase(0, i);
  return out;
}

std::string TokenStreamDecoder::finish() {
  std::string out = tk::utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace samebits
