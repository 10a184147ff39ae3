// Rotary position embedding of docs/blocks.md §4.3 steps 3-4: the inverse frequencies, the per-position
// cos/sin table (a literal twin and an array-kernel builder with the same bits) and the rotate-half.
#pragma once

#include <cstdint>
#include <vector>

namespace samebits::rope {

// inv[i] = F(DIV(1, powf(theta, F(DIV(2i, rope_dim))))) for i < rope_dim / 2.
std::vector<float> inverse_frequencies(std::int64_t rope_dim, float theta);

// The frequency scalings of the transformer options (docs/models.md §3). Values are float32 as the options
// carry them; `original` is original_max_position_embeddings.
enum class Scaling { kNone = 0, kLinear = 1, kLlama3 = 2 };
struct ScalingParams {
  Scaling kind = Scaling::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  std::int64_t original = 8192;
};
// inverse_frequencies(rope_dim, theta), then linear (inv / factor) or llama3 (per-wavelength: long
// wavelengths divided by factor, medium ones blended with two rounded products and one plain add).
std::vector<float> inverse_frequencies(std::int64_t rope_dim, float theta, const ScalingParams& scaling);

// The largest table angle F(MUL((float)(positions - 1), F(inv[i]))) and its column (the first one on a
// tie); the table is refused when that angle is >= kAngleDomain (the sin/cos reduction's domain).
struct LargestAngle {
  float angle;
  std::int64_t column;
};
LargestAngle largest_angle(const std::vector<float>& inv, std::int64_t positions);
inline constexpr float kAngleDomain = 8192.0f;

// cos/sin rows for positions [0, positions): entry [p][i] = F(cosf(angle)), F(sinf(angle)) with
// angle = F(MUL((float) p, F(inv[i]))). Every entry depends only on (p, i), never on the table size.
class Table {
 public:
  Table() = default;
  // The literal twin: one primitives:: call per entry.
  static Table build_reference(const std::vector<float>& inv, std::int64_t positions);
  // The same bits through the dispatched vector_math::sin / vector_math::cos array kernels.
  static Table build(const std::vector<float>& inv, std::int64_t positions);

  std::int64_t positions() const { return positions_; }
  std::int64_t half() const { return half_; }
  const float* cos_row(std::int64_t position) const { return cos_.data() + position * half_; }
  const float* sin_row(std::int64_t position) const { return sin_.data() + position * half_; }
  const std::vector<float>& cos_values() const { return cos_; }
  const std::vector<float>& sin_values() const { return sin_; }

 private:
  std::int64_t positions_ = 0;
  std::int64_t half_ = 0;
  std::vector<float> cos_;
  std::vector<float> sin_;
};

// Rotates `heads` consecutive head vectors of width head_dim at `data` in place, at one position whose
// cos/sin rows are given (half = rope_dim / 2 entries each): for j < half rot = -F(a[j + half]), for
// half <= j < rope_dim rot = F(a[j - half]); out_j = F(F(MUL(F(a_j), c)) + F(MUL(rot, s))) with c, s at
// column j mod half. Columns j >= rope_dim are flushed copies.
void rotate_heads(float* data, std::int64_t heads, std::int64_t head_dim, std::int64_t rope_dim,
                  const float* cos_row, const float* sin_row);

}  // namespace samebits::rope
