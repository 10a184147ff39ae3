#include "io/tokenizer_files.hpp"

#include <filesystem>
#include <fstream>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "models/tokenizer/text.hpp"

namespace samebits::io {

namespace tk = models::tokenizer;

namespace {

// Files larger than this are refused before reading (the largest real tokenizer.json is ~17 MB).
constexpr std::uintmax_t kMaxTokenizerFileBytes = std::uintmax_t{256} << 20;

class Reader {
 public:
  explicit Reader(std::string source) : where_("samebits.models.Tokenizer: " + source + ": ") {
    spec_.source = std::move(source);
  }

  [[noreturn]] void fail(const std::string& message) const { throw_value_error(where_ + message); }

  std::string utf8(const std::u32string& s, const std::string& field) const {
    std::string out = json::to_utf8(s);
    if (!tk::utf8_valid(out)) fail(field + " holds a lone surrogate");
    return out;
  }

  std::string type_of(const json::Value& v, const std::string& field) const {
    if (!v.is_object()) fail(field + " is not an object");
    const json::Value* t = v.find("type");
    if (t == nullptr || !t->is_string()) fail(field + " has no string 'type'");
    return utf8(t->as_string(), field + ".type");
  }

  bool flag(const json::Value& obj, std::string_view key, bool fallback, const std::string& field) const {
    const json::Value* v = obj.find(key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_bool()) fail(field + "." + std::string(key) + " is not a bool");
    return v->as_bool();
  }

  // A bool that `tokenizers` requires (it refuses the file without it), so samebits does too.
  bool required_flag(const json::Value& obj, std::string_view key, const std::string& field) const {
    const json::Value* v = obj.find(key);
    if (v == nullptr || !v->is_bool())
      fail(field + " has no bool '" + std::string(key) + "' (tokenizers requires it)");
    return v->as_bool();
  }

  std::int64_t integer(const json::Value& v, const std::string& field) const {
    const auto n = v.is_integer() ? v.as_int64() : std::nullopt;
    if (!n) fail(field + " is not an integer");
    return *n;
  }

  // A vocabulary spelling in the GPT-2 byte table, as bytes; nullopt when a character is outside it.
  static std::optional<std::string> byte_spelling(const std::u32string& s) {
    std::string out;
    for (const char32_t c : s) {
      const int b = tk::char_to_byte(c);
      if (b < 0) return std::nullopt;
      out.push_back(static_cast<char>(b));
    }
    return out;
  }

  std::string spelling_or_fail(const std::u32string& s, const std::string& field) const {
    auto bytes = byte_spelling(s);
    if (bytes) return *bytes;
    const std::string text = utf8(s, field);
    if (s.find(U'\u2581') != std::u32string::npos)
      fail(field + " '" + text + "' holds '\u2581', a SentencePiece spelling (\u2581), refused by name");
    fail(field + " '" + text + "' is not a byte-level spelling (a character outside the GPT-2 byte table)");
  }

  void read_added(const json::Value& root) {
    const json::Value* added = root.find("added_tokens");
    if (added == nullptr || added->is_null()) return;
    if (!added->is_array()) fail("added_tokens is not an array");
    std::size_t k = 0;
    for (const json::Value& entry : added->as_array()) {
      const std::string field = "added_tokens[" + std::to_string(k++) + "]";
      if (!entry.is_object()) fail(field + " is not an object");
      const json::Value* id = entry.find("id");
      const json::Value* content = entry.find("content");
      if (id == nullptr || content == nullptr || !content->is_string() || !id->is_integer())
        fail(field + " has no str content and int id");
      tk::AddedToken t;
      const std::int64_t n = integer(*id, field + ".id");
      if (n < 0 || n > tk::kMaxTokenId)
        fail(field + ".id " + std::to_string(n) + " is outside [0, " + std::to_string(tk::kMaxTokenId + 1) +
             ")");
      t.id = static_cast<std::int32_t>(n);
      t.content = utf8(content->as_string(), field + ".content");
      if (t.content.empty()) fail(field + ".content is empty");
      t.special = required_flag(entry, "special", field);
      t.normalized = required_flag(entry, "normalized", field);
      for (const char* key : {"lstrip", "rstrip", "single_word"})
        if (required_flag(entry, key, field))
          fail(field + " ('" + t.content + "') sets " + key + ": not honored (false only)");
      added_contents_.insert(content->as_string());
      spec_.added.push_back(std::move(t));
    }
  }

