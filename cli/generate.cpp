// `samebits generate`: byte-level text from a Samba checkpoint, streamed as it is decoded, with prefill and
// decode speed on stderr.
#include <chrono>
#include <cstdio>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "sampling.hpp"

namespace samebits::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int command_generate(std::vector<std::string> args) {
  const auto prompt = take_option(args, "--prompt");
  const std::int64_t max_new =
      parse_int(take_option(args, "--max-tokens").value_or("200"), "--max-tokens", 1, 8000);
  SamplingOptions sampling;
  sampling.temperature =
      parse_double(take_option(args, "--temperature").value_or("0.8"), "--temperature", 0.0, 100.0);
  sampling.top_k = parse_int(take_option(args, "--top-k").value_or("0"), "--top-k", 0, 1 << 20);
  sampling.top_p = parse_double(take_option(args, "--top-p").value_or("1.0"), "--top-p", 1e-9, 1.0);
  const auto seed = static_cast<std::uint64_t>(
      parse_int(take_option(args, "--seed").value_or("0"), "--seed", 0, INT64_MAX));
  reject_unknown_options(args, "generate");
  if (!prompt) throw UsageError{"generate needs --prompt TEXT"};
  if (args.size() > 1) throw UsageError{"generate takes at most one CHECKPOINT"};
  const std::string path = args.empty() ? default_checkpoint() : args[0];

  const SambaInference model = SambaInference::from_checkpoint(path);
  const std::int64_t vocab = model.config().vocab();
  if (vocab != 256)
    throw UsageError{"generate reads and writes bytes, so it needs a vocab-256 model; this one has vocab " +
                     std::to_string(vocab)};
  // An empty prompt starts from a newline, so there is always a position to predict from.
  std::vector<std::int32_t> ids;
  for (unsigned char c : prompt->empty() ? std::string("\n") : *prompt) ids.push_back(c);
  const auto prompt_tokens = static_cast<std::int64_t>(ids.size());
  if (prompt_tokens + max_new > 8192)
    throw UsageError{"prompt plus --max-tokens must stay within 8192 positions (the attention limit)"};

  SambaState state = model.allocate_state(1, prompt_tokens + max_new);
  Random random(seed);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<float> prefill = model.forward({ids.data(), 1, prompt_tokens}, state);
  const double prefill_seconds = seconds_since(start);
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  std::fflush(stdout);

  std::int32_t next = choose_token(prefill.data() + (prompt_tokens - 1) * vocab, vocab, sampling, random);
  const auto decode_start = std::chrono::steady_clock::now();
  for (std::int64_t produced = 0; produced < max_new; ++produced) {
    std::fputc(next, stdout);
    std::fflush(stdout);
    if (produced + 1 == max_new) break;
    const std::vector<float> logits = model.step({&next, 1, 1}, state);
    next = choose_token(logits.data(), vocab, sampling, random);
  }
  const double decode_seconds = seconds_since(decode_start);
  std::fputc('\n', stdout);
  std::fprintf(stderr,
               "\n[samebits] prefill %lld tokens in %.3f s (%.1f tok/s); decode %lld tokens in %.3f s (%.1f "
               "tok/s); threads %d\n",
               static_cast<long long>(prompt_tokens), prefill_seconds,
               prompt_tokens / std::max(prefill_seconds, 1e-9), static_cast<long long>(max_new - 1),
               decode_seconds, (max_new - 1) / std::max(decode_seconds, 1e-9), num_threads());
  return 0;
}

}  // namespace samebits::cli
