// Fuzzes the chat-template paths (docs/tokenizer.md §10): the first byte selects. 0 reads the rest as a
// tokenizer_config.json beside a fixed tokenizer.json (its chat_template: a string, a list of named
// templates, anything else refused); 1 reads the rest as a template text and, when a native renderer
// recognizes it, renders a fixed conversation, which must hold every message's content in order (after
// trim for Llama-3) and end with the family's generation prompt.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <samebits/chat_template.hpp>
#include <samebits/errors.hpp>
#include <samebits/tokenizer.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "models/tokenizer/text.hpp"

namespace {

// The 256 single bytes (GPT-2's table spelled as JSON escapes) and no merges: the smallest accepted file.
const std::string& tiny_tokenizer_json() {
  static const std::string text = [] {
    std::string vocab;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const int code = printable ? b : next++;
      char spelled[16];
      std::snprintf(spelled, sizeof spelled, "\\u%04x", code);
      if (b) vocab += ",";
      vocab += "\"" + std::string(spelled) + "\":" + std::to_string(b);
    }
    return R"({"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,)"
           R"("trim_offsets":true,"use_regex":true},"post_processor":null,"decoder":{"type":"ByteLevel"},)"
           R"("model":{"type":"BPE","vocab":{)" +
           vocab + R"(},"merges":[]}})";
  }();
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return samebits::fuzz::initialize_single_threaded(); }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using samebits::fuzz::require;
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    samebits::fuzz::accepted([&] {
      const auto tok = samebits::Tokenizer::from_json(tiny_tokenizer_json(), rest, "fuzz.json");
      if (const auto text = tok.chat_template())
        require(samebits::models::tokenizer::utf8_valid(*text), "an accepted chat template is not UTF-8");
    });
    return 0;
  }
  std::optional<samebits::ChatTemplate> format;
  if (!samebits::fuzz::accepted(
          [&] { format.emplace(samebits::ChatTemplate::recognize(std::string(rest), "<s>", "</s>")); }))
    return 0;
  const std::vector<samebits::ChatMessage> talk = {
      {"system", "be brief"}, {"user", "hello \xE6\x9D\xB1"}, {"assistant", "hi"}, {"user", "bye"}};
  const std::string text = format->render(talk, true);
  std::size_t at = 0;
  for (const auto& m : talk) {
    at = text.find(m.content, at);
    require(at != std::string::npos, "a message's content is missing from the rendering, or out of order");
    at += m.content.size();
  }
  const std::string tail = format->family() == "chatml" ? "<|im_start|>assistant\n"
                           : format->family() == "llama3"
                               ? "<|start_header_id|>assistant<|end_header_id|>\n\n"
                               : "<|assistant|>\n";
  require(text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0,
          "the rendering does not end with the generation prompt");
  require(format->render({}, false).size() <= 7, "an empty conversation renders more than bos and eos");
  return 0;
}