  void read_model(const json::Value& root) {
    const json::Value* model = root.find("model");
    if (model == nullptr) fail("model is missing");
    const std::string type = type_of(*model, "model");
    if (type == "Unigram") fail("model.type 'Unigram': a SentencePiece Unigram model, refused by name");
    if (type != "BPE") fail("model.type '" + type + "'; only BPE is byte-level BPE");
    if (flag(*model, "byte_fallback", false, "model"))
      fail("model.byte_fallback is true: a SentencePiece-style BPE (Llama 2, Mistral), refused by name");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json::Value* v = model->find(key);
      if (v != nullptr && !v->is_null() && !(v->is_string() && v->as_string().empty()))
        fail(std::string("model.") + key + " is set: not a byte-level BPE (null only)");
    }
    const json::Value* dropout = model->find("dropout");
    if (dropout != nullptr && !dropout->is_null())
      fail("model.dropout is set: a random BPE is not honored (null only)");
    spec_.ignore_merges = flag(*model, "ignore_merges", false, "model");
    spec_.fuse_unk = flag(*model, "fuse_unk", false, "model");
    const json::Value* vocab = model->find("vocab");
    if (vocab == nullptr || !vocab->is_object()) fail("model.vocab is not an object");
    spec_.vocab.reserve(vocab->as_object().size());
    for (const auto& [key, value] : vocab->as_object()) {
      const std::string field = "model.vocab['" + utf8(key, "model.vocab key") + "']";
      const std::int64_t id = integer(value, field);
      if (id < 0 || id > tk::kMaxTokenId)
        fail(field + " = " + std::to_string(id) + " is outside [0, " + std::to_string(tk::kMaxTokenId + 1) +
             ")");
      auto bytes = byte_spelling(key);
      if (!bytes) {
        if (added_contents_.count(key) != 0)
          continue;  // an added token's own spelling (docs/tokenizer.md §2.2)
        spelling_or_fail(key, "model.vocab entry");
      }
      spec_.vocab.emplace_back(std::move(*bytes), static_cast<std::int32_t>(id));
    }
    const json::Value* unk = model->find("unk_token");
    if (unk != nullptr && !unk->is_null()) {
      if (!unk->is_string()) fail("model.unk_token is not a string");
      const json::Value* id = vocab->find(unk->as_string());
      if (id == nullptr)
        fail("model.unk_token '" + utf8(unk->as_string(), "model.unk_token") + "' is not in model.vocab");
      spec_.unk_id = static_cast<std::int32_t>(integer(*id, "model.vocab[unk_token]"));
    }
    const json::Value* merges = model->find("merges");
    if (merges == nullptr || merges->is_null()) return;
    if (!merges->is_array()) fail("model.merges is not an array");
    spec_.merges.reserve(merges->as_array().size());
    std::size_t k = 0;
    for (const json::Value& m : merges->as_array()) {
      const std::string field = "model.merges[" + std::to_string(k++) + "]";
      std::u32string a, b;
      if (m.is_string()) {
        const std::u32string& s = m.as_string();
        const std::size_t space = s.find(U' ');
        if (space == std::u32string::npos || s.find(U' ', space + 1) != std::u32string::npos)
          fail(field + " '" + utf8(s, field) + "' is not a pair");
        a = s.substr(0, space);
        b = s.substr(space + 1);
      } else if (m.is_array() && m.as_array().size() == 2 && m.as_array()[0].is_string() &&
                 m.as_array()[1].is_string()) {
        a = m.as_array()[0].as_string();
        b = m.as_array()[1].as_string();
      } else {
        fail(field + " is not a pair");
      }
      spec_.merges.emplace_back(spelling_or_fail(a, field + " names"), spelling_or_fail(b, field + " names"));
    }
  }

