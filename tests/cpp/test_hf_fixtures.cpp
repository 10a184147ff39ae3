// CausalLM through the C++ API on the checkpoints transformers made (tests/fixtures/hf/, docs/models.md §21):
// the logits against transformers' float64 run of the same files, and step == forward at every position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <samebits/causal_lm.hpp>
#include <samebits/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace samebits {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(SAMEBITS_SOURCE_DIR) / "tests" / "fixtures" / "hf";

struct Reference {
  std::int64_t batch = 0, length = 0, vocab = 0;
  std::vector<std::int32_t> ids;  // (batch, length)
  std::vector<double> logits;     // (batch, length, vocab)
};

Reference read_reference(const fs::path& directory) {
  std::ifstream in(directory / "reference.json");
  std::stringstream text;
  text << in.rdbuf();
  const json::Value document = json::parse(text.str());
  Reference r;
  for (const json::Value& row : document.find("ids")->as_array()) {
    r.length = static_cast<std::int64_t>(row.as_array().size());
    for (const json::Value& id : row.as_array()) r.ids.push_back(static_cast<std::int32_t>(*id.as_int64()));
    ++r.batch;
  }
  for (const json::Value& row : document.find("logits")->as_array())
    for (const json::Value& position : row.as_array()) {
      r.vocab = static_cast<std::int64_t>(position.as_array().size());
      for (const json::Value& logit : position.as_array()) r.logits.push_back(logit.as_float());
    }
  return r;
}

// The worst, over positions, of max |got - want| over the vocabulary divided by that position's logit range.
double worst_relative_error(const std::vector<float>& got, const Reference& r) {
  double worst = 0.0;
  for (std::int64_t p = 0; p < r.batch * r.length; ++p) {
    const auto want = r.logits.begin() + p * r.vocab;
    const auto [lo, hi] = std::minmax_element(want, want + r.vocab);
    double spread = 0.0;
    for (std::int64_t v = 0; v < r.vocab; ++v)
      spread = std::max(spread, std::abs(static_cast<double>(got[p * r.vocab + v]) - want[v]));
    worst = std::max(worst, spread / (*hi - *lo));
  }
  return worst;
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kRoot))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(HfFixtures, EveryFamilyMatchesTransformersFloat64AndStepsEqualTheForward) {
  const std::vector<std::string> names = fixture_names();
  ASSERT_EQ(names.size(), 9u);
  for (const std::string& name : names) {
    const Reference r = read_reference(kRoot / name);
    const CausalLM model = CausalLM::load((kRoot / name).string());
    ASSERT_EQ(model.vocab_size(), r.vocab) << name;
    const std::vector<float> whole = model.forward({r.ids.data(), r.batch, r.length});
    ASSERT_EQ(whole.size(), r.logits.size()) << name;
    EXPECT_LE(worst_relative_error(whole, r), 1e-5) << name;
    CausalLMState state = model.allocate_state(r.batch, r.length);
    for (std::int64_t t = 0; t < r.length; ++t) {
      std::vector<std::int32_t> column;
      for (std::int64_t b = 0; b < r.batch; ++b) column.push_back(r.ids[b * r.length + t]);
      const std::vector<float> row = model.step({column.data(), r.batch, 1}, state);
      for (std::int64_t b = 0; b < r.batch; ++b) {
        const auto at = whole.begin() + (b * r.length + t) * r.vocab;
        EXPECT_TRUE(
            testing::same_bits(std::vector<float>(row.begin() + b * r.vocab, row.begin() + (b + 1) * r.vocab),
                               std::vector<float>(at, at + r.vocab)))
            << name << " position " << t;
      }
    }
  }
}

}  // namespace
}  // namespace samebits
