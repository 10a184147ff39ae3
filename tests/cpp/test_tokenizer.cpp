// The byte-level BPE tokenizer (docs/tokenizer.md): equality with Hugging Face `tokenizers` over the
// committed corpus fixtures for the smollm2, gpt2, llama3 and qwen2 pipelines, Unicode classes against
// Oniguruma's, the pre-tokenizer vectors, refusals, BOS/EOS, streaming decode and concurrent use.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>
#include <utf8proc.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <samebits/json.hpp>
#include <samebits/tokenizer.hpp>
#include <string>
#include <thread>
#include <vector>

#include "io/sha256.hpp"
#include "models/tokenizer/pre_tokenizer.hpp"
#include "models/tokenizer/text.hpp"
#include "tokenizer_corpus.hpp"

namespace json = samebits::json;
namespace tk = samebits::models::tokenizer;
using samebits::Tokenizer;

namespace {

const std::string kFixtures = std::string(SAMEBITS_SOURCE_DIR) + "/tests/fixtures/tokenizer";

std::string ids_sha(const std::vector<std::int32_t>& ids) {
  std::string bytes(ids.size() * 4, '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto v = static_cast<std::uint32_t>(ids[i]);
    for (int b = 0; b < 4; ++b)
      bytes[i * 4 + static_cast<std::size_t>(b)] = static_cast<char>((v >> (8 * b)) & 0xFF);
  }
  return samebits::io::sha256_hex(bytes);
}

// `doc` with member `key` of object `path` (nested keys) replaced by `value` (added when absent).
json::Value replaced(const json::Value& doc, const std::vector<std::string>& path, const json::Value& value,
                     std::size_t depth = 0) {
  json::Value::Object members = doc.as_object();
  const std::u32string key = tk::utf8_to_u32(path[depth]);
  bool found = false;
  for (auto& [k, v] : members) {
    if (k != key) continue;
    v = depth + 1 == path.size() ? value : replaced(v, path, value, depth + 1);
    found = true;
  }
  if (!found) members.emplace_back(key, value);
  return json::Value::make_object(std::move(members));
}

const json::Value& base_document() {
  static const json::Value doc =
      json::parse(samebits::test::read_file_bytes(kFixtures + "/smollm2/tokenizer.json"));
  return doc;
}

std::string variant_json(const std::string& name) {
  if (name == "smollm2") return json::canonical_json(base_document());
  const json::Value layouts = json::parse(samebits::test::read_file_bytes(kFixtures + "/layouts.json"));
  const json::Value& layout = *layouts.find(name);
  json::Value doc = base_document();
  for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder"})
    doc = replaced(doc, {key}, *layout.find(key));
  doc = replaced(doc, {"model", "ignore_merges"}, *layout.find("ignore_merges"));
  if (const json::Value* normalized = layout.find("added_normalized");
      normalized != nullptr && normalized->as_bool()) {
    json::Value::Array added;
    for (const json::Value& entry : doc.find("added_tokens")->as_array()) {
      bool special = true;
      for (const json::Value& name : layout.find("not_special")->as_array())
        special = special && name.as_string() != entry.find("content")->as_string();
      json::Value edited = replaced(entry, {"normalized"}, json::Value::make_bool(true));
      added.push_back(replaced(edited, {"special"}, json::Value::make_bool(special)));
    }
    doc = replaced(doc, {"added_tokens"}, json::Value::make_array(std::move(added)));
  }
  return json::canonical_json(doc);
}

const samebits::test::TokenizerCorpus& corpus() {
  static const samebits::test::TokenizerCorpus c = samebits::test::make_tokenizer_corpus(kFixtures);
  return c;
}

const json::Value& reference() {
  static const json::Value ref = json::parse(samebits::test::read_file_bytes(kFixtures + "/reference.json"));
  return ref;
}

std::string str(const json::Value& v) { return json::to_utf8(v.as_string()); }

TEST(TokenizerCorpus, MatchesTheRecordedCorpus) {
  const auto& c = corpus();
  EXPECT_EQ(c.bytes.size(), static_cast<std::size_t>(*reference().find("corpus_bytes")->as_int64()));
  EXPECT_EQ(samebits::io::sha256_hex(c.bytes), str(*reference().find("corpus_sha256")));
  EXPECT_EQ(c.chunks.size(), static_cast<std::size_t>(*reference().find("chunks")->as_int64()));
  EXPECT_GE(c.bytes.size(), std::size_t{1} << 20);
}

class TokenizerEquality : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerEquality, IdsAndDecodeEqualTokenizers) {
  const Tokenizer tok = Tokenizer::from_json(variant_json(GetParam()), std::nullopt, GetParam());
  const json::Value& rec = *reference().find("layouts")->find(GetParam());
  const auto& hashes = rec.find("ids_sha256")->as_array();
  const auto& counts = rec.find("count")->as_array();
  const auto& decoded = rec.find("decode_sha256")->as_array();
  const auto& c = corpus();
  ASSERT_EQ(hashes.size(), c.chunks.size());
  std::size_t compared = 0;
  for (std::size_t k = 0; k < c.chunks.size(); ++k) {
    const std::vector<std::int32_t> ids = tok.encode(c.chunks[k]);
    ASSERT_EQ(static_cast<std::int64_t>(ids.size()), *counts[k].as_int64()) << GetParam() << " chunk " << k;
    ASSERT_EQ(ids_sha(ids), str(hashes[k])) << GetParam() << " chunk " << k;
    ASSERT_EQ(samebits::io::sha256_hex(tok.decode(ids)), str(decoded[k]))
        << GetParam() << " decode of chunk " << k;
    compared += ids.size();
  }
  EXPECT_EQ(static_cast<std::int64_t>(compared), *rec.find("total_ids")->as_int64());
  for (const auto& [key, hash] : rec.find("text_special_sha256")->as_object()) {
    const std::size_t k = std::stoul(json::to_utf8(key));
    EXPECT_EQ(ids_sha(tok.encode(c.chunks[k], true, false)), str(hash))
        << GetParam() << " special-as-text chunk " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, TokenizerEquality,
                         ::testing::Values("smollm2", "gpt2", "llama3", "qwen2", "qwen2_added"));

TEST(TokenizerFiles, ReadsTheSmolLM2Directory) {
  const Tokenizer tok = Tokenizer::from_pretrained(kFixtures + "/smollm2");
  EXPECT_EQ(tok.n_vocab(), 49152u);
  EXPECT_TRUE(tok.bos_ids().empty());
  EXPECT_EQ(tok.bos_token_id(), 1);  // tokenizer_config.json bos_token <|im_start|>
  EXPECT_EQ(tok.eos_token_id(), 2);
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_FALSE(tok.is_special(300));
  // Bytes SmolLM2 has no token for are dropped, as tokenizers does (docs/tokenizer.md §2.2).
  EXPECT_TRUE(tok.encode("\x04").empty());
  EXPECT_EQ(tok.encode("<|im_start|>user"), (std::vector<std::int32_t>{1, 4093}));
  EXPECT_EQ(tok.encode("<|im_start|>user", true, false),
            (std::vector<std::int32_t>{44, 108, 306, 79, 3738, 108, 46, 4093}));
  EXPECT_EQ(tok.decode(tok.encode("Héllo, 世界! 123")), "Héllo, 世界! 123");
  EXPECT_EQ(tok.decode(std::vector<std::int32_t>{1, 4093}, true), "user");
}

// Oniguruma's classes (recorded from tokenizers) against PCRE2's and utf8proc's: equal except for code points
// the engine's Unicode version does not assign yet (docs/tokenizer.md §5.2).
std::vector<bool> members(const json::Value& ranges) {
  std::vector<bool> in(0x110000, false);
  for (const json::Value& r : ranges.as_array())
    for (std::int64_t c = *r.as_array()[0].as_int64(); c <= *r.as_array()[1].as_int64(); ++c)
      in[static_cast<std::size_t>(c)] = true;
  return in;
}

TEST(TokenizerUnicode, ClassesEqualOnigurumaWhereAssigned) {
  const json::Value classes =
      json::parse(samebits::test::read_file_bytes(kFixtures + "/unicode_classes.json"));
  const auto compile = [](const char* pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    EXPECT_NE(code, nullptr);
    return code;
  };
  pcre2_code* unassigned = compile(R"(^\p{Cn}$)");
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  const auto matches = [&](pcre2_code* code, std::uint32_t c) {
    std::string s;
    samebits::test::append_code_point(s, c);
    return pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data, nullptr) >= 0;
  };
  const tk::PreTokenizer ws_probe({});
  (void)ws_probe;
  struct Case {
    const char* name;
    const char* pattern;
  };
  std::size_t newer = 0;
  for (const Case& cs : {Case{"letter", R"(^\p{L}$)"}, Case{"number", R"(^\p{N}$)"}}) {
    pcre2_code* code = compile(cs.pattern);
    const std::vector<bool> onig = members(*classes.find(cs.name));
    for (std::uint32_t c = 0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      const bool ours = matches(code, c);
      if (ours == onig[c]) continue;
      ASSERT_TRUE(onig[c] && matches(unassigned, c)) << cs.name << " U+" << std::hex << c;
      ++newer;
    }
    pcre2_code_free(code);
  }
  EXPECT_LT(newer, 12000u);
  // \s: the spelled-out White_Space list equals Oniguruma's exactly.
  const std::vector<bool> onig_ws = members(*classes.find("whitespace"));
  const std::u32string ws =
      U"\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
      U"\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
  for (std::uint32_t c = 0; c < 0x110000; ++c)
    EXPECT_EQ(onig_ws[c], ws.find(static_cast<char32_t>(c)) != std::u32string::npos) << std::hex << c;
  // Digits: Rust's char::is_numeric against utf8proc's categories.
  const std::vector<bool> onig_digits = members(*classes.find("digits_step"));
  for (std::uint32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    const bool ours =
        cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
    if (ours != onig_digits[c]) {
      EXPECT_TRUE(onig_digits[c]) << std::hex << c;
      EXPECT_EQ(cat, UTF8PROC_CATEGORY_CN) << std::hex << c;
    }
  }
  pcre2_code_free(unassigned);
  pcre2_match_data_free(data);
}