  void read_normalizer(const json::Value& root) {
    const json::Value* n = root.find("normalizer");
    if (n == nullptr || n->is_null()) return;
    const std::string type = type_of(*n, "normalizer");
    if (type == "NFC") {
      spec_.nfc = true;
      return;
    }
    if (type == "Sequence") {
      const json::Value* list = n->find("normalizers");
      if (list != nullptr && list->is_array() && !list->as_array().empty()) {
        for (const json::Value& step : list->as_array()) {
          const std::string t = type_of(step, "normalizer.normalizers[]");
          if (t != "NFC") fail("normalizer '" + t + "' is not honored; null or NFC");
        }
        spec_.nfc = true;
        return;
      }
    }
    fail("normalizer '" + type + "' is not honored; null or NFC");
  }

  void read_pre_step(const json::Value& step, const std::string& field) {
    const std::string type = type_of(step, field);
    tk::PreTokenizerStep s;
    if (type == "Sequence") {
      const json::Value* list = step.find("pretokenizers");
      if (list == nullptr || !list->is_array()) fail(field + ".pretokenizers is not an array");
      std::size_t k = 0;
      for (const json::Value& inner : list->as_array())
        read_pre_step(inner, field + ".pretokenizers[" + std::to_string(k++) + "]");
      return;
    }
    if (type == "ByteLevel") {
      s.kind = tk::PreTokenizerStep::Kind::ByteLevel;
      s.add_prefix_space = required_flag(step, "add_prefix_space", field);
      (void)required_flag(step, "trim_offsets", field);  // offsets only
      s.use_regex = flag(step, "use_regex", true, field);
    } else if (type == "Digits") {
      s.kind = tk::PreTokenizerStep::Kind::Digits;
      s.individual_digits = required_flag(step, "individual_digits", field);
    } else if (type == "Split") {
      const json::Value* pattern = step.find("pattern");
      if (pattern == nullptr || !pattern->is_object()) fail(field + ".pattern is not an object");
      const json::Value* regex = pattern->find("Regex");
      const json::Value* literal = pattern->find("String");
      if (regex != nullptr && regex->is_string()) {
        const std::string text = utf8(regex->as_string(), field + ".pattern.Regex");
        const auto known = tk::known_pattern(text);
        if (!known)
          fail(field + ".pattern.Regex '" + text +
               "' is not one of the known spellings (gpt2, llama3, qwen2)");
        s.kind = tk::PreTokenizerStep::Kind::SplitRegex;
        s.pattern = *known;
      } else if (literal != nullptr && literal->is_string() && !literal->as_string().empty()) {
        s.kind = tk::PreTokenizerStep::Kind::SplitLiteral;
        s.literal = utf8(literal->as_string(), field + ".pattern.String");
      } else {
        fail(field + ".pattern is neither a Regex nor a non-empty String");
      }
      const json::Value* behavior = step.find("behavior");
      if (behavior == nullptr || !behavior->is_string()) fail(field + ".behavior is not a string");
      const std::string b = utf8(behavior->as_string(), field + ".behavior");
      if (b == "Removed")
        s.behavior = tk::SplitBehavior::Removed;
      else if (b == "Isolated")
        s.behavior = tk::SplitBehavior::Isolated;
      else if (b == "MergedWithPrevious")
        s.behavior = tk::SplitBehavior::MergedWithPrevious;
      else if (b == "MergedWithNext")
        s.behavior = tk::SplitBehavior::MergedWithNext;
      else if (b == "Contiguous")
        s.behavior = tk::SplitBehavior::Contiguous;
      else
        fail(field + ".behavior '" + b + "' is not a known behavior");
      s.invert = required_flag(step, "invert", field);
    } else {
      fail(field + " step '" + type + "' is not a known cut (ByteLevel, Split, Digits, Sequence of them)");
    }
    spec_.pre_tokenizer.push_back(std::move(s));
  }

