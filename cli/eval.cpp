// `samebits eval`: mean cross-entropy and bits per byte of a text file under a byte-level Samba model, in
// stateless windows, with a progress bar on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace samebits::cli {
namespace {

constexpr double kLn2 = 0.6931471805599453;

std::string read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError{"cannot read '" + path + "'"};
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// -log softmax(logits)[target] in nats. The exponentials use the engine's portable expf and logf, so the
// figure is the same on every machine; the sum is kept in double.
double negative_log_likelihood(const float* logits, std::int64_t vocab, std::int32_t target) {
  float top = logits[0];
  for (std::int64_t u = 1; u < vocab; ++u) top = std::max(top, logits[u]);
  double total = 0.0;
  for (std::int64_t u = 0; u < vocab; ++u) total += exact_exp(logits[u] - top);
  return static_cast<double>(top) - logits[target] + exact_log(static_cast<float>(total));
}

// One line, redrawn in place: bar, percentage, bytes scored and speed.
class ProgressBar {
 public:
  explicit ProgressBar(std::int64_t total) : total_(total), start_(std::chrono::steady_clock::now()) {}

  void update(std::int64_t done, bool last) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - drawn_ < std::chrono::milliseconds(200)) return;
    drawn_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const int width = 30;
    const int filled = static_cast<int>(width * done / std::max<std::int64_t>(total_, 1));
    std::fprintf(stderr, "\r[%s%s] %3d%%  %lld/%lld bytes  %.0f bytes/s", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(),
                 static_cast<int>(100 * done / std::max<std::int64_t>(total_, 1)),
                 static_cast<long long>(done), static_cast<long long>(total_),
                 done / std::max(seconds, 1e-9));
    if (last) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::int64_t total_;
  std::chrono::steady_clock::time_point start_, drawn_{};
};

}  // namespace

int command_eval(std::vector<std::string> args) {
  const std::int64_t context =
      parse_int(take_option(args, "--context").value_or("512"), "--context", 1, 8192);
  const std::int64_t batch = parse_int(take_option(args, "--batch").value_or("8"), "--batch", 1, 256);
  // One forward holds batch x context x 256 logits; keep it within 1 GiB.
  if (batch * context > (std::int64_t{1} << 20))
    throw UsageError{"--batch times --context must stay within 1048576 positions"};
  reject_unknown_options(args, "eval");
  if (args.empty() || args.size() > 2) throw UsageError{"eval takes [CHECKPOINT] FILE"};
  const std::string checkpoint = args.size() == 2 ? args[0] : default_checkpoint();
  const std::string path = args.back();
  const std::string text = read_bytes(path);
  if (text.size() < 2)
    throw UsageError{"eval needs a FILE of at least 2 bytes (the first byte is only context)"};

  const SambaInference model = SambaInference::from_checkpoint(checkpoint);
  const std::int64_t vocab = model.config().vocab();
  if (vocab != 256)
    throw UsageError{"eval reads bytes, so it needs a vocab-256 model; this one has vocab " +
                     std::to_string(vocab)};

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
  for (std::size_t first = 0; first < starts.size();) {
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
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < length; ++i) {
        const auto target = static_cast<unsigned char>(text[starts[first + r] + i + 1]);
        total_nats += negative_log_likelihood(logits.data() + (r * length + i) * vocab, vocab, target);
      }
    scored += rows * length;
    first = last;
    progress.update(scored, first == starts.size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double nats = total_nats / static_cast<double>(scored);
  std::printf("%s: %lld bytes, %lld predictions\n", path.c_str(), static_cast<long long>(text.size()),
              static_cast<long long>(scored));
  std::printf("model: %s\n", checkpoint.c_str());
  std::printf(
      "method: stateless windows of %lld bytes (each window starts from a fresh state; no state is carried "
      "between windows)\n",
      static_cast<long long>(context));
  std::printf("mean cross-entropy: %.6f nats/byte\n", nats);
  std::printf("bits per byte: %.6f\n", nats / kLn2);
  std::fprintf(stderr, "[samebits] scored %lld bytes in %.2f s (%.0f bytes/s); threads %d\n",
               static_cast<long long>(scored), seconds, scored / std::max(seconds, 1e-9), num_threads());
  return 0;
}

}  // namespace samebits::cli
