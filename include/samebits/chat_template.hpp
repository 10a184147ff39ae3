// Native renderers of the chat templates of the supported model families (ChatML as SmolLM2 and Qwen2 use
// it, Llama-3, Phi-3), recognized from the template's Jinja text, for frontends without a Jinja engine
// (docs/tokenizer.md §10). Each renders the text jinja2 renders from the same template.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace samebits {

// One turn of a conversation: role ("system", "user" or "assistant") and its text (UTF-8).
struct ChatMessage {
  std::string role;
  std::string content;
};

// A recognized chat template; immutable.
class ChatTemplate {
 public:
  // Recognizes `template_text` (a model's chat_template); `bos_token` and `eos_token` are the texts the
  // template's bos_token / eos_token variables hold. Refuses (samebits::Error, kind Value) a template of
  // another family, or one using what the native renderers do not reproduce, naming it.
  static ChatTemplate recognize(const std::string& template_text, const std::string& bos_token = "",
                                const std::string& eos_token = "");

  // "chatml", "llama3" or "phi3".
  const std::string& family() const { return family_; }
  // The system message a ChatML template adds when the conversation does not start with one.
  const std::optional<std::string>& default_system() const { return default_system_; }
  // The text that closes every turn ("<|im_end|>", "<|eot_id|>", "<|end|>"): a model's reply ends there.
  const std::string& end_of_turn() const { return end_of_turn_; }

  // The conversation as the template renders it; with add_generation_prompt, followed by the opening of an
  // assistant turn. Refuses a role other than system, user and assistant.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

 private:
  ChatTemplate() = default;
  std::string family_;
  std::optional<std::string> default_system_;
  std::string end_of_turn_;
  std::string bos_;  // emitted first when the template names bos_token
  std::string eos_;  // emitted last without a generation prompt when the template names eos_token (Phi-3)
};

}  // namespace samebits
