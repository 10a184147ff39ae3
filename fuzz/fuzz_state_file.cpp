// Fuzzes the saved-state reader (docs/formats.md §9) on the tiny models: the first byte picks the state
// kind, the rest is the file. Refused or accepted, never a crash; an accepted file is exactly what saving
// the loaded state writes again. Each input is retried with an honest fingerprint and checksum, so
// mutations reach the entry table behind them.
#include <cstdint>
#include <cstring>
#include <optional>
#include <samebits/state_file.hpp>
#include <string>
#include <string_view>
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

enum Pick : std::uint8_t { kFull, kWindowed, kMamba1, kMamba2, kMamba3, kSamba, kPicks };

std::string fingerprint_of(Pick pick) {
  const fuzz::Models& m = tiny_models();
  switch (pick) {
    case kFull:
      return model_fingerprint(*m.full);
    case kWindowed:
      return model_fingerprint(*m.windowed);
    case kMamba1:
      return model_fingerprint(*m.m1);
    case kMamba2:
      return model_fingerprint(*m.m2);
    case kMamba3:
      return model_fingerprint(*m.m3);
    default:
      return model_fingerprint(*m.samba);
  }
}

// Loads the file for the picked model; when accepted, saving the state must give the same bytes.
void load(Pick pick, std::string_view file) {
  const std::vector<std::uint8_t> bytes(file.begin(), file.end());
  const fuzz::Models& m = tiny_models();
  std::vector<std::uint8_t> again;
  const bool accepted = fuzz::accepted([&] {
    switch (pick) {
      case kFull:
        again = state_bytes(*m.full, transformer_state_from_bytes(bytes, *m.full, "fuzz"));
        break;
      case kWindowed:
        again = state_bytes(*m.windowed, transformer_state_from_bytes(bytes, *m.windowed, "fuzz"));
        break;
      case kMamba1:
        again = state_bytes(*m.m1, mamba1_state_from_bytes(bytes, *m.m1, "fuzz"));
        break;
      case kMamba2:
        again = state_bytes(*m.m2, mamba2_state_from_bytes(bytes, *m.m2, "fuzz"));
        break;
      case kMamba3:
        again = state_bytes(*m.m3, mamba3_state_from_bytes(bytes, *m.m3, "fuzz"));
        break;
      default:
        again = state_bytes(*m.samba, samba_state_from_bytes(bytes, *m.samba, "fuzz"));
        break;
    }
  });
  if (accepted) fuzz::require(again == bytes, "a loaded state saves to other bytes than it was read from");
}

// The file with the picked model's fingerprint and a checksum that matches its bytes.
std::optional<std::string> honest(Pick pick, std::string_view file) {
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
  tiny_models();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto pick = static_cast<Pick>(data[0] % kPicks);
  const std::string_view file(reinterpret_cast<const char*>(data + 1), size - 1);
  fuzz::with_honest_retry(
      file, [&](std::string_view bytes) { load(pick, bytes); },
      [&](std::string_view bytes) { return honest(pick, bytes); });
  return 0;
}
