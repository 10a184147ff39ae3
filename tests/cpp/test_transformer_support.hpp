// Shared fixtures of the transformer tests: deterministic blocks of a given shape and their inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "test_support.hpp"

namespace samebits::testing {

struct BlockShape {
  std::int64_t d_model, n_heads, n_kv_heads, intermediate, window;
  std::string label() const {
    return "dm " + std::to_string(d_model) + " heads " + std::to_string(n_heads) + "/" +
           std::to_string(n_kv_heads) + " it " + std::to_string(intermediate) + " window " +
           std::to_string(window);
  }
};

// Owned weight arrays plus the named views the constructor takes.
struct BlockWeights {
  std::vector<std::vector<float>> values;
  TransformerBlockInference::NamedWeights named;
};

inline BlockWeights random_weights(const BlockShape& s, std::uint64_t seed) {
  blocks::TransformerDims d{s.d_model,      s.n_heads, s.n_kv_heads, s.d_model / s.n_heads,
                            s.intermediate, s.window};
  Rng rng(seed);
  BlockWeights w;
  const auto tensors = blocks::transformer_tensors(d);
  w.values.reserve(tensors.size());
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (auto e : t.shape) n *= e;
    if (t.shape.size() == 1) {  // norms near one
      std::vector<float> v(static_cast<std::size_t>(n));
      for (auto& x : v) x = 1.0f + 0.125f * rng.uniform();
      w.values.push_back(v);
    } else {
      w.values.push_back(rng.uniform_vector(static_cast<std::size_t>(n), 0.25f));
    }
  }
  for (std::size_t i = 0; i < tensors.size(); ++i)
    w.named.push_back({tensors[i].name, {w.values[i].data(), tensors[i].shape}});
  return w;
}

inline TransformerBlockInference make_block(const BlockShape& s, std::uint64_t seed) {
  BlockWeights w = random_weights(s, seed);
  TransformerOptions options;
  options.n_heads = s.n_heads;
  options.n_kv_heads = s.n_kv_heads;
  options.window = s.window;
  return TransformerBlockInference(w.named, options);
}

// x (B, L, d_model) with a few exact zeros of both signs mixed in.
inline std::vector<float> random_tokens(std::int64_t batch, std::int64_t length, std::int64_t d_model,
                                        std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(batch * length * d_model), 2.0f);
  for (std::size_t i = 5; i < x.size(); i += 37) x[i] = (i / 37) % 2 ? 0.0f : -0.0f;
  return x;
}

// Token t of every row of x (B, L, d_model), as a (B, 1, d_model) input.
inline std::vector<float> tokens_at(const std::vector<float>& x, std::int64_t batch, std::int64_t length,
                                    std::int64_t dm, std::int64_t t) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < batch; ++b)
    out.insert(out.end(), x.begin() + (b * length + t) * dm, x.begin() + (b * length + t + 1) * dm);
  return out;
}

}  // namespace samebits::testing
