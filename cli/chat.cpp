// `samebits chat MODEL`: an interactive conversation on standard input (docs/cli.md §9). Each line is a user
// message; the conversation is rendered with the model's chat template and only the ids the state has not
// seen are prefilled; the reply streams as it is decoded. /reset, /save FILE, /load FILE, /quit.
#include "chat.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "language_model.hpp"
#include "reply.hpp"

namespace samebits::cli {

ChatSetup chat_setup(const Tokenizer* tokenizer, const std::string& path) {
  if (tokenizer == nullptr)
    throw_value_error(path +
                      " is a byte-level Samba checkpoint; chat needs a model with a tokenizer "
                      "and a chat template (a Hugging Face model directory)");
  const auto text = tokenizer->chat_template();
  if (!text)
    throw_value_error(path +
                      ": the tokenizer files carry no chat template (tokenizer_config.json's chat_template "
                      "or chat_template.jinja)");
  const auto token_text = [&](std::optional<std::int32_t> id) {
    return id ? tokenizer->token_bytes(*id).value_or("") : std::string();
  };
  ChatSetup setup{ChatTemplate::recognize(*text, token_text(tokenizer->bos_token_id()),
                                          token_text(tokenizer->eos_token_id())),
                  {}};
  if (const auto eos = tokenizer->eos_token_id()) setup.stop_ids.push_back(*eos);
  const std::vector<std::int32_t> turn_end = tokenizer->encode(setup.format.end_of_turn(), false, true);
  if (turn_end.size() == 1 && (setup.stop_ids.empty() || setup.stop_ids[0] != turn_end[0]))
    setup.stop_ids.push_back(turn_end[0]);
  return setup;
}

namespace {

void note(const std::string& text) { std::fprintf(stderr, "[%s]\n", text.c_str()); }

std::string messages_json(const std::vector<ChatMessage>& messages) {
  std::string out = "[\n";
  for (std::size_t i = 0; i < messages.size(); ++i)
    out += "  {\"role\": " + json_string(messages[i].role) +
           ", \"content\": " + json_string(messages[i].content) + "}" +
           (i + 1 < messages.size() ? ",\n" : "\n");
  return out + "]\n";
}

// The messages of a /save file: a JSON list of {"role", "content"} with roles system, user, assistant.
std::vector<ChatMessage> read_messages(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_value_error("cannot read conversation file '" + path + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json::Value root = json::parse(text);
  if (!root.is_array()) throw_value_error(path + ": a conversation is a JSON list of messages");
  std::vector<ChatMessage> messages;
  for (const json::Value& entry : root.as_array()) {
    const json::Value* role = entry.find(U"role");
    const json::Value* content = entry.find(U"content");
    if (role == nullptr || content == nullptr || !role->is_string() || !content->is_string())
      throw_value_error(path + ": message " + std::to_string(messages.size()) +
                        " is not an object with string 'role' and 'content'");
    ChatMessage m{json::to_utf8(role->as_string()), json::to_utf8(content->as_string())};
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw_value_error(path + ": message " + std::to_string(messages.size()) + " has role '" + m.role +
                        "' (system, user or assistant)");
    messages.push_back(std::move(m));
  }
  return messages;
}

// The model's side of the conversation: its state and the ids the state holds, brought up to a rendered
// conversation by prefilling only what it has not seen (from scratch when the ids part ways).
class ChatSession {
 public:
  ChatSession(const LanguageModel& model, std::int64_t context)
      : model_(model), context_(context), state_(model.allocate_state(1, context)) {}

  std::int64_t context() const { return context_; }
  std::vector<std::int32_t>& fed() { return fed_; }
  ModelState& state() { return state_; }

  void reset() {
    if (auto* s = std::get_if<CausalLMState>(&state_)) model_.causal_lm()->reset_state(*s);
    fed_.clear();
  }

  // Feeds `ids` past what the state holds; returns the last position's logits.
  std::vector<float> catch_up(const std::vector<std::int32_t>& ids) {
    const bool extends = fed_.size() < ids.size() && std::equal(fed_.begin(), fed_.end(), ids.begin());
    if (!extends) reset();
    const std::vector<std::int32_t> rest(ids.begin() + static_cast<std::ptrdiff_t>(fed_.size()), ids.end());
    std::vector<float> logits =
        model_.forward({rest.data(), 1, static_cast<std::int64_t>(rest.size())}, state_);
    fed_ = ids;
    logits.erase(logits.begin(), logits.end() - model_.vocab());
    return logits;
  }

 private:
  const LanguageModel& model_;
  std::int64_t context_;
  ModelState state_;
  std::vector<std::int32_t> fed_;
};

}  // namespace

const CommandSpec& chat_spec() {
  static const CommandSpec spec = generating_command(
      "chat", "MODEL [OPTIONS]",
      "talk with a Hugging Face model through its chat template, one line per message\n"
      "Each reply streams as decoded; /reset, /save FILE, /load FILE (messages as JSON), /quit.",
      {
          {"--system", "", "TEXT", "the template's own", "a system message opening the conversation"},
          {"--max-tokens", "-n", "N", "512", "tokens per reply at most, 1 to 8000"},
          {"--context", "", "N", "4096 or the model's limit",
           "positions the conversation may fill, 16 to 8192"},
      },
      "end a reply before TEXT would be printed", {},
      "samebits chat ./SmolLM2-135M-Instruct --temperature 0.7 --seed 1");
  return spec;
}

int command_chat(const Args& args) {
  const std::string& path = args.single("MODEL");
  const std::int64_t max_new = args.integer("--max-tokens", "512", 1, 8000);
  const SamplerOptions sampling = parse_sampling(args);
  const std::int64_t asked = args.integer("--context", "4096", 16, 8192);
  const LanguageModel model = LanguageModel::open(path, "chat", true);
  const ChatSetup setup = chat_setup(model.tokenizer(), model.path());
  const std::int64_t context = std::min(asked, model.position_limit().value_or(asked));
  std::vector<ChatMessage> opening;
  if (const auto system = args.get("--system")) opening.push_back({"system", *system});
  std::vector<ChatMessage> messages = opening;
  ChatSession session(model, context);
  Sampler sampler(sampling);
  const bool interactive = ::isatty(STDIN_FILENO) == 1;
  if (interactive)
    note("chat with " + model.path() + " (" + setup.format.family() +
         " template); /reset, /save FILE, /load FILE, /quit");
  std::string line;
  while (true) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line == "/quit" || line == "/exit") break;
    if (line == "/reset") {
      messages = opening;
      session.reset();
      note("conversation reset");
      continue;
    }
    if (line.rfind("/save ", 0) == 0 || line.rfind("/load ", 0) == 0) {
      const std::string file = line.substr(6);
      try {
        if (line[1] == 's') {
          std::ofstream out(file, std::ios::binary);
          out << messages_json(messages);
          if (!out.flush()) throw_value_error("cannot write conversation file '" + file + "'");
          note("saved " + std::to_string(messages.size()) + " messages to " + file);
        } else {
          std::vector<ChatMessage> loaded = read_messages(file);
          // Replayed through the model now, so the next reply starts from the loaded conversation.
          const std::vector<std::int32_t> ids = model.encode(setup.format.render(loaded, false), false);
          if (static_cast<std::int64_t>(ids.size()) + max_new > context)
            throw_value_error(file + ": the conversation's " + std::to_string(ids.size()) +
                              " tokens leave no room for a reply in the context of " +
                              std::to_string(context));
          session.reset();
          if (!ids.empty()) session.catch_up(ids);
          for (std::int32_t id : ids) sampler.accept(id);
          messages = std::move(loaded);
          note("loaded " + std::to_string(messages.size()) + " messages from " + file);
        }
      } catch (const Error& e) {
        note(e.what());
      }
      continue;
    }
    if (line[0] == '/') {
      note("unknown command " + line.substr(0, line.find(' ')) + "; /reset, /save FILE, /load FILE, /quit");
      continue;
    }
    messages.push_back({"user", line});
    const std::vector<std::int32_t> ids = model.encode(setup.format.render(messages, true), false);
    if (static_cast<std::int64_t>(ids.size()) + max_new > context) {
      messages.pop_back();
      note("the conversation (" + std::to_string(ids.size()) + " tokens) and a reply of up to " +
           std::to_string(max_new) + " would overflow the context of " + std::to_string(context) +
           " positions; /reset starts over");
      continue;
    }
    const std::size_t seen = session.fed().size();
    std::vector<float> logits = session.catch_up(ids);
    for (std::size_t i = std::min(seen, ids.size()); i < ids.size(); ++i) sampler.accept(ids[i]);
    StopStrings stops(args.all("--stop"));
    TextStream text(model);
    const ReplyEnd end = stream_reply(model, session.state(), std::move(logits), sampler, max_new,
                                      setup.stop_ids, stops, text, session.fed());
    if (!end.open || !write_out("\n", 1)) break;
    messages.push_back({"assistant", end.text});
    std::fprintf(stderr, "[%lld tokens in %.2f s, %.1f tok/s]\n", static_cast<long long>(end.produced),
                 end.seconds, end.produced / std::max(end.seconds, 1e-9));
  }
  return kExitOk;
}

}  // namespace samebits::cli
