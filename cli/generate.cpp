// `samebits generate`: byte-level text from a Samba checkpoint, streamed as it is decoded through the shared
// sampler (docs/api.md §16), with prefill and decode speed and the seed on stderr.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <samebits/file_kind.hpp>
#include <samebits/samebits.hpp>
#include <samebits/sampler.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

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

// 63 random bits, so every seed printed can be given back with --seed.
std::uint64_t random_seed() {
  std::random_device device;
  const std::uint64_t high = device(), low = device();
  return ((high << 32) ^ low) & 0x7FFFFFFFFFFFFFFFull;
}

}  // namespace

const CommandSpec& generate_spec() {
  static const CommandSpec spec{
      "generate",
      "[CHECKPOINT] (-p TEXT | -p - | -f FILE) [OPTIONS]",
      "stream text from a byte-level (vocab 256) Samba model\n"
      "Without CHECKPOINT the shipped model is used. The prompt is echoed, then each sampled byte as it is\n"
      "decoded; a line on stderr gives the speeds and the seed, so any run can be repeated with --seed.",
      {
          {"--prompt", "-p", "TEXT", "", "the prompt; '-' reads it from standard input"},
          {"--prompt-file", "-f", "FILE", "", "read the prompt from FILE"},
          {"--max-tokens", "-n", "N", "200", "bytes to generate, 1 to 8000"},
          {"--temperature", "", "T", "0.8", "softmax temperature; 0 = greedy (argmax)"},
          {"--top-k", "", "K", "0 = off", "keep the K most likely bytes"},
          {"--top-p", "", "P", "1.0 = off", "keep the most likely bytes up to probability mass P"},
          {"--min-p", "", "P", "0 = off", "drop bytes less likely than P times the most likely one"},
          {"--repeat-penalty", "", "R", "1.0 = off", "penalize bytes seen in the last --repeat-last-n"},
          {"--repeat-last-n", "", "N", "64", "the window of the three penalties (prompt included)"},
          {"--presence-penalty", "", "P", "0 = off", "subtract P from the logit of every byte in the window"},
          {"--frequency-penalty", "", "P", "0 = off", "subtract P per occurrence in the window"},
          {"--seed", "-s", "S", "random, printed on stderr", "seed of the sampler, 0 to 2^63-1"},
          {"--stop", "", "TEXT", "none", "stop before TEXT would be printed", true},
          {"--ignore-eos", "", "", "", "refused: byte-level Samba models have no end-of-sequence token"},
      },
      "samebits generate -p \"In the beginning\" -n 100 --temperature 0.7 --top-k 40 --seed 1 --stop "
      "\"\\n\\n\""};
  return spec;
}

int command_generate(const Args& args) {
  const std::int64_t max_new = parse_int(args.get("--max-tokens").value_or("200"), "--max-tokens", 1, 8000);
  SamplerOptions sampling;
  sampling.temperature = parse_double(args.get("--temperature").value_or("0.8"), "--temperature", 0.0, 100.0);
  sampling.top_k = parse_int(args.get("--top-k").value_or("0"), "--top-k", 0, 1 << 20);
  sampling.top_p = parse_double(args.get("--top-p").value_or("1.0"), "--top-p", 1e-9, 1.0);
  sampling.min_p = parse_double(args.get("--min-p").value_or("0"), "--min-p", 0.0, 1.0);
  sampling.repetition_penalty =
      parse_double(args.get("--repeat-penalty").value_or("1.0"), "--repeat-penalty", 1e-3, 1e3);
  sampling.penalty_last_n = parse_int(args.get("--repeat-last-n").value_or("64"), "--repeat-last-n", 0, 8192);
  sampling.presence_penalty =
      parse_double(args.get("--presence-penalty").value_or("0"), "--presence-penalty", -100.0, 100.0);
  sampling.frequency_penalty =
      parse_double(args.get("--frequency-penalty").value_or("0"), "--frequency-penalty", -100.0, 100.0);
  const auto given_seed = args.get("--seed");
  sampling.seed =
      given_seed ? static_cast<std::uint64_t>(parse_int(*given_seed, "--seed", 0, INT64_MAX)) : random_seed();
  if (args.flag("--ignore-eos"))
    throw UsageError{
        "generate: --ignore-eos applies to a model with an end-of-sequence token; byte-level Samba models "
        "have "
        "none (generation always runs to --max-tokens or a --stop string)"};
  if (args.positional.size() > 1) throw UsageError{"generate takes at most one CHECKPOINT"};
  const std::string prompt = read_prompt(args);
  const std::string path = args.positional.empty() ? default_checkpoint() : args.positional[0];
  require_samba_checkpoint(path, "generate");

  const SambaInference model = SambaInference::from_checkpoint(path);
  const std::int64_t vocab = model.config().vocab();
  if (vocab != 256)
    throw UsageError{"generate reads and writes bytes, so it needs a vocab-256 model; this one has vocab " +
                     std::to_string(vocab)};
  // An empty prompt starts from a newline, so there is always a position to predict from.
  std::vector<std::int32_t> ids;
  for (unsigned char c : prompt.empty() ? std::string("\n") : prompt) ids.push_back(c);
  const auto prompt_tokens = static_cast<std::int64_t>(ids.size());
  if (prompt_tokens + max_new > 8192)
    throw UsageError{"prompt plus --max-tokens must stay within 8192 positions (the attention limit)"};

  Sampler sampler(sampling);
  for (std::int32_t id : ids) sampler.accept(id);
  StopStrings stops(args.all("--stop"));
  SambaState state = model.allocate_state(1, prompt_tokens + max_new);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<float> prefill = model.forward({ids.data(), 1, prompt_tokens}, state);
  const double prefill_seconds = seconds_since(start);
  bool open = write_out(prompt.data(), prompt.size());

  // Every produced token is counted, printed or held back by a stop string; a closed pipe ends the loop.
  const auto decode_start = std::chrono::steady_clock::now();
  std::int64_t produced = 0;
  std::int32_t next = sampler.sample_and_accept(prefill.data() + (prompt_tokens - 1) * vocab, vocab);
  while (open) {
    ++produced;
    const std::string ready = stops.push(static_cast<char>(next));
    open = write_out(ready.data(), ready.size());
    if (!open || stops.stopped() || produced == max_new) break;
    const std::vector<float> logits = model.step({&next, 1, 1}, state);
    next = sampler.sample_and_accept(logits.data(), vocab);
  }
  const double decode_seconds = seconds_since(decode_start);
  if (open && !stops.stopped()) {
    const std::string rest = stops.flush();
    open = write_out(rest.data(), rest.size());
  }
  if (open) write_out("\n", 1);
  std::fprintf(
      stderr,
      "\n[samebits] prefill %lld tokens in %.3f s (%.1f tok/s); generated %lld tokens in %.3f s (%.1f "
      "tok/s)%s; seed %llu; threads %d\n",
      static_cast<long long>(prompt_tokens), prefill_seconds, prompt_tokens / std::max(prefill_seconds, 1e-9),
      static_cast<long long>(produced), decode_seconds, produced / std::max(decode_seconds, 1e-9),
      stops.stopped() ? ", stopped at a --stop string" : "", static_cast<unsigned long long>(sampling.seed),
      num_threads());
  return kExitOk;
}

}  // namespace samebits::cli