using Pieces = std::vector<std::string>;

// The pieces of `text` after the step `split` and a ByteLevel step without its own regex.
Pieces split_pieces(const tk::PreTokenizerStep& split, const std::string& text) {
  tk::PreTokenizerStep byte_level;
  byte_level.use_regex = false;
  const tk::PreTokenizer pre({split, byte_level});
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  pre.split(text, pieces, arena);
  return {pieces.begin(), pieces.end()};
}

Pieces cut(tk::KnownPattern pattern, const std::string& text) {
  tk::PreTokenizerStep split;
  split.kind = tk::PreTokenizerStep::Kind::SplitRegex;
  split.pattern = pattern;
  return split_pieces(split, text);
}

TEST(TokenizerPreTokenizer, UpstreamVectors) {
  const auto L = tk::KnownPattern::Llama3;
  EXPECT_EQ(cut(L, "IT'S"), (Pieces{"IT", "'S"}));
  EXPECT_EQ(cut(L, "a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(cut(L, "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(cut(L, "x,\n\ny"), (Pieces{"x", ",\n\n", "y"}));
  EXPECT_EQ(cut(L, "a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(cut(L, "-hello"), (Pieces{"-hello"}));
  EXPECT_EQ(cut(L, "tab\tx"), (Pieces{"tab", "\tx"}));
  EXPECT_EQ(cut(L, "café 2024!"), (Pieces{"café", " ", "202", "4", "!"}));
  EXPECT_EQ(cut(tk::KnownPattern::Qwen2, "12345"), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(cut(tk::KnownPattern::Gpt2, "IT'S"), (Pieces{"IT", "'", "S"}));
  EXPECT_EQ(cut(tk::KnownPattern::Gpt2, "12345"), (Pieces{"12345"}));
  EXPECT_EQ(cut(tk::KnownPattern::Gpt2, "a\u180Eb"), (Pieces{"a", "\u180E", "b"}));  // U+180E is not \s
}

TEST(TokenizerPreTokenizer, SplitBehaviors) {
  const auto run = [](tk::SplitBehavior behavior, bool invert) {
    tk::PreTokenizerStep split;
    split.kind = tk::PreTokenizerStep::Kind::SplitLiteral;
    split.literal = "-";
    split.behavior = behavior;
    split.invert = invert;
    return split_pieces(split, "a-b--c-");
  };
  EXPECT_EQ(run(tk::SplitBehavior::Removed, false), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(run(tk::SplitBehavior::Isolated, false), (Pieces{"a", "-", "b", "-", "-", "c", "-"}));
  EXPECT_EQ(run(tk::SplitBehavior::MergedWithPrevious, false), (Pieces{"a-", "b-", "-", "c-"}));
  EXPECT_EQ(run(tk::SplitBehavior::MergedWithNext, false), (Pieces{"a", "-b", "-", "-c", "-"}));
  EXPECT_EQ(run(tk::SplitBehavior::Contiguous, false), (Pieces{"a", "-", "b", "--", "c", "-"}));
  EXPECT_EQ(run(tk::SplitBehavior::Removed, true), (Pieces{"-", "-", "-", "-"}));
}

// A small tokenizer.json: the 256 bytes (ids 0-255), "ab" 256, "abc" 257, specials <s> 258 and </s> 259.
std::string tiny_json() {
  std::string vocab;  // the JSON writer quotes and escapes each byte's character
  for (std::size_t b = 0; b < 256; ++b)
    vocab += json::canonical_json(json::Value::make_string(std::u32string(1, tk::byte_to_char()[b]))) + ":" +
             std::to_string(b) + ",";
  vocab += R"("ab":256,"abc":257)";
  return R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[)"
         R"({"id":258,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},)"
         R"({"id":259,"content":"</s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],)"
         R"("normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},)"
         R"("post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},)"
         R"({"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"</s>","type_id":0}}],"pair":[],)"
         R"("special_tokens":{"<s>":{"id":"<s>","ids":[258],"tokens":["<s>"]},"</s>":{"id":"</s>","ids":[259],"tokens":["</s>"]}}},)"
         R"("decoder":{"type":"ByteLevel"},"model":{"type":"BPE","dropout":null,"unk_token":null,)"
         R"("continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,)"
         R"("ignore_merges":false,"vocab":{)" +
         vocab + R"(},"merges":["a b","ab c"]}})";
}

