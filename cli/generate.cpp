// `samebits generate`: text from a byte-level Samba checkpoint or a CausalLM (a plain prompt or one chat
// message), streamed as it is decoded through the shared sampler (docs/api.md §16), with prefill and decode
// speed and the seed on stderr.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <samebits/chat_template.hpp>
#include <samebits/file_kind.hpp>
#include <samebits/samebits.hpp>
#include <samebits/sampler.hpp>
#include <string>
#include <vector>

#include "chat.hpp"
#include "cli.hpp"
#include "language_model.hpp"
#include "reply.hpp"

namespace samebits::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string read_prompt(const Args& args) {
  const auto text = args.get("--prompt");
  const auto file = args.get("--prompt-file");
  if (text && file) throw UsageError{"generate takes --prompt or --prompt-file, not both"};
  if (!text && !file)
    throw UsageError{"generate needs --prompt TEXT, --prompt - (standard input) or --prompt-file FILE"};
  if (text && *text != "-") return *text;
  if (text) return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  detect_file_kind(*file, "prompt file");  // missing, directory, unreadable: one sentence
  std::ifstream in(*file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

const CommandSpec& generate_spec() {
  static const CommandSpec spec = generating_command(
      "generate", "[MODEL] (-p TEXT | -p - | -f FILE | --chat TEXT) [OPTIONS]",
      "stream text from a byte-level Samba model or a Hugging Face model directory\n"
      "Without MODEL the shipped Samba model is used. The prompt is echoed (not with --chat), then each\n"
      "sampled token as soon as its text is complete; a line on stderr gives the speeds and the seed, so\n"
      "any run can be repeated with --seed.",
      {
          {"--prompt", "-p", "TEXT", "", "the prompt; '-' reads it from standard input"},
          {"--prompt-file", "-f", "FILE", "", "read the prompt from FILE"},
          {"--chat", "", "TEXT", "", "one user message, rendered with the model's chat template"},
          {"--system", "", "TEXT", "the template's own", "a system message before the --chat message"},
          {"--max-tokens", "-n", "N", "200", "tokens to generate, 1 to 8000"},
      },
      "stop before TEXT would be printed",
      {{"--ignore-eos", "", "", "", "keep going past the end-of-sequence token (not for Samba)"}},
      "samebits generate -p \"In the beginning\" -n 100 --temperature 0.7 --top-k 40 --seed 1 --stop "
      "\"\\n\\n\"");
  return spec;
}

int command_generate(const Args& args) {
  const std::int64_t max_new = args.integer("--max-tokens", "200", 1, 8000);
  const SamplerOptions sampling = parse_sampling(args);
  if (args.positional.size() > 1) throw UsageError{"generate takes at most one MODEL"};
  const auto chat = args.get("--chat");
  if (args.get("--system") && !chat) throw UsageError{"generate: --system goes with --chat"};
  if (chat && (args.get("--prompt") || args.get("--prompt-file")))
    throw UsageError{"generate takes --chat or a prompt (--prompt, --prompt-file), not both"};
  const std::string prompt = chat ? *chat : read_prompt(args);
  const std::string path = args.positional.empty() ? default_checkpoint() : args.positional[0];
  const LanguageModel model = LanguageModel::open(path, "generate", true);
  const std::int64_t vocab = model.vocab();
  if (model.byte_level()) {
    if (chat) throw UsageError{"generate: --chat needs a model with a tokenizer and a chat template"};
    if (args.flag("--ignore-eos"))
      throw UsageError{
          "generate: --ignore-eos applies to a model with an end-of-sequence token; byte-level Samba models "
          "have none (generation always runs to --max-tokens or a --stop string)"};
    if (vocab != 256)
      throw UsageError{"generate reads and writes bytes, so it needs a vocab-256 model; this one has vocab " +
                       std::to_string(vocab)};
  }
  std::vector<std::int32_t> stop_ids;
  std::vector<std::int32_t> ids;
  if (chat) {
    std::vector<ChatMessage> messages;
    if (const auto system = args.get("--system")) messages.push_back({"system", *system});
    messages.push_back({"user", *chat});
    const ChatSetup setup = chat_setup(model.tokenizer(), model.path());
    ids = model.encode(setup.format.render(messages, true), false);
    stop_ids = setup.stop_ids;
  } else {
    // An empty prompt starts from a newline (Samba) or the bos token alone, so there is always a position
    // to predict from.
    ids = model.encode(prompt.empty() && model.byte_level() ? std::string("\n") : prompt, true);
    if (ids.empty()) throw UsageError{"generate: the prompt encodes to no token (give a non-empty prompt)"};
    if (!model.byte_level() && !args.flag("--ignore-eos") && model.tokenizer()->eos_token_id())
      stop_ids.push_back(*model.tokenizer()->eos_token_id());
  }
  const auto prompt_tokens = static_cast<std::int64_t>(ids.size());
  if (const auto limit = model.position_limit(); limit && prompt_tokens + max_new > *limit)
    throw UsageError{"prompt (" + std::to_string(prompt_tokens) +
                     " tokens) plus --max-tokens must stay within " + std::to_string(*limit) +
                     " positions (the model's limit)"};

  Sampler sampler(sampling);
  for (std::int32_t id : ids) sampler.accept(id);
  StopStrings stops(args.all("--stop"));
  TextStream text(model);
  ModelState state = model.allocate_state(1, prompt_tokens + max_new);
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> prefill = model.forward({ids.data(), 1, prompt_tokens}, state);
  prefill.erase(prefill.begin(), prefill.end() - vocab);
  const double prefill_seconds = seconds_since(start);
  const bool open = chat || write_out(prompt.data(), prompt.size());
  ReplyEnd end;
  if (open)
    end = stream_reply(model, state, std::move(prefill), sampler, max_new, stop_ids, stops, text, ids);
  if (open && end.open) write_out("\n", 1);
  std::fprintf(
      stderr,
      "\n[samebits] prefill %lld tokens in %.3f s (%.1f tok/s); generated %lld tokens in %.3f s (%.1f "
      "tok/s)%s; seed %llu; threads %d\n",
      static_cast<long long>(prompt_tokens), prefill_seconds, prompt_tokens / std::max(prefill_seconds, 1e-9),
      static_cast<long long>(end.produced), end.seconds, end.produced / std::max(end.seconds, 1e-9),
      end.stop_string ? ", stopped at a --stop string"
      : end.stop_id   ? ", stopped at the end-of-sequence token"
                      : "",
      static_cast<unsigned long long>(sampling.seed), num_threads());
  return kExitOk;
}

}  // namespace samebits::cli
