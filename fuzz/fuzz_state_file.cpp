// Fuzzes the saved-state reader (docs/formats.md §9) on the tiny models: the first byte picks the state
// kind, the rest is the file. Refused or accepted, never a crash; an accepted file is exactly what saving
// the loaded state writes again. Each input is retried with an honest fingerprint and checksum, so
// mutations reach the entry table behind them.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <samebits/state_file.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fuzz_support.hpp"
#include "fuzz_tiny_models.hpp"
#include "io/sha256.hpp"

namespace {

using namespace samebits;
using fuzz::tiny_models;

constexpr std::size_t kFingerprintAt = 16;
constexpr std::size_t kFingerprintBytes = 64;
constexpr std::size_t kChecksumBytes = 32;

// The tiny models a seed's first byte picks from (docs/formats.md §9.2 kinds, the transformer twice: full
// causal and windowed).
using AnyModel =
    std::variant<const TransformerBlockInference*, const Mamba1BlockInference*, const Mamba2BlockInference*,
                 const Mamba3BlockInference*, const SambaInference*>;
const std::array<AnyModel, 6>& picks() {
  static const std::array<AnyModel, 6> models = [] {
    const fuzz::Models& m = tiny_models();
    return std::array<AnyModel, 6>{&*m.full, &*m.windowed, &*m.m1, &*m.m2, &*m.m3, &*m.samba};
  }();
  return models;
}

std::string fingerprint_of(std::size_t pick) {
  return std::visit([](const auto* model) { return model_fingerprint(*model); }, picks()[pick]);
}

// Loads the file for the picked model; when accepted, saving the state must give the same bytes.
void load(std::size_t pick, std::string_view file) {
  const std::vector<std::uint8_t> bytes(file.begin(), file.end());
  std::vector<std::uint8_t> again;
  const bool accepted = fuzz::accepted([&] {
    std::visit(
        [&](const auto* model) { again = state_bytes(*model, state_from_bytes(bytes, *model, "fuzz")); },
        picks()[pick]);
  });
  if (accepted) fuzz::require(again == bytes, "a loaded state saves to other bytes than it was read from");
}

// The file with the picked model's fingerprint and a checksum that matches its bytes.
std::optional<std::string> honest(std::size_t pick, std::string_view file) {
  if (file.size() < kFingerprintAt + kFingerprintBytes + kChecksumBytes) return std::nullopt;
  std::string out(file);
  out.replace(kFingerprintAt, kFingerprintBytes, fingerprint_of(pick));
  const io::Sha256Digest digest = io::sha256(out.data(), out.size() - kChecksumBytes);
  std::memcpy(out.data() + out.size() - kChecksumBytes, digest.data(), kChecksumBytes);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::single_threaded();
  picks();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t pick = data[0] % picks().size();
  const std::string_view file(reinterpret_cast<const char*>(data + 1), size - 1);
  fuzz::with_honest_retry(
      file, [&](std::string_view bytes) { load(pick, bytes); },
      [&](std::string_view bytes) { return honest(pick, bytes); });
  return 0;
}