std::string with(const std::vector<std::string>& path, const std::string& value_json) {
  return json::canonical_json(replaced(json::parse(tiny_json()), path, json::parse(value_json)));
}

TEST(TokenizerTiny, TemplateAndConfig) {
  const Tokenizer tok = Tokenizer::from_json(tiny_json(), std::nullopt, "tiny.json");
  EXPECT_EQ(tok.encode("abc ab"), (std::vector<std::int32_t>{258, 257, 32, 256, 259}));
  EXPECT_EQ(tok.encode("abc ab", false), (std::vector<std::int32_t>{257, 32, 256}));
  EXPECT_EQ(tok.bos_token_id(), 258);
  EXPECT_EQ(tok.eos_token_id(), 259);
  const Tokenizer no_bos = Tokenizer::from_json(
      tiny_json(), R"({"add_bos_token":false,"eos_token":{"content":"<s>"}})", "tiny.json");
  EXPECT_EQ(no_bos.encode("a"), (std::vector<std::int32_t>{97, 259}));
  EXPECT_EQ(no_bos.bos_token_id(), std::nullopt);
  EXPECT_EQ(no_bos.eos_token_id(), 258);
  EXPECT_EQ(tok.encode("x<s>y", false), (std::vector<std::int32_t>{120, 258, 121}));
  EXPECT_EQ(tok.encode("x<s>y", false, false), (std::vector<std::int32_t>{120, 60, 115, 62, 121}));
  // Merges written as two-element lists (newer tokenizers versions) read the same.
  const Tokenizer lists =
      Tokenizer::from_json(with({"model", "merges"}, R"([["a","b"],["ab","c"]])"), std::nullopt, "tiny.json");
  EXPECT_EQ(lists.encode("abc ab", false), (std::vector<std::int32_t>{257, 32, 256}));
  // Merge order decides, not result ids: with "b c" ranked first, "abc" becomes a + bc.
  const Tokenizer ranked = Tokenizer::from_json(
      json::canonical_json(
          replaced(replaced(json::parse(tiny_json()), {"model", "vocab", "bc"}, json::parse("260")),
                   {"model", "merges"}, json::parse(R"(["b c","a b","ab c"])"))),
      std::nullopt, "tiny.json");
  EXPECT_EQ(ranked.encode("abc", false), (std::vector<std::int32_t>{97, 260}));
}

