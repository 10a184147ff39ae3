// The per-element formulas of Mamba-3 (docs/blocks.md §3.3 steps 3, 7, 8, 9): shared by the twin and the fast
// path.
#pragma once

#include <bit>
#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"

namespace samebits::blocks::mamba3 {

// Literals, each checked against docs/numerics.md §A.
inline constexpr float kPi = std::bit_cast<float>(0x40490FDBu);
inline constexpr float kTwoPi = std::bit_cast<float>(0x40C90FDBu);
inline constexpr float kAFloor = 1e-4f;
inline constexpr float kNormEps = 1e-5f;
static_assert(std::bit_cast<std::uint32_t>(kAFloor) == 0x38D1B717u, "A floor differs from Appendix A");
static_assert(std::bit_cast<std::uint32_t>(kNormEps) == 0x3727C5ACu, "eps differs from Appendix A");

// Step 3: A = clamp(-heavy(dd_A), -inf, -A_floor), with heavy(x) = x >= 0 ? 1 + x : 1 / (1 - x).
inline float heavy_tail_a(float dd_a) {
  const float xa = fp::F(dd_a);
  const float ht = xa >= 0.0f ? fp::F(1.0f + xa) : fp::F(fp::DIV(1.0f, fp::F(1.0f - xa)));
  return fp::F(primitives::clamp(-ht, -std::bit_cast<float>(0x7F800000u), -kAFloor));
}

// Step 3: dt = softplus(dd_dt + dt_bias), no clamp.
inline float softplus_dt(float dd_dt, float dt_bias) {
  return fp::F(primitives::softplus(fp::F(fp::F(dd_dt) + fp::F(dt_bias))));
}

// Step 7: gamma_t = dt_t * sig_t and the trapezoid's shifted term beta'_t = dt_{t+1} (1 - sig_{t+1}).
inline float gamma_of(float dt, float sig) { return fp::F(fp::MUL(fp::F(dt), fp::F(sig))); }
inline float beta_prime_of(float dt_next, float sig_next) {
  return fp::F(fp::MUL(fp::F(dt_next), fp::F(1.0f - fp::F(sig_next))));
}

// Step 8: mod2pi(v) = FMA(-2pi, floor(DIV(v, 2pi)), v), flushed.
inline float mod_two_pi(float v) {
  return fp::F(fp::FMA(-kTwoPi, primitives::detail::floor(fp::DIV(v, kTwoPi)), v));
}

// Step 8: the angle rate of one token, a = tanh(angle_raw) * pi (shared by every head).
inline float angle_rate(float angle_raw) { return fp::F(fp::MUL(primitives::tanhf(fp::F(angle_raw)), kPi)); }

// Step 8: one recurrence step, run <- mod2pi(run + a * dt).
inline float angle_step(float run, float rate, float dt) {
  const float inc = fp::F(fp::MUL(rate, fp::F(dt)));
  return mod_two_pi(fp::F(run + inc));
}

}  // namespace samebits::blocks::mamba3
