// `samebits eval`: mean cross-entropy and bits per byte of a text file under a byte-level Samba model, in
// stateless windows or one carried state, with a progress line on stderr when it is a terminal.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <samebits/file_kind.hpp>
#include <samebits/samebits.hpp>
#include <samebits/scoring.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace samebits::cli {
namespace {

constexpr double kLn2 = 0.6931471805599453;

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
  explicit ProgressBar(std::int64_t total)
      : total_(total), start_(std::chrono::steady_clock::now()), enabled_(::isatty(STDERR_FILENO) == 1) {}

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
    std::fprintf(stderr, "\r[%s%s] %3d%%  %lld/%lld bytes  %.0f bytes/s  ETA %d:%02d ",
                 std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(),
                 static_cast<int>(100 * done / std::max<std::int64_t>(total_, 1)),
                 static_cast<long long>(done), static_cast<long long>(total_), rate,
                 static_cast<int>(left) / 60, static_cast<int>(left) % 60);
    if (last) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::int64_t total_;
  std::chrono::steady_clock::time_point start_, drawn_{};
  bool enabled_;
};

}  // namespace

const CommandSpec& eval_spec() {
  static const CommandSpec spec{
      "eval",
      "[CHECKPOINT] FILE [OPTIONS]",
      "mean cross-entropy and bits per byte of FILE under a byte-level Samba model\n"
      "Without CHECKPOINT the shipped model is used. By default the text is cut into windows of W bytes,\n"
      "each scored from a fresh state (batched B at a time); --carry scores it as one sequence, carrying\n"
      "the state from window to window (a model with attention layers takes at most 8192 bytes that way).",
      {{"--context", "", "W", "512", "window length in bytes, 1 to 8192"},
       {"--batch", "", "B", "8", "windows per forward (stateless), 1 to 256"},
       {"--carry", "", "", "", "carry the state across windows instead of starting each fresh"},
       {"--json", "", "", "", "print one JSON object instead of text"}},
      "samebits eval corpus.txt --context 1024 --json"};
  return spec;
}