TEST(TokenizerTiny, Refusals) {
  struct Case {
    std::vector<std::string> path;
    std::string value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"model", "type"},
       R"("Unigram")",
       "tiny.json: model.type 'Unigram': a SentencePiece Unigram model, refused by name"},
      {{"model", "type"}, R"("WordPiece")", "model.type 'WordPiece'; only BPE is byte-level BPE"},
      {{"model", "byte_fallback"}, "true", "a SentencePiece-style BPE (Llama 2, Mistral), refused by name"},
      {{"model", "dropout"}, "0.1", "model.dropout is set"},
      {{"model", "continuing_subword_prefix"}, R"("##")", "model.continuing_subword_prefix is set"},
      {{"model", "merges"}, R"(["a b c"])", "model.merges[0] 'a b c' is not a pair"},
      {{"model", "merges"}, R"(["a b","a b"])", "repeats model.merges[0]"},
      {{"model", "merges"}, R"(["b c"])", "makes a token that is not in model.vocab"},
      {{"model", "unk_token"}, R"("<unk>")", "model.unk_token '<unk>' is not in model.vocab"},
      {{"model", "vocab", "\u2581x"},
       "300",
       "holds '\u2581', a SentencePiece spelling (\u2581), refused by name"},
      {{"model", "vocab", "ab"}, "257", "model.vocab: id 257 is given to both"},
      {{"normalizer"}, R"({"type":"Lowercase"})", "normalizer 'Lowercase' is not honored; null or NFC"},
      {{"pre_tokenizer"}, "null", "pre_tokenizer is null"},
      {{"pre_tokenizer"}, R"({"type":"Metaspace"})", "step 'Metaspace' is not a known cut"},
      {{"pre_tokenizer"},
       R"({"type":"Sequence","pretokenizers":[{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true},{"type":"Digits","individual_digits":true}]})",
       "pre_tokenizer must end with its one ByteLevel step"},
      {{"pre_tokenizer"},
       R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel"}]})",
       "pattern.Regex '\\w+' is not one of the known spellings (gpt2, llama3, qwen2)"},
      {{"post_processor"},
       R"({"type":"RobertaProcessing"})",
       "post_processor type 'RobertaProcessing' is not honored"},
      {{"post_processor", "single"},
       R"([{"SpecialToken":{"id":"<t>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}])",
       "names special '<t>', which has no non-empty ids"},
      {{"decoder"}, R"({"type":"Metaspace"})", "decoder 'Metaspace' is not honored (null, ByteLevel)"},
      {{"truncation"}, R"({"max_length":5})", "truncation is set: not honored"},
      {{"added_tokens"},
       R"([{"id":300,"content":"<x>","lstrip":true,"rstrip":false,"single_word":false,"special":true,"normalized":false}])",
       "sets lstrip: not honored"},
      {{"added_tokens"},
       R"([{"id":300,"content":"<x>","special":true}])",
       "has no bool 'normalized' (tokenizers requires it)"},
      {{"pre_tokenizer"},
       R"({"type":"ByteLevel","add_prefix_space":false})",
       "has no bool 'trim_offsets' (tokenizers requires it)"},
      {{"added_tokens"}, R"([{"id":300}])", "added_tokens[0] has no str content and int id"},
  };
  for (const Case& c : cases) {
    try {
      (void)Tokenizer::from_json(with(c.path, c.value), std::nullopt, "tiny.json");
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const samebits::Error& e) {
      EXPECT_EQ(e.kind(), samebits::ErrorKind::Value);
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("samebits.models.Tokenizer: ", 0), 0u) << e.what();
    }
  }
  EXPECT_THROW((void)Tokenizer::from_json("{", std::nullopt, "tiny.json"), samebits::Error);
  EXPECT_THROW((void)Tokenizer::from_json(tiny_json(), "[1]", "tiny.json"), samebits::Error);
  try {
    (void)Tokenizer::from_pretrained(kFixtures);  // a directory without tokenizer.json
    ADD_FAILURE();
  } catch (const samebits::Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no tokenizer.json"), std::string::npos);
  }
}

