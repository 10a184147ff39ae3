// Saved decode states through the public C++ header (docs/formats.md §9): save -> load -> continue equals the
// uninterrupted run bit for bit, the bytes round-trip, and damaged or foreign bytes are refused by field.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "test_samba_support.hpp"

namespace samebits {
namespace {

SambaInference stack(std::uint64_t seed) {
  const models::SambaConfig config(testing::samba_args(256, 32, {"mamba3", "attention"}, 2, 64));
  return SambaInference(config, testing::samba_parameters(config, seed, 0.08f));
}

// The logits' bits.
std::vector<std::uint32_t> run(const SambaInference& model, SambaState& state,
                               const std::vector<std::int32_t>& ids) {
  std::vector<std::uint32_t> bits;
  for (float v : model.forward(IdsView{ids.data(), 1, static_cast<std::int64_t>(ids.size())}, state))
    bits.push_back(std::bit_cast<std::uint32_t>(v));
  return bits;
}

std::string refusal(const std::vector<std::uint8_t>& bytes, const SambaInference& model) {
  try {
    state_from_bytes(bytes, model, "test");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(StateFile, SambaStateContinuesBitwiseAfterSaveAndLoad) {
  const SambaInference model = stack(21);
  const std::vector<std::int32_t> prompt{1, 2, 3, 70, 71, 72, 200}, rest{9, 8, 7, 6};
  SambaState state = model.allocate_state(1, 16);
  run(model, state, prompt);
  const auto path = std::filesystem::temp_directory_path() / "samebits_test_state_file.state";
  save_state(path.string(), model, state);
  SambaState loaded = load_state(path.string(), model);
  std::filesystem::remove(path);
  EXPECT_EQ(state_bytes(model, loaded), state_bytes(model, state));
  EXPECT_EQ(run(model, loaded, rest), run(model, state, rest));
  EXPECT_EQ(state_bytes(model, loaded), state_bytes(model, state));
}

TEST(StateFile, RefusesDamageKindAndAnotherModelByField) {
  const SambaInference model = stack(21);
  SambaState state = model.allocate_state(1, 8);
  run(model, state, {5, 6, 7});
  const std::vector<std::uint8_t> bytes = state_bytes(model, state);
  EXPECT_NE(refusal({bytes.begin(), bytes.begin() + 40}, model).find("file: truncated"), std::string::npos);
  EXPECT_NE(refusal({bytes.begin(), bytes.end() - 1}, model).find("body_length: truncated"),
            std::string::npos);
  std::vector<std::uint8_t> flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  EXPECT_NE(refusal(flipped, model).find("checksum"), std::string::npos);
  EXPECT_NE(refusal(bytes, stack(22)).find("fingerprint: saved from another model"), std::string::npos);
  EXPECT_EQ(model_fingerprint(model), model_fingerprint(SambaInference(model)));  // copies share it
  EXPECT_NE(model_fingerprint(model), model_fingerprint(stack(22)));
}

}  // namespace
}  // namespace samebits
