// `samebits eval`: mean cross-entropy, perplexity and bits per byte of a text file under a byte-level Samba
// model or a tokenized CausalLM, in stateless windows or one carried state, with a progress line on stderr
// when it is a terminal.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <samebits/file_kind.hpp>
#include <samebits/samebits.hpp>
#include <samebits/scoring.hpp>
#include <span>
#include <string>
#include <vector>

#include "cli.hpp"
#include "language_model.hpp"

namespace samebits::cli {
namespace {

constexpr double kLn2 = 0.6931471805599453;

std::string number_text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

std::string read_bytes(const std::string& path) {
  // A checkpoint given where the text belongs is named as such (the order is [CHECKPOINT] FILE).
  const FileKind kind = detect_file_kind(path, "text file");
  if (kind == FileKind::SambaArchive || kind == FileKind::SambaJson || kind == FileKind::MlpCheckpoint ||
      kind == FileKind::Safetensors || kind == FileKind::Gguf)
    throw_value_error(path + " is " + describe_file_kind(kind) +
                      "; eval wants a text FILE (the order is: eval [CHECKPOINT] FILE)");
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// One line, redrawn in place on a terminal: bar, percentage, bytes scored, rate and time left. Nothing
// when stderr is redirected, so logs get only the final summary line.
class ProgressBar {
 public:
  ProgressBar(std::int64_t total, const char* unit)
      : total_(total),
        unit_(unit),
        start_(std::chrono::steady_clock::now()),
        enabled_(::isatty(STDERR_FILENO) == 1) {}

  void update(std::int64_t done, bool last) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - drawn_ < std::chrono::milliseconds(200)) return;
    drawn_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = done / std::max(seconds, 1e-9);
    const double left = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    const int width = 30;
    const int filled = static_cast<int>(width * done / std::max<std::int64_t>(total_, 1));
    std::fprintf(stderr, "\r[%s%s] %3d%%  %lld/%lld %s  %.0f %s/s  ETA %d:%02d ",
                 std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(),
                 static_cast<int>(100 * done / std::max<std::int64_t>(total_, 1)),
                 static_cast<long long>(done), static_cast<long long>(total_), unit_, rate, unit_,
                 static_cast<int>(left) / 60, static_cast<int>(left) % 60);
    if (last) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::int64_t total_;
  const char* unit_;
  std::chrono::steady_clock::time_point start_, drawn_{};
  bool enabled_;
};

// Sum of -log p(ids[t+1] | ids[..t]) over every t, in windows of `context` ids: each window from a fresh
// state (equal-length windows batched `batch` at a time), or, with `carry`, one state carried window to
// window. Per-token values are computed in parallel and summed here in position order: the same total on any
// thread count.
double total_nats(const LanguageModel& model, const std::vector<std::int32_t>& ids, std::int64_t context,
                  std::int64_t batch, bool carry, ProgressBar& progress) {
  const std::int64_t vocab = model.vocab();
  const auto predictions = static_cast<std::int64_t>(ids.size()) - 1;
  std::vector<std::int64_t> starts;
  for (std::int64_t s = 0; s < predictions; s += context) starts.push_back(s);
  std::optional<ModelState> state;
  if (carry) state.emplace(model.allocate_state(1, predictions));
  double total = 0.0;
  std::int64_t scored = 0;
  for (std::size_t first = 0; first < starts.size();) {
    const std::int64_t length = std::min(context, predictions - starts[first]);
    std::size_t last = first + 1;
    while (!carry && last < starts.size() && static_cast<std::int64_t>(last - first) < batch &&
           std::min(context, predictions - starts[last]) == length)
      ++last;
    const auto rows = static_cast<std::int64_t>(last - first);
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(rows * length));
    std::vector<std::int32_t> targets(inputs.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < length; ++i) {
        const auto at = static_cast<std::size_t>(starts[first + r] + i);
        inputs[static_cast<std::size_t>(r * length + i)] = ids[at];
        targets[static_cast<std::size_t>(r * length + i)] = ids[at + 1];
      }
    const IdsView view{inputs.data(), rows, length};
    const std::vector<float> logits = carry ? model.forward(view, *state) : model.forward(view);
    for (const double nll : token_nlls(logits.data(), rows * length, vocab, targets.data())) total += nll;
    scored += rows * length;
    first = last;
    progress.update(scored, first == starts.size());
  }
  return total;
}

}  // namespace

const CommandSpec& eval_spec() {
  static const CommandSpec spec{
      "eval",
      "[MODEL] FILE [OPTIONS]",
      "mean cross-entropy, perplexity and bits per byte of FILE under a model\n"
      "MODEL: a byte-level Samba checkpoint (the shipped one without MODEL) or a Hugging Face model\n"
      "directory (the text goes through its tokenizer). By default the ids are cut into windows of W, each\n"
      "scored from a fresh state (batched B at a time); --carry scores them as one sequence, carrying the\n"
      "state from window to window (up to the model's position limit, 8192 with attention layers).",
      {{"--context", "", "W", "512", "window length in bytes or tokens, 1 to 8192"},
       {"--batch", "", "B", "8", "windows per forward (stateless), 1 to 256"},
       {"--carry", "", "", "", "carry the state across windows instead of starting each fresh"},
       {"--json", "", "", "", "print one JSON object instead of text"}},
      "samebits eval corpus.txt --context 1024 --json"};
  return spec;
}

