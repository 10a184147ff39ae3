// The native chat-template renderers (docs/tokenizer.md §10): each family recognized from its template
// text and rendered to the exact text (the Python suite also compares them with jinja2), the default
// system message read out of a ChatML template, Jinja's trim on Llama-3 contents, and the refusals.
#include <gtest/gtest.h>

#include <samebits/chat_template.hpp>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

namespace samebits {
namespace {

const std::vector<ChatMessage> kTalk = {
    {"user", "Hi there"}, {"assistant", "Hello! How can I help?"}, {"user", " Two\nlines \t"}};

// A ChatML template in SmolLM2's shape: a default system turn unless the first message is one.
const std::string kChatMl =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a kind helper, it\\'s true.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplate, ChatMlWithADefaultSystemMessage) {
  const ChatTemplate t = ChatTemplate::recognize(kChatMl);
  EXPECT_EQ(t.family(), "chatml");
  EXPECT_EQ(t.end_of_turn(), "<|im_end|>");
  ASSERT_TRUE(t.default_system().has_value());
  EXPECT_EQ(*t.default_system(), "You are a kind helper, it's true.");
  EXPECT_EQ(
      t.render({{"user", "Hi"}}, true),
      "<|im_start|>system\nYou are a kind helper, it's true.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\n");
  EXPECT_EQ(t.render({{"system", "Be brief."}, {"user", "Hi"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(t.render({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, ChatMlWithoutADefault) {
  const ChatTemplate t = ChatTemplate::recognize(
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  EXPECT_FALSE(t.default_system().has_value());
  EXPECT_EQ(t.render({{"user", "x"}}, false), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, Llama3TrimsAndStartsWithBos) {
  const ChatTemplate t = ChatTemplate::recognize(
      "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
      "'<|end_header_id|>\\n\\n' + "
      "m['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
      "<|begin_of_text|>", "<|end_of_text|>");
  EXPECT_EQ(t.family(), "llama3");
  EXPECT_EQ(t.end_of_turn(), "<|eot_id|>");
  EXPECT_EQ(t.render({{"user", " \xE3\x80\x80Two\nlines \t\xC2\xA0"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nTwo\nlines<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Phi3EndsWithEosWithoutAGenerationPrompt) {
  const ChatTemplate t = ChatTemplate::recognize(
      "{% for m in messages %}{% if m['role'] == 'system' %}{{ '<|system|>\\n' + m['content'] + '<|end|>\\n' "
      "}}"
      "{% elif m['role'] == 'user' %}{{ '<|user|>\\n' + m['content'] + '<|end|>\\n' }}{% else %}{{ "
      "'<|assistant|>\\n' + m['content'] + '<|end|>\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt "
      "%}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}",
      "<s>", "<|endoftext|>");
  EXPECT_EQ(t.family(), "phi3");
  EXPECT_EQ(t.render(kTalk, false),
            "<|user|>\nHi there<|end|>\n<|assistant|>\nHello! How can I help?<|end|>\n<|user|>\n Two\nlines "
            "\t<|end|>\n<|endoftext|>");
  EXPECT_EQ(t.render({{"user", "a"}}, true), "<|user|>\na<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, RefusalsNameWhatTheyFound) {
  const auto message = [](const std::string& text) {
    try {
      ChatTemplate::recognize(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message("{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}")
                .find("none of ChatML (SmolLM2, Qwen2), Llama-3 and Phi-3"),
            std::string::npos);
  EXPECT_NE(message("<|im_start|><|im_end|><think>").find("<think>"), std::string::npos);
  EXPECT_NE(message("<|start_header_id|><|eot_id|>Cutting Knowledge Date").find("Llama-3.1"),
            std::string::npos);
  const ChatTemplate t = ChatTemplate::recognize(kChatMl);
  EXPECT_THROW(t.render({{"tool", "{}"}}, true), Error);
}

}  // namespace
}  // namespace samebits
