// GGUF tokenizer metadata to a TokenizerSpec (docs/gguf.md §12): the pre-tokenizer each `pre` name stands
// for, the token table split into byte-level vocabulary and added tokens by token type, merges, ids, flags.
#include "io/gguf_tokenizer.hpp"

#include <samebits/errors.hpp>
#include <unordered_map>

#include "io/gguf_keys.hpp"
#include "models/tokenizer/text.hpp"

namespace samebits::io {
namespace {

namespace tk = models::tokenizer;

// GGUF token types (docs/gguf.md §12.2).
enum TokenType : std::int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

// The bytes a byte-level spelling stands for, or nullopt when a character lies outside the GPT-2 table.
std::optional<std::string> byte_spelling(std::string_view utf8) {
  std::string out;
  for (const char32_t c : tk::utf8_to_u32(utf8)) {
    const int b = tk::char_to_byte(c);
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

// A text whose raw bytes equal its byte-level spelling (printable ASCII but space).
bool spelled_as_itself(std::string_view text) {
  for (const char c : text)
    if (c < 33 || c > 126) return false;
  return true;
}

tk::PreTokenizerStep byte_level(bool use_regex) {
  tk::PreTokenizerStep s;
  s.kind = tk::PreTokenizerStep::Kind::ByteLevel;
  s.use_regex = use_regex;
  return s;
}

tk::PreTokenizerStep split(tk::KnownPattern pattern) {
  tk::PreTokenizerStep s;
  s.kind = tk::PreTokenizerStep::Kind::SplitRegex;
  s.pattern = pattern;
  s.behavior = tk::SplitBehavior::Isolated;
  return s;
}

// The pre-tokenizer of the original Hugging Face tokenizer each `pre` name was hashed from, and its
// add_bos default (docs/gguf.md §12.1).
bool set_pre(const std::string& where, const std::string& pre, tk::TokenizerSpec& spec) {
  if (pre == "gpt-2") {
    spec.pre_tokenizer = {byte_level(true)};
    return false;
  }
  if (pre == "smollm") {  // every digit on its own, then the GPT-2 pattern
    tk::PreTokenizerStep digits;
    digits.kind = tk::PreTokenizerStep::Kind::Digits;
    digits.individual_digits = true;
    spec.pre_tokenizer = {digits, byte_level(true)};
    return false;
  }
  if (pre == "llama-bpe") {
    spec.pre_tokenizer = {split(tk::KnownPattern::Llama3), byte_level(false)};
    spec.ignore_merges = true;
    return true;
  }
  if (pre == "qwen2") {
    spec.pre_tokenizer = {split(tk::KnownPattern::Qwen2), byte_level(false)};
    spec.nfc = true;  // Qwen2's tokenizer.json normalizes to NFC (llama.cpp does not)
    return false;
  }
  if (pre == "default")
    throw_value_error(where +
                      "tokenizer.ggml.pre 'default' (llama.cpp's legacy split) matches no original "
                      "tokenizer; samebits reads 'gpt-2', 'llama-bpe', 'qwen2' and 'smollm'");
  throw_value_error(where + "tokenizer.ggml.pre '" + pre +
                    "' is not supported; samebits reads 'gpt-2', 'llama-bpe', 'qwen2' and 'smollm'");
}

std::optional<std::int32_t> token_id(const GgufFile& file, const std::string& key, std::size_t n_tokens) {
  const std::optional<std::uint64_t> id = gguf_uint(file, key);
  if (!id) return std::nullopt;
  if (*id >= n_tokens)
    throw_value_error(gguf_where(file) + key + " = " + std::to_string(*id) + " is outside the " +
                      std::to_string(n_tokens) + " tokens");
  return static_cast<std::int32_t>(*id);
}

}  // namespace

tk::TokenizerSpec gguf_tokenizer_spec(const GgufFile& file) {
  const std::string where = gguf_where(file);
  const std::optional<std::string> model = gguf_string(file, "tokenizer.ggml.model");
  if (!model) throw_value_error(where + "holds no tokenizer (tokenizer.ggml.model is absent)");
  if (*model == "llama")
    throw_value_error(where +
                      "tokenizer.ggml.model 'llama' is a SentencePiece vocabulary (Llama 2, Mistral, "
                      "Phi-3, TinyLlama), refused by name; samebits reads the byte-level 'gpt2' model");
  if (*model != "gpt2")
    throw_value_error(where + "tokenizer.ggml.model '" + *model +
                      "' is refused by name; samebits reads the byte-level 'gpt2' model");
  tk::TokenizerSpec spec;
  spec.source = file.path();
  const std::optional<std::string> pre = gguf_string(file, "tokenizer.ggml.pre");
  const bool add_bos_default = set_pre(where, pre.value_or("default"), spec);

  const GgufValue* tokens = gguf_array(file, "tokenizer.ggml.tokens", GgufValueType::String);
  if (tokens == nullptr || tokens->strings.empty())
    throw_value_error(where + "tokenizer.ggml.tokens is absent or empty");
  const std::size_t n = tokens->strings.size();
  if (n > static_cast<std::size_t>(tk::kMaxTokenId) + 1)
    throw_value_error(where + "tokenizer.ggml.tokens holds " + std::to_string(n) +
                      " tokens, above the bound " + std::to_string(tk::kMaxTokenId + 1));
  const GgufValue* types = gguf_array(file, "tokenizer.ggml.token_type", GgufValueType::Int32);
  if (types != nullptr && types->ints.size() != n)
    throw_value_error(where + "tokenizer.ggml.token_type holds " + std::to_string(types->ints.size()) +
                      " types for " + std::to_string(n) + " tokens");
  std::unordered_map<std::string_view, std::size_t> seen;
  seen.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& text = tokens->strings[i];
    const std::string field = "tokenizer.ggml.tokens[" + std::to_string(i) + "]";
    if (text.empty()) throw_value_error(where + field + " is empty");
    if (!tk::utf8_valid(text)) throw_value_error(where + field + " is not valid UTF-8");
    const auto [at, fresh] = seen.emplace(text, i);
    if (!fresh)
      throw_value_error(where + field + " '" + text + "' repeats tokenizer.ggml.tokens[" +
                        std::to_string(at->second) + "]");
    const std::int64_t type = types == nullptr ? kNormal : types->ints[i];
    const auto id = static_cast<std::int32_t>(i);
    if (type == kControl || type == kUnknown || type == kUserDefined) {
      // Matched on the raw text before any splitting; CONTROL and UNKNOWN are special, USER_DEFINED not.
      spec.added.push_back({text, id, type != kUserDefined, false});
      if (spelled_as_itself(text)) spec.vocab.emplace_back(text, id);
      continue;
    }
    if (type != kNormal && type != kUnused)
      throw_value_error(where + field + " '" + text + "' has token type " + std::to_string(type) +
                        (type == kByte ? " (BYTE, a SentencePiece byte token)" : "") +
                        "; a gpt2 vocabulary holds NORMAL, UNUSED, CONTROL, UNKNOWN and USER_DEFINED tokens");
    std::optional<std::string> bytes = byte_spelling(text);
    if (!bytes)
      throw_value_error(where + field + " '" + text +
                        "' is not a byte-level spelling (a character outside the GPT-2 byte table)");
    spec.vocab.emplace_back(std::move(*bytes), id);
  }

  const GgufValue* merges = gguf_array(file, "tokenizer.ggml.merges", GgufValueType::String);
  if (merges == nullptr) throw_value_error(where + "tokenizer.ggml.merges is absent (a gpt2 model needs it)");
  spec.merges.reserve(merges->strings.size());
  for (std::size_t k = 0; k < merges->strings.size(); ++k) {
    const std::string& m = merges->strings[k];
    const std::string field = "tokenizer.ggml.merges[" + std::to_string(k) + "]";
    const std::size_t space = m.size() < 2 ? std::string::npos : m.find(' ', 1);
    if (space == std::string::npos || space + 1 == m.size())
      throw_value_error(where + field + " '" + m + "' is not two names split by a space");
    if (!tk::utf8_valid(m)) throw_value_error(where + field + " is not valid UTF-8");
    std::optional<std::string> a = byte_spelling(std::string_view(m).substr(0, space));
    std::optional<std::string> b = byte_spelling(std::string_view(m).substr(space + 1));
    if (!a || !b)
      throw_value_error(where + field + " '" + m + "' names a part that is not a byte-level spelling");
    spec.merges.emplace_back(std::move(*a), std::move(*b));
  }

  spec.bos_token_id = token_id(file, "tokenizer.ggml.bos_token_id", n);
  spec.eos_token_id = token_id(file, "tokenizer.ggml.eos_token_id", n);
  for (const char* key : {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                          "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    (void)token_id(file, key, n);  // checked, not used by encoding
  if (gguf_bool(file, "tokenizer.ggml.add_bos_token").value_or(add_bos_default)) {
    if (!spec.bos_token_id)
      throw_value_error(where +
                        "tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id is absent");
    spec.bos_ids = {*spec.bos_token_id};
  }
  if (gguf_bool(file, "tokenizer.ggml.add_eos_token").value_or(false)) {
    if (!spec.eos_token_id)
      throw_value_error(where +
                        "tokenizer.ggml.add_eos_token is set but tokenizer.ggml.eos_token_id is absent");
    spec.eos_ids = {*spec.eos_token_id};
  }
  if (gguf_bool(file, "tokenizer.ggml.add_space_prefix").value_or(false))
    throw_value_error(where +
                      "tokenizer.ggml.add_space_prefix is true; a byte-level BPE adds no prefix space");
  spec.chat_template = gguf_string(file, "tokenizer.chat_template");
  return spec;
}

tk::TokenizerSpec read_gguf_tokenizer(const std::string& path) { return gguf_tokenizer_spec(GgufFile(path)); }

}  // namespace samebits::io
