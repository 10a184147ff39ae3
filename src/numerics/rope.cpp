// RoPE: inverse frequencies, the cos/sin table (twin and array-kernel builder) and the rotate-half.
#include "numerics/rope.hpp"

#include <vector>

#include "numerics/block_ops.hpp"
#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/vector_math.hpp"

namespace samebits::rope {

using fp::DIV;
using fp::F;
using fp::MUL;

std::vector<float> inverse_frequencies(std::int64_t rope_dim, float theta) {
  const std::int64_t half = rope_dim / 2;
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    const float e = F(DIV(static_cast<float>(2 * i), static_cast<float>(rope_dim)));
    inv[static_cast<std::size_t>(i)] = F(DIV(1.0f, primitives::powf(theta, e)));
  }
  return inv;
}

std::vector<float> inverse_frequencies(std::int64_t rope_dim, float theta, const ScalingParams& scaling) {
  std::vector<float> inv = inverse_frequencies(rope_dim, theta);
  if (scaling.kind == Scaling::kLinear) {
    const float f = F(scaling.factor);
    for (float& value : inv) value = F(DIV(value, f));
  } else if (scaling.kind == Scaling::kLlama3) {
    const float f = F(scaling.factor), lo = F(scaling.low_freq_factor), hi = F(scaling.high_freq_factor);
    const float old = static_cast<float>(scaling.original);
    const float low_wavelength = F(DIV(old, lo));
    const float high_wavelength = F(DIV(old, hi));
    for (float& value : inv) {
      const float wavelength = F(DIV(block_ops::lit::kTwoPi, value));
      float scaled = wavelength > low_wavelength ? F(DIV(value, f)) : value;
      const bool medium = !(wavelength < high_wavelength) && !(wavelength > low_wavelength);
      if (medium) {
        const float ratio = F(DIV(old, wavelength));
        const float num = F(ratio - lo);
        const float den = F(hi - lo);
        const float s = F(DIV(num, den));
        const float one_minus = F(1.0f - s);
        float t1 = F(MUL(one_minus, scaled));
        t1 = F(DIV(t1, f));
        const float t2 = F(MUL(s, scaled));
        scaled = F(F(t1) + F(t2));  // two rounded products, one plain add: no FMA
      }
      value = scaled;
    }
  }
  return inv;
}

LargestAngle largest_angle(const std::vector<float>& inv, std::int64_t positions) {
  LargestAngle worst{0.0f, 0};
  const float last = static_cast<float>(positions - 1);
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const float angle = F(MUL(last, F(inv[i])));
    if (angle > worst.angle) worst = {angle, static_cast<std::int64_t>(i)};
  }
  return worst;
}

namespace {
// The angle of entry (p, i); shared by both builders so they can only differ in sin/cos.
inline float angle_of(std::int64_t position, float inv) {
  return F(MUL(static_cast<float>(position), F(inv)));
}
}  // namespace

Table Table::build_reference(const std::vector<float>& inv, std::int64_t positions) {
  Table table;
  table.positions_ = positions;
  table.half_ = static_cast<std::int64_t>(inv.size());
  const std::size_t count = static_cast<std::size_t>(positions * table.half_);
  table.cos_.resize(count);
  table.sin_.resize(count);
  for (std::int64_t p = 0; p < positions; ++p) {
    for (std::int64_t i = 0; i < table.half_; ++i) {
      const float angle = angle_of(p, inv[static_cast<std::size_t>(i)]);
      table.cos_[static_cast<std::size_t>(p * table.half_ + i)] = F(primitives::cosf(angle));
      table.sin_[static_cast<std::size_t>(p * table.half_ + i)] = F(primitives::sinf(angle));
    }
  }
  return table;
}

Table Table::build(const std::vector<float>& inv, std::int64_t positions) {
  Table table;
  table.positions_ = positions;
  table.half_ = static_cast<std::int64_t>(inv.size());
  const std::size_t count = static_cast<std::size_t>(positions * table.half_);
  std::vector<float> angles(count);
  for (std::int64_t p = 0; p < positions; ++p)
    for (std::int64_t i = 0; i < table.half_; ++i)
      angles[static_cast<std::size_t>(p * table.half_ + i)] = angle_of(p, inv[static_cast<std::size_t>(i)]);
  table.cos_.resize(count);
  table.sin_.resize(count);
  vector_math::cos(angles.data(), table.cos_.data(), count);
  vector_math::flush(table.cos_.data(), table.cos_.data(), count);
  vector_math::sin(angles.data(), table.sin_.data(), count);
  vector_math::flush(table.sin_.data(), table.sin_.data(), count);
  return table;
}

void rotate_heads(float* data, std::int64_t heads, std::int64_t head_dim, std::int64_t rope_dim,
                  const float* cos_row, const float* sin_row) {
  const std::int64_t half = rope_dim / 2;
  thread_local std::vector<float> original;  // one head's flushed inputs (outputs overwrite them)
  original.resize(static_cast<std::size_t>(head_dim));
  for (std::int64_t h = 0; h < heads; ++h) {
    float* a = data + h * head_dim;
    for (std::int64_t j = 0; j < head_dim; ++j) original[static_cast<std::size_t>(j)] = F(a[j]);
    const float* f = original.data();
    // a[j] = F(F(MUL(f[j], cos[c])) + F(MUL(rot[j], sin[c]))) with c = j mod half and rotate_half's rot:
    // -f[j + half] in the first half (a sign flip taken before the product), f[j - half] in the second. The
    // halves are two branch-free loops so that the compiler runs them in vector lanes; each cell's steps
    // are unchanged.
    for (std::int64_t j = 0; j < half; ++j)
      a[j] = F(F(MUL(f[j], cos_row[j])) + F(MUL(-f[j + half], sin_row[j])));
    for (std::int64_t j = half; j < rope_dim; ++j)
      a[j] = F(F(MUL(f[j], cos_row[j - half])) + F(MUL(f[j - half], sin_row[j - half])));
    for (std::int64_t j = rope_dim; j < head_dim; ++j) a[j] = f[j];
  }
}

}  // namespace samebits::rope
