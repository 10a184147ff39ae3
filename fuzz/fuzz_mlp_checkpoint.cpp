// Fuzzes io::decode_mlp_checkpoint (in memory); an accepted file becomes an MLPInference whose logits are
// checked.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "fuzz_support.hpp"
#include "io/mlp_checkpoint.hpp"

namespace {

using namespace samebits;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// An accepted checkpoint holds finite weights of the four shapes, so the model must build, and its fast
// path must agree with the scalar twin.
void decode_and_run(std::string_view bytes) {
  std::optional<io::MlpCheckpoint> checkpoint;
  if (!fuzz::accepted([&] { checkpoint.emplace(io::decode_mlp_checkpoint(bytes)); })) return;
  const io::MlpCheckpoint& c = *checkpoint;
  std::optional<MLPInference> model;
  fuzz::require(fuzz::accepted([&] {
                  model.emplace(TensorView{c.weight1.data(), {16, 8}}, TensorView{c.bias1.data(), {16}},
                                TensorView{c.weight2.data(), {3, 16}}, TensorView{c.bias2.data(), {3}});
                }),
                "MLPInference refused the weights of an accepted checkpoint");
  const float x[16] = {0.5f,  -1.0f, 2.0f,  0.0f,   -0.25f, 3.0f,   1.0f, -2.0f,
                       1e-3f, 7.0f,  -7.0f, 0.125f, 1e6f,   -1e-6f, 4.0f, -0.5f};
  // Finite but huge weights may overflow a logit, which predict_logits refuses (upstream's RuntimeError
  // "returned an invalid result"): then the scalar twin must refuse too; otherwise both give the same bits.
  std::vector<float> fast, scalar;
  const bool ran = fuzz::accepted([&] { fast = model->predict_logits(TensorView{x, {2, 8}}); });
  fuzz::require(ran == fuzz::accepted([&] {
                  scalar = model->predict_logits_reference(TensorView{x, {2, 8}});
                }),
                "MLP fast path and scalar twin disagree on refusing");
  fuzz::require(!ran || (fast.size() == 6 && same_bits(fast, scalar)),
                "MLP fast path and scalar twin disagree");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return samebits::fuzz::initialize_single_threaded(); }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The retry is re-encoded canonically with an honest payload digest, so mutations reach the state checks.
  samebits::fuzz::with_honest_retry(std::string_view(reinterpret_cast<const char*>(data), size),
                                    decode_and_run, samebits::fuzz::honest_payload_envelope);
  return 0;
}