TEST(TokenizerDecode, RefusesUnknownIdsAndStreamsCompleteCharacters) {
  const Tokenizer tok = Tokenizer::from_json(tiny_json(), std::nullopt, "tiny.json");
  try {
    (void)tok.decode(std::vector<std::int32_t>{97, 299});
    ADD_FAILURE();
  } catch (const samebits::Error& e) {
    EXPECT_STREQ(
        e.what(),
        "samebits.models.Tokenizer: id 299 at position 1 is outside [0, n_vocab) and no added token");
  }
  EXPECT_THROW((void)tok.decode(std::vector<std::int32_t>{-1}), samebits::Error);
  // "é" = C3 A9 and "😀" = F0 9F 98 80 spelled byte by byte: each character appears once complete.
  samebits::TokenStreamDecoder stream(tok);
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(stream.push(0xA9), "é");
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.push(0x9F), "");
  EXPECT_EQ(stream.push(0x98), "");
  EXPECT_EQ(stream.push(0x80), "😀");
  EXPECT_EQ(stream.push(0xE2), "");
  EXPECT_EQ(stream.push(0x41), "\uFFFDA");  // a sequence that can no longer complete: U+FFFD at once
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.push(0x9F), "");
  EXPECT_EQ(stream.finish(), "\uFFFD");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  // Over every corpus chunk (its byte-level ids), the streamed text equals decode().
  const Tokenizer smol = Tokenizer::from_pretrained(kFixtures + "/smollm2");
  for (std::size_t k = 0; k < corpus().chunks.size(); k += 7) {
    const auto ids = smol.encode(corpus().chunks[k]);
    samebits::TokenStreamDecoder s(smol);
    std::string text;
    for (const std::int32_t id : ids) text += s.push(id);
    text += s.finish();
    ASSERT_EQ(text, smol.decode(ids)) << k;
  }
}

