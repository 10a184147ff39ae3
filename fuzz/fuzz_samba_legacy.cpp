// Fuzzes the legacy JSON Samba checkpoint reader; an accepted file becomes a SambaInference that runs a 1x2
// forward.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "api/samba_inference.hpp"
#include "fuzz_support.hpp"
#include "io/samba_checkpoint.hpp"

namespace {

using namespace samebits;

// The reader SambaInference::from_checkpoint uses (per-tensor buffers) and the flat one must agree on
// acceptance; an accepted checkpoint must give a model whose 1x2 forward refuses or returns (1, 2, vocab)
// logits.
void read_and_run(std::string_view bytes) {
  fuzz::MemFile file(bytes);
  std::optional<io::SambaCheckpointTensors> checkpoint;
  const bool accepted =
      fuzz::accepted([&] { checkpoint.emplace(io::read_samba_legacy_checkpoint_tensors(file.path())); });
  fuzz::require(accepted == fuzz::accepted([&] { io::read_samba_legacy_checkpoint(file.path()); }),
                "the per-tensor and the flat reader disagree on a file");
  if (!accepted) return;
  std::optional<SambaInference> model;
  if (!fuzz::accepted([&] { model.emplace(checkpoint->config, std::move(checkpoint->tensors)); })) return;
  const std::int64_t vocab = model->config().vocab();
  const std::int32_t ids[2] = {0, static_cast<std::int32_t>(vocab - 1)};
  // Finite but huge weights may overflow an activation, which the next Mamba-3 layer refuses as a
  // non-finite input (upstream's native check): a refusal is allowed, anything else must be (1, 2, vocab).
  std::vector<float> logits;
  if (!fuzz::accepted([&] { logits = model->forward(IdsView{ids, 1, 2}); })) return;
  fuzz::require(logits.size() == static_cast<std::size_t>(2 * vocab), "logits of the wrong size");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  samebits::fuzz::single_threaded();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  read_and_run(bytes);
  // Once more re-encoded canonically with an honest payload digest, so mutations reach the checks behind it.
  if (auto honest = samebits::fuzz::honest_payload_envelope(bytes); honest && *honest != bytes)
    read_and_run(*honest);
  return 0;
}