int command_eval(const Args& args) {
  const std::int64_t context = args.integer("--context", "512", 1, 8192);
  const std::int64_t batch = args.integer("--batch", "8", 1, 256);
  const bool carry = args.flag("--carry");
  const bool json = args.flag("--json");
  // One forward holds batch x context x vocab logits; keep the positions within 2^20.
  if (batch * context > (std::int64_t{1} << 20))
    throw UsageError{"--batch times --context must stay within 1048576 positions"};
  if (args.positional.empty() || args.positional.size() > 2) throw UsageError{"eval takes [MODEL] FILE"};
  const std::string checkpoint = args.positional.size() == 2 ? args.positional[0] : default_checkpoint();
  const std::string path = args.positional.back();
  const LanguageModel model = LanguageModel::open(checkpoint, "eval", true);
  const std::string text = read_bytes(path);
  const bool bytes = model.byte_level();
  const std::int64_t vocab = model.vocab();
  if (bytes && vocab != 256)
    throw UsageError{"eval reads bytes, so it needs a vocab-256 model; this one has vocab " +
                     std::to_string(vocab)};
  // A Samba model scores bytes; a tokenized model the ids of the text (special-token spellings stay text),
  // after its bos ids.
  std::vector<std::int32_t> ids;
  if (bytes)
    ids = model.encode(text, false);
  else
    ids = model.tokenizer()->encode(text, true, false);
  if (ids.size() < 2)
    throw UsageError{std::string("eval needs a FILE of at least 2 ") + (bytes ? "bytes" : "tokens") +
                     " (the first is only context)"};
  const auto predictions = static_cast<std::int64_t>(ids.size()) - 1;
  const auto limit = model.position_limit();
  if (carry && limit && predictions > *limit)
    throw UsageError{"eval --carry scores FILE as one sequence, and this model takes at most " +
                     std::to_string(*limit) + " positions; FILE has " + std::to_string(ids.size()) +
                     (bytes ? " bytes" : " tokens") + " (drop --carry for stateless windows)"};
  // The bytes the scored tokens stand for: bits per byte divides by these.
  const auto scored_bytes = static_cast<std::int64_t>(
      bytes ? predictions : model.tokenizer()->decode_bytes(std::span(ids).subspan(1), true).size());
  ProgressBar progress(predictions, bytes ? "bytes" : "tokens");
  const auto begin = std::chrono::steady_clock::now();
  const double nats_total = total_nats(model, ids, context, batch, carry, progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double nats = nats_total / static_cast<double>(predictions);
  const double bits_per_byte =
      nats_total / kLn2 / static_cast<double>(std::max<std::int64_t>(scored_bytes, 1));
  const double rate = predictions / std::max(seconds, 1e-9);
  const char* unit = bytes ? "byte" : "token";
  if (json) {
    std::printf(
        "{\"file\":%s,\"model\":%s,\"bytes\":%lld,%s\"predictions\":%lld,\"method\":\"%s\",\"context\":%lld,"
        "\"mean_cross_entropy_nats\":%.9g,%s\"bits_per_byte\":%.9g,\"seconds\":%.6f,\"%ss_per_second\":%.1f,"
        "\"threads\":%d}\n",
        json_string(path).c_str(), json_string(checkpoint).c_str(), static_cast<long long>(text.size()),
        bytes ? "" : ("\"tokens\":" + std::to_string(ids.size()) + ",").c_str(),
        static_cast<long long>(predictions), carry ? "carry" : "stateless", static_cast<long long>(context),
        nats, bytes ? "" : ("\"perplexity\":" + number_text(std::exp(nats)) + ",").c_str(), bits_per_byte,
        seconds, unit, rate, num_threads());
    return kExitOk;
  }
  if (bytes)
    std::printf("%s: %lld bytes, %lld predictions\n", path.c_str(), static_cast<long long>(text.size()),
                static_cast<long long>(predictions));
  else
    std::printf("%s: %lld bytes, %lld tokens, %lld predictions (%lld bytes)\n", path.c_str(),
                static_cast<long long>(text.size()), static_cast<long long>(ids.size()),
                static_cast<long long>(predictions), static_cast<long long>(scored_bytes));
  std::printf("model: %s\n", checkpoint.c_str());
  if (carry)
    std::printf(
        "method: one carried state over windows of %lld %ss (every %s has all the %ss before it as "
        "context)\n",
        static_cast<long long>(context), unit, unit, unit);
  else
    std::printf(
        "method: stateless windows of %lld %ss (each window starts from a fresh state; no state is carried "
        "between windows)\n",
        static_cast<long long>(context), unit);
  std::printf("mean cross-entropy: %.6f nats/%s\n", nats, unit);
  if (!bytes) std::printf("perplexity: %.6f\n", std::exp(nats));
  std::printf("bits per byte: %.6f\n", bits_per_byte);
  std::fprintf(stderr, "[samebits] scored %lld %ss in %.2f s (%.0f %ss/s); threads %d\n",
               static_cast<long long>(predictions), unit, seconds, rate, unit, num_threads());
  return 0;
}

}  // namespace samebits::cli
