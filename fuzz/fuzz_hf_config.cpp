// Fuzzes the Hugging Face config reader: any bytes parsed as Python's json.loads would, then planned under
// both loaders (docs/models.md §15). An accepted plan has sane sizes, head geometry the block serves, windows
// that are widths, in-range row slices, and a name index that agrees with its own listing, however many
// layers the config claims.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <samebits/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "io/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<json::Value> config;
  if (!fuzz::accepted([&] { config.emplace(json::parse(text, json::Dialect::Python)); })) return 0;
  for (io::HFLoader loader : {io::HFLoader::Samebits, io::HFLoader::Mojolearn}) {
    std::optional<io::HFPlan> plan;
    if (!fuzz::accepted([&] { plan.emplace(io::plan_for(*config, "fuzz/config.json", loader)); })) continue;
    const io::HFPlan& p = *plan;
    fuzz::require(p.n_layers >= 1 && p.d_model >= 1 && p.vocab_size >= 1, "an accepted plan has a zero size");
    fuzz::require(p.n_layers <= 2147483647 && p.d_model <= 2147483647 && p.vocab_size <= 2147483647,
                  "an accepted plan has a size past 2**31 - 1");
    if (p.kind == io::HFKind::Transformer) {
      fuzz::require(p.block.n_heads * p.block.head_dim == p.d_model,
                    "heads * head_dim != hidden_size accepted");
      fuzz::require(p.block.n_kv_heads >= 1 && p.block.n_heads % p.block.n_kv_heads == 0,
                    "kv heads that do not divide the heads accepted");
      fuzz::require(p.block.head_dim % 2 == 0, "an odd head_dim accepted");
      fuzz::require(
          p.block.rope_dim == 0 || (p.block.rope_dim % 2 == 0 && p.block.rope_dim < p.block.head_dim),
          "a rope_dim the block cannot rotate accepted");
      if (loader == io::HFLoader::Mojolearn)
        fuzz::require(p.block.rope_scaling.empty() && p.block.rope_dim == 0 && !p.block.o_bias,
                      "upstream's loader accepted an option it refuses");
      fuzz::require(p.layer_type_windows.empty() ||
                        static_cast<std::int64_t>(p.layer_type_windows.size()) == p.n_layers,
                    "layer_types of the wrong length accepted");
    }
    for (std::int64_t i : {std::int64_t{0}, p.n_layers - 1})
      fuzz::require(p.window_of(i) >= 0, "a negative window accepted");
    std::int64_t rows_needed = 0;
    for (const io::HFTensorRef& ref : p.layer_weights(0)) {
      fuzz::require(p.is_planned(ref.name), "a layer tensor is not in the plan's own index");
      fuzz::require(!ref.sliced() || (0 <= ref.row_begin && ref.row_begin < ref.row_end),
                    "an empty row slice");
      if (ref.sliced()) rows_needed = ref.row_end > rows_needed ? ref.row_end : rows_needed;
    }
    fuzz::require(p.is_planned(p.embed_name) && p.is_planned(p.norm_name), "the ends are not in the index");
    fuzz::require(!p.is_planned("model.layers." + std::to_string(p.n_layers) + ".input_layernorm.weight") &&
                      !p.is_planned("backbone.layers." + std::to_string(p.n_layers) + ".norm.weight"),
                  "a layer past the count is in the index");
    const auto first = p.first_planned(5, [](const std::string&) { return true; });
    fuzz::require(first.size() == 5 || static_cast<std::int64_t>(first.size()) == p.planned_count(),
                  "first_planned lists fewer names than the plan has");
    for (const std::string& name : first)
      fuzz::require(p.is_planned(name), "a listed name is not in the index");
    fuzz::require(p.planned_count() >= 3, "a plan of fewer than three tensors");
  }
  return 0;
}
