// The body both Samba checkpoint harnesses share: two readers that must agree, then a model that must run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "fuzz_support.hpp"
#include "io/samba_checkpoint.hpp"

namespace samebits::fuzz {

// The reader SambaInference::from_checkpoint uses (per-tensor buffers) and the flat one must agree on
// acceptance; an accepted checkpoint must give a model whose 1x2 forward refuses or returns (1, 2, vocab)
// logits.
template <typename TensorReader, typename FlatReader>
void read_samba_and_run(std::string_view bytes, TensorReader&& read_tensors, FlatReader&& read_flat) {
  MemFile file(bytes);
  std::optional<io::SambaCheckpointTensors> checkpoint;
  const bool ok = accepted([&] { checkpoint.emplace(read_tensors(file.path())); });
  require(ok == accepted([&] { read_flat(file.path()); }),
          "the per-tensor and the flat reader disagree on a file");
  if (!ok) return;
  std::optional<SambaInference> model;
  if (!accepted([&] { model.emplace(checkpoint->config, std::move(checkpoint->tensors)); })) return;
  const std::int64_t vocab = model->config().vocab();
  const std::int32_t ids[2] = {0, static_cast<std::int32_t>(vocab - 1)};
  // Finite but huge weights may overflow an activation, which the next Mamba-3 layer refuses as a
  // non-finite input (upstream's native check): a refusal is allowed, anything else must be (1, 2, vocab).
  std::vector<float> logits;
  if (!accepted([&] { logits = model->forward(IdsView{ids, 1, 2}); })) return;
  require(logits.size() == static_cast<std::size_t>(2 * vocab), "logits of the wrong size");
}

// One fuzz input for a Samba checkpoint harness: read as it is, then again after `repair` made its
// digests honest (so mutations reach the checks behind the hashes). Returns LLVMFuzzerTestOneInput's 0.
template <typename TensorReader, typename FlatReader, typename Repair>
int fuzz_samba_file(const std::uint8_t* data, std::size_t size, TensorReader read_tensors,
                    FlatReader read_flat, Repair&& repair) {
  with_honest_retry(
      std::string_view(reinterpret_cast<const char*>(data), size),
      [&](std::string_view bytes) { read_samba_and_run(bytes, read_tensors, read_flat); }, repair);
  return 0;
}

}  // namespace samebits::fuzz