TEST(TokenizerText, LossyUtf8IsMaximalSubpart) {
  EXPECT_EQ(tk::utf8_lossy("a\xC3"), "a\uFFFD");
  EXPECT_EQ(tk::utf8_lossy("\xE2\x82"), "\uFFFD");                  // one truncated sequence: one U+FFFD
  EXPECT_EQ(tk::utf8_lossy("\xE0\x80\x80"), "\uFFFD\uFFFD\uFFFD");  // overlong: each byte
  EXPECT_EQ(tk::utf8_lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // surrogate
  EXPECT_EQ(tk::utf8_lossy("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(tk::utf8_lossy("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(tk::utf8_lossy("\xFF\x41"), "\uFFFDA");
  EXPECT_EQ(tk::nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(tk::nfc("\u1100\u1161"), "\uac00");
}

TEST(TokenizerConcurrency, ThreadsGiveTheSameIds) {
  const Tokenizer tok = Tokenizer::from_json(variant_json("qwen2"), std::nullopt, "qwen2");
  const auto& chunks = corpus().chunks;
  std::vector<std::vector<std::int32_t>> serial;
  for (std::size_t k = 0; k < 40; ++k) serial.push_back(tok.encode(chunks[k]));
  std::vector<std::vector<std::vector<std::int32_t>>> got(3, std::vector<std::vector<std::int32_t>>(40));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (std::size_t k = 0; k < 40; ++k) got[t][(k + 13 * t) % 40] = tok.encode(chunks[(k + 13 * t) % 40]);
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < 3; ++t) EXPECT_EQ(got[t], serial) << t;
}

}  // namespace