  void read_pre_tokenizer(const json::Value& root) {
    const json::Value* p = root.find("pre_tokenizer");
    if (p == nullptr || p->is_null()) fail("pre_tokenizer is null: a byte-level BPE needs a ByteLevel step");
    read_pre_step(*p, "pre_tokenizer");
    std::size_t byte_levels = 0;
    for (const auto& s : spec_.pre_tokenizer) byte_levels += s.kind == tk::PreTokenizerStep::Kind::ByteLevel;
    if (byte_levels != 1 || spec_.pre_tokenizer.back().kind != tk::PreTokenizerStep::Kind::ByteLevel)
      fail("pre_tokenizer must end with its one ByteLevel step (it has " + std::to_string(byte_levels) + ")");
  }

  void read_template(const json::Value& t, const std::string& field) {
    const json::Value* single = t.find("single");
    const json::Value* specials = t.find("special_tokens");
    if (single == nullptr || !single->is_array()) fail(field + ".single is not an array");
    if (specials == nullptr || !specials->is_object()) fail(field + ".special_tokens is not an object");
    bool after = false;
    std::size_t sequences = 0, k = 0;
    for (const json::Value& item : single->as_array()) {
      const std::string item_field = field + ".single[" + std::to_string(k++) + "]";
      if (!item.is_object() || item.as_object().size() != 1)
        fail(item_field + " is neither a Sequence nor a SpecialToken");
      const auto& [kind, body] = item.as_object()[0];
      const json::Value* id = body.find("id");
      if (id == nullptr || !id->is_string()) fail(item_field + " has no string id");
      if (kind == U"Sequence") {
        if (!id->is_string_equal("A"))
          fail(item_field + " names sequence '" + utf8(id->as_string(), item_field) + "', not A");
        ++sequences;
        after = true;
      } else if (kind == U"SpecialToken") {
        const std::string name = utf8(id->as_string(), item_field + ".id");
        const json::Value* special = specials->find(id->as_string());
        const json::Value* ids = special == nullptr ? nullptr : special->find("ids");
        if (ids == nullptr || !ids->is_array() || ids->as_array().empty())
          fail(item_field + " names special '" + name + "', which has no non-empty ids in special_tokens");
        for (const json::Value& v : ids->as_array()) {
          const std::int64_t n = integer(v, field + ".special_tokens['" + name + "'].ids[]");
          if (n < 0 || n > tk::kMaxTokenId)
            fail(field + ".special_tokens['" + name + "'] id " + std::to_string(n) + " is out of range");
          (after ? spec_.eos_ids : spec_.bos_ids).push_back(static_cast<std::int32_t>(n));
        }
      } else {
        fail(item_field + " is neither a Sequence nor a SpecialToken");
      }
    }
    if (sequences != 1)
      fail(field + ".single holds " + std::to_string(sequences) + " Sequence items, not one");
  }

  void read_post_processor(const json::Value& root) {
    const json::Value* p = root.find("post_processor");
    if (p == nullptr || p->is_null()) return;
    const std::string type = type_of(*p, "post_processor");
    std::vector<std::pair<const json::Value*, std::string>> steps;
    if (type == "Sequence") {
      const json::Value* list = p->find("processors");
      if (list == nullptr || !list->is_array()) fail("post_processor.processors is not an array");
      std::size_t k = 0;
      for (const json::Value& step : list->as_array())
        steps.emplace_back(&step, "post_processor.processors[" + std::to_string(k++) + "]");
    } else {
      steps.emplace_back(p, "post_processor");
    }
    std::size_t templates = 0;
    for (const auto& [step, field] : steps) {
      const std::string t = type_of(*step, field);
      if (t == "ByteLevel") continue;  // offsets only: the ids do not change
      if (t == "TemplateProcessing" && templates++ == 0) {
        read_template(*step, field);
        continue;
      }
      fail(field + " type '" + t +
           "' is not honored (null, ByteLevel, TemplateProcessing, a Sequence of them)");
    }
  }

