// Fuzzes the tokenizer (docs/tokenizer.md): the tokenizer.json reader on arbitrary documents, and encode /
// decode on arbitrary bytes through each pipeline. The first byte selects: 0 reads the rest as a
// tokenizer.json (and, if accepted, encodes a fixed text with it); 1-4 encode the rest with the gpt2,
// llama3 (template bos/eos), qwen2 (NFC) or Digits+ByteLevel (prefix space) pipeline over a small vocabulary
// holding all 256 bytes, and check that decoding gives the text back where the pipeline keeps it, that the
// stream decoder agrees with decode, and that ill-formed input encodes as its U+FFFD repair.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/tokenizer.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "models/tokenizer/text.hpp"

namespace {

namespace tk = samebits::models::tokenizer;

// The 256 bytes (ids 0-255), a few merges, added tokens <s> (special) and <x> (not special).
std::string tiny_document(const std::string& normalizer, const std::string& pre_tokenizer,
                          const std::string& post_processor) {
  std::string vocab;  // the JSON writer quotes and escapes each byte's character
  for (std::size_t b = 0; b < 256; ++b)
    vocab += samebits::json::canonical_json(
                 samebits::json::Value::make_string(std::u32string(1, tk::byte_to_char()[b]))) +
             ":" + std::to_string(b) + ",";
  vocab +=
      "\"th\":256,\"the\":257,\"\\u0120t\":258,\"\\u0120the\":259,\"in\":260,\"12\":261,\"\\u00c3\\u00a9\":"
      "262";
  return R"({"added_tokens":[{"id":263,"content":"<s>","normalized":false,"special":true,"lstrip":false,"rstrip":false,"single_word":false},)"
         R"({"id":264,"content":"<x>","normalized":true,"special":false,"lstrip":false,"rstrip":false,"single_word":false}],"normalizer":)" +
         normalizer + R"(,"pre_tokenizer":)" + pre_tokenizer + R"(,"post_processor":)" + post_processor +
         R"(,"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{)" + vocab +
         R"(},"merges":["t h","th e","\u0120 t","\u0120 the","i n","1 2","\u00c3 \u00a9"]}})";
}

const std::vector<samebits::Tokenizer>& pipelines() {
  static const std::vector<samebits::Tokenizer> all = [] {
    const std::string byte_level =
        R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false})";
    const std::string llama3 =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";
    std::string qwen2 = llama3;
    qwen2.replace(qwen2.find("{1,3}"), 5, "");
    const auto split = [&](const std::string& regex) {
      return R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":")" + regex +
             R"("},"behavior":"Isolated","invert":false},)" + byte_level + "]}";
    };
    const std::string templ =
        R"({"type":"Sequence","processors":[{"type":"ByteLevel"},{"type":"TemplateProcessing","single":[)"
        R"({"SpecialToken":{"id":"<s>"}},{"Sequence":{"id":"A"}},{"SpecialToken":{"id":"<s>"}}],)"
        R"("special_tokens":{"<s>":{"id":"<s>","ids":[263],"tokens":["<s>"]}}}]})";
    std::vector<samebits::Tokenizer> t;
    t.push_back(samebits::Tokenizer::from_json(
        tiny_document("null", R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true})", "null"),
        std::nullopt, "gpt2"));
    t.push_back(
        samebits::Tokenizer::from_json(tiny_document("null", split(llama3), templ), std::nullopt, "llama3"));
    t.push_back(samebits::Tokenizer::from_json(tiny_document(R"({"type":"NFC"})", split(qwen2), "null"),
                                               std::nullopt, "qwen2"));
    t.push_back(samebits::Tokenizer::from_json(
        tiny_document("null",
                      R"({"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},)"
                      R"({"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true}]})",
                      "null"),
        std::nullopt, "digits"));
    return t;
  }();
  return all;
}

// `exact`: the pipeline gives the text back (no NFC, no prefix space).
void check_round_trip(const samebits::Tokenizer& tok, std::string_view text, bool exact) {
  using samebits::fuzz::require;
  const std::vector<std::int32_t> ids = tok.encode(text, false);
  const std::vector<std::int32_t> with_specials = tok.encode(text, true);
  require(with_specials.size() == ids.size() + tok.bos_ids().size() + tok.eos_ids().size(),
          "add_special_tokens added something other than bos_ids and eos_ids");
  const bool valid = tk::utf8_valid(text);
  if (!valid)
    require(tok.encode(tk::utf8_lossy(text), false) == ids, "ill-formed input is not encoded as its repair");
  const std::string bytes = tok.decode_bytes(ids);
  const std::string repaired = valid ? std::string(text) : tk::utf8_lossy(text);
  if (exact) require(bytes == repaired, "decode_bytes(encode(x)) is not x (repaired)");
  if (exact) require(tok.encode(bytes, false) == ids, "encode(decode(ids)) is not ids");
  const std::string decoded = tok.decode(ids);
  require(tk::utf8_valid(decoded), "decode gave ill-formed UTF-8");
  samebits::TokenStreamDecoder stream(tok);
  std::string streamed;
  for (const std::int32_t id : ids) {
    const std::string piece = stream.push(id);
    require(tk::utf8_valid(piece), "the stream decoder emitted ill-formed UTF-8");
    streamed += piece;
  }
  streamed += stream.finish();
  require(streamed == decoded, "the stream decoder disagrees with decode");
  // Special tokens as text: without them the ids of <s> never appear.
  for (const std::int32_t id : tok.encode(text, false, false))
    require(!tok.is_special(id), "a special id from allow_special=false");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return samebits::fuzz::initialize_single_threaded(); }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned selector = data[0] % 5u;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (selector == 0) {
    std::optional<samebits::Tokenizer> tok;
    if (!samebits::fuzz::accepted(
            [&] { tok.emplace(samebits::Tokenizer::from_json(rest, std::nullopt, "fuzz.json")); }))
      return 0;
    // An accepted tokenizer encodes anything; decoding its ids never refuses.
    const std::string sample = "The 12 caf\xc3\xa9s <s> don't\r\n  stop \xf0\x9f\x98\x80 \xff";
    const std::vector<std::int32_t> ids = tok->encode(sample);
    samebits::fuzz::require(samebits::fuzz::accepted([&] { (void)tok->decode(ids); }),
                            "decode refused encode's ids");
    return 0;
  }
  check_round_trip(pipelines()[selector - 1], rest, selector == 1 || selector == 2);
  return 0;
}
