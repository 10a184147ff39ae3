// The native chat-template renderers (docs/tokenizer.md §10): which family a template's text belongs to,
// the default system message a ChatML template carries, and the rendered text of a conversation.
#include <samebits/chat_template.hpp>
#include <samebits/errors.hpp>
#include <string_view>

namespace samebits {
namespace {

const std::string kWhat = "samebits chat template";

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string::npos; }

// The length of the Unicode whitespace character (Python's str.isspace, which Jinja's trim strips) at `at`,
// 0 when there is none.
std::size_t space_length(std::string_view s, std::size_t at) {
  const auto c = static_cast<unsigned char>(s[at]);
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
  const std::string_view rest = s.substr(at);
  for (std::string_view wide : {"\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\xA8", "\xE2\x80\xA9",
                                "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"})
    if (rest.substr(0, wide.size()) == wide) return wide.size();
  // U+2000..U+200A: E2 80 80..8A
  if (rest.size() >= 3 && c == 0xE2 && static_cast<unsigned char>(rest[1]) == 0x80 &&
      static_cast<unsigned char>(rest[2]) <= 0x8A && static_cast<unsigned char>(rest[2]) >= 0x80)
    return 3;
  return 0;
}

// Jinja's `trim`: Unicode whitespace removed from both ends.
std::string trimmed(std::string_view s) {
  std::size_t begin = 0;
  while (begin < s.size()) {
    const std::size_t n = space_length(s, begin);
    if (n == 0) break;
    begin += n;
  }
  std::size_t end = s.size();
  while (end > begin) {
    // Step back over one UTF-8 character and test it.
    std::size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (space_length(s, start) != end - start) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

// The literal system message of `<|im_start|>system\n...<|im_end|>` inside a Jinja string of the template,
// when one is there (a message spelled as an expression, `' + messages[0]['content']`, is not).
std::optional<std::string> chatml_default_system(const std::string& text) {
  const std::string_view opening = "<|im_start|>system";
  for (std::size_t at = text.find(opening); at != std::string::npos; at = text.find(opening, at + 1)) {
    std::size_t i = at + opening.size();
    if (text.compare(i, 2, "\\n") == 0)
      i += 2;
    else if (i < text.size() && text[i] == '\n')
      i += 1;
    else
      continue;
    const std::size_t close = text.find("<|im_end|>", i);
    if (close == std::string::npos) continue;
    std::string message;
    bool literal = true;
    for (std::size_t k = i; k < close && literal; ++k) {
      const char c = text[k];
      if (c == '\'' || c == '"' || c == '{' || c == '}') {
        literal = false;
      } else if (c == '\\' && k + 1 < close) {
        const char e = text[++k];
        message += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        message += c;
      }
    }
    if (literal) return message;
  }
  return std::nullopt;
}

[[noreturn]] void refuse(const std::string& why) { throw_value_error(kWhat + ": " + why); }

}  // namespace

ChatTemplate ChatTemplate::recognize(const std::string& template_text, const std::string& bos_token,
                                     const std::string& eos_token) {
  ChatTemplate t;
  const std::string& s = template_text;
  if (contains(s, "<|im_start|>") && contains(s, "<|im_end|>")) {
    if (contains(s, "<think>"))
      refuse("a ChatML template with reasoning (<think>) blocks (Qwen3 style) is not rendered natively");
    t.family_ = "chatml";
    t.end_of_turn_ = "<|im_end|>";
    t.default_system_ = chatml_default_system(s);
  } else if (contains(s, "<|start_header_id|>") && contains(s, "<|eot_id|>")) {
    if (contains(s, "Cutting Knowledge Date"))
      refuse(
          "a Llama-3.1-style template (a dated system header, tools) is not rendered natively; the "
          "Llama-3 form without them is");
    t.family_ = "llama3";
    t.end_of_turn_ = "<|eot_id|>";
  } else if (contains(s, "<|user|>") && contains(s, "<|assistant|>") && contains(s, "<|end|>")) {
    t.family_ = "phi3";
    t.end_of_turn_ = "<|end|>";
    if (contains(s, "eos_token")) t.eos_ = eos_token;
  } else {
    const std::string opening = s.substr(0, 60);
    refuse(
        "the template is none of ChatML (SmolLM2, Qwen2), Llama-3 and Phi-3, the families rendered "
        "natively (it begins '" +
        opening + (s.size() > 60 ? "...'" : "'") +
        "); Python's Tokenizer.apply_chat_template renders any template with jinja2");
  }
  if (contains(s, "bos_token")) t.bos_ = bos_token;
  return t;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  for (const ChatMessage& m : messages)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      refuse("role '" + m.role + "' is not rendered natively (system, user, assistant)");
  std::string out = bos_;
  if (family_ == "chatml") {
    const auto turn = [&](const std::string& role, const std::string& content) {
      out += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
    };
    if (default_system_ && !messages.empty() && messages.front().role != "system")
      turn("system", *default_system_);
    for (const ChatMessage& m : messages) turn(m.role, m.content);
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else if (family_ == "llama3") {
    for (const ChatMessage& m : messages)
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trimmed(m.content) + "<|eot_id|>";
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  } else {
    for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    out += add_generation_prompt ? "<|assistant|>\n" : eos_;
  }
  return out;
}

}  // namespace samebits