  void read_rest(const json::Value& root) {
    for (const char* key : {"truncation", "padding"}) {
      const json::Value* v = root.find(key);
      if (v != nullptr && !v->is_null()) fail(std::string(key) + " is set: not honored (null only)");
    }
    const json::Value* d = root.find("decoder");
    if (d != nullptr && !d->is_null()) {
      const std::string type = type_of(*d, "decoder");
      if (type != "ByteLevel") fail("decoder '" + type + "' is not honored (null, ByteLevel)");
    }
  }

  void read_config(std::string_view text, const std::string& name) {
    json::Value cfg;
    try {
      cfg = json::parse(text);
    } catch (const json::ParseError& e) {
      throw_value_error("samebits.models.Tokenizer: " + name + ": not valid JSON (" + e.what() + ")");
    }
    if (!cfg.is_object()) throw_value_error("samebits.models.Tokenizer: " + name + ": not a JSON object");
    const auto cfg_flag = [&](std::string_view key) -> std::optional<bool> {
      const json::Value* v = cfg.find(key);
      if (v == nullptr || v->is_null()) return std::nullopt;
      if (!v->is_bool())
        throw_value_error("samebits.models.Tokenizer: " + name + ": " + std::string(key) + " is not a bool");
      return v->as_bool();
    };
    if (cfg_flag("add_bos_token") == false) spec_.bos_ids.clear();
    if (cfg_flag("add_eos_token") == false) spec_.eos_ids.clear();
    spec_.bos_token_id =
        spec_.bos_ids.empty() ? std::nullopt : std::optional<std::int32_t>(spec_.bos_ids.front());
    spec_.eos_token_id =
        spec_.eos_ids.empty() ? std::nullopt : std::optional<std::int32_t>(spec_.eos_ids.back());
    const auto named = [&](std::string_view key) -> std::optional<std::int32_t> {
      const json::Value* v = cfg.find(key);
      if (v != nullptr && v->is_object()) v = v->find("content");
      if (v == nullptr || !v->is_string()) return std::nullopt;
      for (const auto& t : spec_.added)
        if (json::to_utf8(v->as_string()) == t.content) return t.id;
      return std::nullopt;
    };
    if (const auto id = named("bos_token")) spec_.bos_token_id = id;
    if (const auto id = named("eos_token")) spec_.eos_token_id = id;
    read_chat_template(cfg, name);
  }

  // chat_template: a string, or a list of {"name", "template"} of which "default" is the one taken
  // (docs/tokenizer.md §10); null or absent means none.
  void read_chat_template(const json::Value& cfg, const std::string& name) {
    const json::Value* v = cfg.find("chat_template");
    if (v == nullptr || v->is_null()) return;
    const std::string where = "samebits.models.Tokenizer: " + name + ": chat_template";
    const auto text = [&](const json::Value& t, const std::string& field) {
      std::string out = json::to_utf8(t.as_string());
      if (!tk::utf8_valid(out)) throw_value_error(where + field + " holds a lone surrogate");
      return out;
    };
    if (v->is_string()) {
      spec_.chat_template = text(*v, "");
      return;
    }
    if (!v->is_array())
      throw_value_error(where + " is neither a string nor a list of {\"name\", \"template\"} objects");
    for (std::size_t k = 0; k < v->as_array().size(); ++k) {
      const json::Value& entry = v->as_array()[k];
      std::string field = std::to_string(k);  // appended, not prefixed: gcc 12 warns on "[" + to_string
      field = field.insert(0, 1, '[') + ']';
      const json::Value* n = entry.find("name");
      const json::Value* t = entry.find("template");
      if (n == nullptr || t == nullptr || !n->is_string() || !t->is_string())
        throw_value_error(where + field + " is not an object with string 'name' and 'template'");
      if (text(*n, field + ".name") == "default") spec_.chat_template = text(*t, field + ".template");
    }
  }

