// AVX2 + FMA probe loops: scalar and 8-lane FMA chains, and a 256-bit streaming OR-reduction.
#include <immintrin.h>

#include "numerics/machine_probe.hpp"

namespace samebits::probe::detail {
namespace {

// acc <- acc * kDecay + kDrift has the fixed point 1, so every chain stays a normal number near 1
// however long it runs (no overflow, no subnormal slow path).
constexpr float kDecay = 0.9999f;
constexpr float kDrift = 1.0e-4f;

}  // namespace

float fma_rounds_scalar_fma(long long rounds) {
  const __m128 decay = _mm_set_ss(kDecay);
  const __m128 drift = _mm_set_ss(kDrift);
  __m128 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm_set_ss(1.0f + 0.01f * static_cast<float>(c));
  for (long long r = 0; r < rounds; ++r)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm_fmadd_ss(acc[c], decay, drift);
  float total = 0.0f;
  for (int c = 0; c < kFmaChains; ++c) total += _mm_cvtss_f32(acc[c]);
  return total;
}

float fma_rounds_avx2(long long rounds) {
  const __m256 decay = _mm256_set1_ps(kDecay);
  const __m256 drift = _mm256_set1_ps(kDrift);
  __m256 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(c));
  for (long long r = 0; r < rounds; ++r)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], decay, drift);
  __m256 sum = acc[0];
  for (int c = 1; c < kFmaChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

unsigned long long or_reduce_avx2(const unsigned long long* data, std::size_t words) {
  // Four independent accumulators keep several loads in flight; 16 words = 128 bytes per step.
  __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  std::size_t i = 0;
  for (; i + 16 <= words; i += 16) {
    acc0 = _mm256_or_si256(acc0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i)));
    acc1 = _mm256_or_si256(acc1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 4)));
    acc2 = _mm256_or_si256(acc2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 8)));
    acc3 = _mm256_or_si256(acc3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 12)));
  }
  const __m256i acc = _mm256_or_si256(_mm256_or_si256(acc0, acc1), _mm256_or_si256(acc2, acc3));
  alignas(32) unsigned long long lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  unsigned long long total = lanes[0] | lanes[1] | lanes[2] | lanes[3];
  for (; i < words; ++i) total |= data[i];
  return total;
}

}  // namespace samebits::probe::detail
