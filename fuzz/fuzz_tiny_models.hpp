// The tiny models of the state harnesses (fuzz_state, fuzz_state_file): one of each block kind and a
// [mamba3, attention] Samba stack, built once from right weight dicts.
#pragma once

#include <optional>
#include <samebits/mamba.hpp>
#include <samebits/mamba3.hpp>
#include <samebits/samba.hpp>
#include <samebits/transformer.hpp>
#include <utility>
#include <vector>

#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"
#include "fuzz_weights_support.hpp"
#include "models/samba_config.hpp"

namespace samebits::fuzz {

// The right dict for a table of (name, shape): every tensor present, shaped and valued as a model wants.
template <typename Table>
WeightDict right_dict(const Table& table) {
  WeightDict dict;
  for (const auto& t : table) {
    std::vector<float> values(static_cast<std::size_t>(claimed_floats(t.shape)));
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = default_value(t.name, static_cast<std::int64_t>(i));
    dict.add(t.name, t.shape, std::move(values));
  }
  return dict;
}

struct Models {
  std::optional<TransformerBlockInference> full, windowed;  // window 0 and window 2
  std::optional<Mamba1BlockInference> m1;
  std::optional<Mamba2BlockInference> m2;
  std::optional<Mamba3BlockInference> m3;
  std::optional<SambaInference> samba;  // [mamba3, attention], vocab 3, d_model 32
};

inline const Models& tiny_models() {
  static const Models built = [] {
    Models m;
    blocks::TransformerDims dims{4, 2, 1, 2, 4, 0};
    m.full.emplace(right_dict(blocks::transformer_tensors(dims)).views, TransformerOptions{2, 1, 2, 0});
    m.windowed.emplace(right_dict(blocks::transformer_tensors(dims)).views, TransformerOptions{2, 1, 2, 2});
    m.m1.emplace(right_dict(blocks::mamba1_tensors(blocks::Mamba1Dims::for_d_model(2))).views);
    m.m2.emplace(right_dict(blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(32))).views);
    m.m3.emplace(right_dict(blocks::mamba3_tensors(blocks::Mamba3Dims::of(32))).views);
    models::SambaConfigArgs args;
    args.vocab = 3;
    args.d_model = 32;
    args.layers = {"mamba3", "attention"};
    args.n_heads = 2;
    args.intermediate = 4;
    models::SambaConfig config(args);
    std::vector<WeightSpec> specs;
    for (const auto& entry : config.registry().entries) specs.push_back({entry.name, entry.shape});
    m.samba.emplace(config, right_dict(specs).views);
    return m;
  }();
  return built;
}

}  // namespace samebits::fuzz