  tk::TokenizerSpec run(std::string_view json_text, std::optional<std::string_view> config_text,
                        const std::string& config_name) {
    json::Value root;
    try {
      root = json::parse(json_text);
    } catch (const json::ParseError& e) {
      fail(std::string("not valid JSON (") + e.what() + ")");
    }
    if (!root.is_object()) fail("not a JSON object");
    read_rest(root);
    read_added(root);
    read_model(root);
    read_normalizer(root);
    read_pre_tokenizer(root);
    read_post_processor(root);
    if (config_text) {
      read_config(*config_text, config_name);
    } else {
      spec_.bos_token_id =
          spec_.bos_ids.empty() ? std::nullopt : std::optional<std::int32_t>(spec_.bos_ids.front());
      spec_.eos_token_id =
          spec_.eos_ids.empty() ? std::nullopt : std::optional<std::int32_t>(spec_.eos_ids.back());
    }
    return std::move(spec_);
  }

 private:
  std::string where_;
  tk::TokenizerSpec spec_;
  std::unordered_set<std::u32string> added_contents_;
};

std::string read_whole(const std::filesystem::path& p, const std::string& shown) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  if (ec)
    throw_value_error("samebits.models.Tokenizer: " + shown + ": cannot be read (" + ec.message() + ")");
  if (size > kMaxTokenizerFileBytes)
    throw_value_error("samebits.models.Tokenizer: " + shown + ": " + std::to_string(size) +
                      " bytes, above the 256 MiB bound");
  std::ifstream in(p, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (!in.good() && !in.eof()) throw_value_error("samebits.models.Tokenizer: " + shown + ": cannot be read");
  return buffer.str();
}

}  // namespace

tk::TokenizerSpec decode_tokenizer_json(std::string_view json_text,
                                        std::optional<std::string_view> config_text,
                                        const std::string& source) {
  return Reader(source).run(json_text, config_text, source + " (tokenizer_config.json)");
}

tk::TokenizerSpec read_tokenizer_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path json_path(path);
  if (fs::is_directory(json_path, ec)) {
    json_path /= "tokenizer.json";
    if (!fs::exists(json_path, ec)) {
      if (fs::exists(fs::path(path) / "tokenizer.model", ec))
        throw_value_error(
            "samebits.models.Tokenizer: " + path +
            " holds tokenizer.model and no tokenizer.json: a SentencePiece family (Llama 2, Mistral, "
            "Gemma, Phi-3), refused by name");
      throw_value_error("samebits.models.Tokenizer: " + path + " holds no tokenizer.json");
    }
  } else if (!fs::exists(json_path, ec)) {
    throw_value_error("samebits.models.Tokenizer: " + path + " does not exist");
  }
  const std::string shown = json_path.string();
  const std::string text = read_whole(json_path, shown);
  const fs::path config_path = json_path.parent_path() / "tokenizer_config.json";
  std::optional<std::string> config;
  if (fs::exists(config_path, ec)) config = read_whole(config_path, config_path.string());
  tk::TokenizerSpec spec = Reader(shown).run(
      text, config ? std::optional<std::string_view>(*config) : std::nullopt, config_path.string());
  // Newer checkpoints keep the template in its own file, which then takes precedence (docs/tokenizer.md §10).
  const fs::path template_path = json_path.parent_path() / "chat_template.jinja";
  if (fs::exists(template_path, ec)) {
    spec.chat_template = read_whole(template_path, template_path.string());
    if (!tk::utf8_valid(*spec.chat_template))
      throw_value_error("samebits.models.Tokenizer: " + template_path.string() + ": not valid UTF-8");
  }
  return spec;
}

}  // namespace samebits::io
