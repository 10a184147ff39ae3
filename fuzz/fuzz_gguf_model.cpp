// Fuzzes the GGUF model and tokenizer mappings (docs/gguf.md §10-§12) on in-memory files: an accepted model
// keeps the head geometry the block needs and names every tensor its plan reads, each tensor reads back
// with as many values as its shape holds (or is refused for a non-finite block); an accepted tokenizer spec
// either builds a tokenizer whose ids name tokens and decode, or is refused by the tokenizer's own checks.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "io/gguf.hpp"
#include "io/gguf_model.hpp"
#include "io/gguf_tokenizer.hpp"
#include "models/tokenizer/bpe.hpp"

namespace {

void check_model(const std::string& bytes) {
  using namespace samebits;
  std::optional<io::GgufModel> model;
  if (!fuzz::accepted([&] { model.emplace("fuzz", bytes); })) return;
  const io::HFPlan& plan = model->plan();
  fuzz::require(plan.block.n_heads * plan.block.head_dim == plan.d_model,
                "accepted heads do not fill d_model");
  fuzz::require(plan.block.n_heads % plan.block.n_kv_heads == 0, "accepted kv heads do not divide the heads");
  fuzz::require(plan.block.head_dim % 2 == 0, "an accepted head width is odd");
  const std::vector<std::string> names = model->names();
  fuzz::require(static_cast<std::int64_t>(names.size()) == plan.planned_count(),
                "an accepted model does not hold exactly the planned tensors");
  for (const std::string& name : names) {
    fuzz::require(plan.is_planned(name), "an accepted model holds an unplanned tensor");
    const io::GgufTensor* t = model->file().find_tensor(model->gguf_name(name));
    fuzz::require(t != nullptr, "a mapped tensor is not in the file");
    if (t->elements > (std::uint64_t{1} << 16)) continue;  // decoding is bounded
    std::vector<std::int64_t> shape;
    std::vector<float> values;
    if (!fuzz::accepted([&] { values = model->read(name, shape); })) continue;
    std::uint64_t count = 1;
    for (const std::int64_t n : shape) count *= static_cast<std::uint64_t>(n);
    fuzz::require(count == values.size() && count == t->elements, "a tensor read back with the wrong size");
  }
}

void check_tokenizer(const std::string& bytes) {
  using namespace samebits;
  std::optional<io::GgufFile> file;
  if (!fuzz::accepted([&] { file.emplace("fuzz", bytes); })) return;
  std::optional<models::tokenizer::TokenizerSpec> spec;
  if (!fuzz::accepted([&] { spec = io::gguf_tokenizer_spec(*file); })) return;
  fuzz::require(!spec->vocab.empty() || !spec->added.empty(), "an accepted vocabulary is empty");
  std::optional<models::tokenizer::BpeTokenizer> tokenizer;
  if (!fuzz::accepted([&] { tokenizer.emplace(std::move(*spec)); })) return;
  const std::vector<std::int32_t> ids =
      tokenizer->encode("ab a 12 <|s|>\xC3\xA9 \xF0\x9F\x8D\x95", true, true);
  for (const std::int32_t id : ids)
    fuzz::require(tokenizer->token_bytes(id).has_value(), "an encoded id names no token");
  fuzz::require(fuzz::accepted([&] { (void)tokenizer->decode_bytes(ids, false); }),
                "encoded ids do not decode");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  check_model(bytes);
  check_tokenizer(bytes);
  return 0;
}