int command_eval(const Args& args) {
  const std::int64_t context = parse_int(args.get("--context").value_or("512"), "--context", 1, 8192);
  const std::int64_t batch = parse_int(args.get("--batch").value_or("8"), "--batch", 1, 256);
  const bool carry = args.flag("--carry");
  const bool json = args.flag("--json");
  // One forward holds batch x context x 256 logits; keep it within 1 GiB.
  if (batch * context > (std::int64_t{1} << 20))
    throw UsageError{"--batch times --context must stay within 1048576 positions"};
  if (args.positional.empty() || args.positional.size() > 2) throw UsageError{"eval takes [CHECKPOINT] FILE"};
  const std::string checkpoint = args.positional.size() == 2 ? args.positional[0] : default_checkpoint();
  const std::string path = args.positional.back();
  require_samba_checkpoint(checkpoint, "eval");
  const std::string text = read_bytes(path);
  if (text.size() < 2)
    throw UsageError{"eval needs a FILE of at least 2 bytes (the first byte is only context)"};

  const SambaInference model = SambaInference::from_checkpoint(checkpoint);
  const std::int64_t vocab = model.config().vocab();
  if (vocab != 256)
    throw UsageError{"eval reads bytes, so it needs a vocab-256 model; this one has vocab " +
                     std::to_string(vocab)};
  const auto& layers = model.config().layers();
  const bool attention = std::find(layers.begin(), layers.end(), "attention") != layers.end();
  if (carry && attention && text.size() - 1 > 8192)
    throw UsageError{
        "eval --carry scores FILE as one sequence, and a model with attention layers takes at most "
        "8192 positions; FILE has " +
        std::to_string(text.size()) + " bytes (drop --carry for stateless windows)"};

  // Stateless windows: inputs text[s, s+W), targets text[s+1, s+W+1) for s = 0, W, 2W, ...; each window
  // starts from a fresh state, so every byte but the first is scored once, with the bytes before it in its
  // window as context. Equal-length windows are batched into one forward.
  const auto predictions = static_cast<std::int64_t>(text.size()) - 1;
  std::vector<std::int64_t> starts;
  for (std::int64_t s = 0; s < predictions; s += context) starts.push_back(s);
  ProgressBar progress(predictions);
  double total_nats = 0.0;
  std::int64_t scored = 0;
  const auto begin = std::chrono::steady_clock::now();
  if (carry) {  // one sequence: window after window through one state
    SambaState state = model.allocate_state(1, predictions);
    for (const std::int64_t start : starts) {
      const std::int64_t length = std::min(context, predictions - start);
      std::vector<std::int32_t> ids(static_cast<std::size_t>(length));
      for (std::int64_t i = 0; i < length; ++i)
        ids[static_cast<std::size_t>(i)] = static_cast<unsigned char>(text[start + i]);
      const std::vector<float> logits = model.forward({ids.data(), 1, length}, state);
      std::vector<std::int32_t> targets(static_cast<std::size_t>(length));
      for (std::int64_t i = 0; i < length; ++i)
        targets[static_cast<std::size_t>(i)] = static_cast<unsigned char>(text[start + i + 1]);
      // Per-token values in parallel, summed here in position order: the same total on any thread count.
      for (const double nll : token_nlls(logits.data(), length, vocab, targets.data())) total_nats += nll;
      scored += length;
      progress.update(scored, scored == predictions);
    }
  }
  for (std::size_t first = 0; !carry && first < starts.size();) {
    const std::int64_t length = std::min(context, predictions - starts[first]);
    std::size_t last = first;
    while (last < starts.size() && static_cast<std::int64_t>(last - first) < batch &&
           std::min(context, predictions - starts[last]) == length)
      ++last;
    const auto rows = static_cast<std::int64_t>(last - first);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(rows * length));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < length; ++i)
        ids[static_cast<std::size_t>(r * length + i)] =
            static_cast<unsigned char>(text[starts[first + r] + i]);
    const std::vector<float> logits = model.forward({ids.data(), rows, length});
    std::vector<std::int32_t> targets(static_cast<std::size_t>(rows * length));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < length; ++i)
        targets[static_cast<std::size_t>(r * length + i)] =
            static_cast<unsigned char>(text[starts[first + r] + i + 1]);
    // Per-token values in parallel, summed here row by row in position order: the same total on any thread
    // count.
    for (const double nll : token_nlls(logits.data(), rows * length, vocab, targets.data()))
      total_nats += nll;
    scored += rows * length;
    first = last;
    progress.update(scored, first == starts.size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double nats = total_nats / static_cast<double>(scored);
  const double rate = scored / std::max(seconds, 1e-9);
  if (json) {
    std::printf(
        "{\"file\":%s,\"model\":%s,\"bytes\":%lld,\"predictions\":%lld,\"method\":\"%s\",\"context\":%lld,"
        "\"mean_cross_entropy_nats\":%.9g,\"bits_per_byte\":%.9g,\"seconds\":%.6f,\"bytes_per_second\":%.1f,"
        "\"threads\":%d}\n",
        json_string(path).c_str(), json_string(checkpoint).c_str(), static_cast<long long>(text.size()),
        static_cast<long long>(scored), carry ? "carry" : "stateless", static_cast<long long>(context), nats,
        nats / kLn2, seconds, rate, num_threads());
    return kExitOk;
  }
  std::printf("%s: %lld bytes, %lld predictions\n", path.c_str(), static_cast<long long>(text.size()),
              static_cast<long long>(scored));
  std::printf("model: %s\n", checkpoint.c_str());
  if (carry)
    std::printf(
        "method: one carried state over windows of %lld bytes (every byte has all the bytes before it as "
        "context)\n",
        static_cast<long long>(context));
  else
    std::printf(
        "method: stateless windows of %lld bytes (each window starts from a fresh state; no state is carried "
        "between windows)\n",
        static_cast<long long>(context));
  std::printf("mean cross-entropy: %.6f nats/byte\n", nats);
  std::printf("bits per byte: %.6f\n", nats / kLn2);
  std::fprintf(stderr, "[samebits] scored %lld bytes in %.2f s (%.0f bytes/s); threads %d\n",
               static_cast<long long>(scored), seconds, rate, num_threads());
  return 0;
}

}  // namespace samebits::cli
