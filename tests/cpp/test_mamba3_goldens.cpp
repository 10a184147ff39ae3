// Upstream-recorded Mamba-3 digests (docs/goldens.md §4 and §4a, hashed fixtures): stateless forward,
// token-by-token decoding of the same slab, and one decode step after a prefill, by the twin and the fast
// path.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "blocks/mamba3/mamba3.hpp"
#include "golden_fixtures.hpp"
#include "numerics/fp.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using blocks::Mamba3Block;
using blocks::Mamba3State;
using blocks::Mamba3Weights;
using testing::golden_digest;

constexpr std::int64_t kB = 2, kL = 16, kD = 32;

// docs/goldens.md §3: w = hashed_uniform(size, 1, seed) * f32(1/4) + f32(-1/8), two roundings.
std::vector<float> golden_weight(std::size_t size, const std::string& seed) {
  std::vector<float> u = testing::hashed_uniform(size, 1, seed);
  for (float& v : u) {
    const float scaled = v * 0.25f;
    v = scaled + -0.125f;
  }
  return u;
}

// The mamba3 lane at d_model 32: "ones" sets all three norms to ones, "near" sets B/C norms to 1 + w.
Mamba3Block lane_block(bool near) {
  const auto specs = blocks::mamba3_tensors(blocks::Mamba3Dims::of(kD));
  Mamba3Weights w;
  for (int i = 0; i < blocks::kMamba3TensorCount; ++i) {
    const std::string name = specs[i].name;
    const auto size = static_cast<std::size_t>(specs[i].elements());
    const bool is_bc_norm = name == "B_norm.weight" || name == "C_norm.weight";
    if (name == "block_norm.weight" || (is_bc_norm && !near)) {
      w.tensors[i].assign(size, 1.0f);
    } else if (is_bc_norm) {
      w.tensors[i] = golden_weight(size, "mamba3:near_one:" + name);
      for (float& v : w.tensors[i]) v = 1.0f + v;
    } else {
      w.tensors[i] = golden_weight(size, "mamba3:" + name);
    }
  }
  return Mamba3Block(std::move(w));
}

std::vector<float> slab(int seed) {
  std::vector<float> draw = testing::hashed_draw(20000, 16, seed);
  draw.resize(kB * kL * kD);
  return draw;
}

using Forward = void (Mamba3Block::*)(const float*, std::int64_t, std::int64_t, Mamba3State&, float*,
                                      Mamba3Reports*, const char*) const;

std::string stateless_digest(const Mamba3Block& block, Forward fn, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  Mamba3State state = block.allocate_state(kB);
  (block.*fn)(x.data(), kB, kL, state, y.data(), nullptr, "mamba3_forward");
  return golden_digest({{y.data(), {kB, kL, kD}}});
}

// Token-by-token decode of the whole slab, reassembled as (B, L, d_model).
std::string decoded_digest(const Mamba3Block& block, Forward fn, const std::vector<float>& x) {
  std::vector<float> y(x.size()), token(kB * kD), out(kB * kD);
  Mamba3State state = block.allocate_state(kB);
  for (std::int64_t t = 0; t < kL; ++t) {
    for (std::int64_t b = 0; b < kB; ++b)
      std::copy_n(x.begin() + (b * kL + t) * kD, kD, token.begin() + b * kD);
    (block.*fn)(token.data(), kB, 1, state, out.data(), nullptr, "mamba3_decode_step");
    for (std::int64_t b = 0; b < kB; ++b)
      std::copy_n(out.begin() + b * kD, kD, y.begin() + (b * kL + t) * kD);
  }
  return golden_digest({{y.data(), {kB, kL, kD}}});
}

// docs/goldens.md §4a: prefill the training slab, then step token 0 of the slab again.
std::string decode_step_digest(const Mamba3Block& block, Forward fn, const std::vector<float>& x) {
  std::vector<float> y(x.size()), token(kB * kD), out(kB * kD);
  Mamba3State state = block.allocate_state(kB);
  (block.*fn)(x.data(), kB, kL, state, y.data(), nullptr, "mamba3_forward");
  for (std::int64_t b = 0; b < kB; ++b) std::copy_n(x.begin() + b * kL * kD, kD, token.begin() + b * kD);
  (block.*fn)(token.data(), kB, 1, state, out.data(), nullptr, "mamba3_decode_step");
  return golden_digest({{out.data(), {kB, 1, kD}}});
}

struct Lane {
  bool near;
  const char* forward_hashed;
  const char* step_hashed;  // nullptr: not recorded
};
const Lane kLanes[] = {{false, "c1862ccad54884ed", "0fae52bee974f5fa"}, {true, "b1a7d4ee34f199ba", nullptr}};

TEST(Mamba3Goldens, TwinReproducesHashedDigests) {
  for (const Lane& lane : kLanes) {
    const Mamba3Block block = lane_block(lane.near);
    const auto held_out = slab(1);
    EXPECT_EQ(stateless_digest(block, &Mamba3Block::forward_reference, held_out), lane.forward_hashed)
        << lane.near;
    EXPECT_EQ(decoded_digest(block, &Mamba3Block::forward_reference, held_out), lane.forward_hashed)
        << lane.near;
    if (lane.step_hashed) {
      EXPECT_EQ(decode_step_digest(block, &Mamba3Block::forward_reference, slab(0)), lane.step_hashed);
    }
  }
}

TEST(Mamba3Goldens, FastPathReproducesHashedDigestsOnEveryTargetAndThreadCount) {
  for (const Lane& lane : kLanes) {
    const Mamba3Block block = lane_block(lane.near);
    const auto held_out = slab(1), training = slab(0);
    testing::for_each_target_and_threads([&](const std::string& where) {
      EXPECT_EQ(stateless_digest(block, &Mamba3Block::forward, held_out), lane.forward_hashed) << where;
      EXPECT_EQ(decoded_digest(block, &Mamba3Block::forward, held_out), lane.forward_hashed) << where;
      if (lane.step_hashed) {
        EXPECT_EQ(decode_step_digest(block, &Mamba3Block::forward, training), lane.step_hashed) << where;
      }
    });
  }
}

TEST(Mamba3Goldens, NearLaneWeightCheck) {
  // docs/goldens.md §3: mamba3 near B_norm.weight[0:2] = 1.0229710340499878, 1.1091084480285645.
  std::vector<float> w = golden_weight(128, "mamba3:near_one:B_norm.weight");
  EXPECT_EQ(1.0f + w[0], 1.0229710340499878f);
  EXPECT_EQ(1.0f + w[1], 1.1091084480285645f);
}

}  // namespace
}  // namespace samebits
