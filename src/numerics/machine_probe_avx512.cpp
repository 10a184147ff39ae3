// AVX-512 probe loops: 16-lane FMA chains and a 512-bit streaming OR-reduction.
#include <immintrin.h>

#include "numerics/machine_probe.hpp"

namespace samebits::probe::detail {
namespace {

// Same stable recurrence as the AVX2 TU: fixed point 1, never overflows or goes subnormal.
constexpr float kDecay = 0.9999f;
constexpr float kDrift = 1.0e-4f;

}  // namespace

float fma_rounds_avx512(long long rounds) {
  const __m512 decay = _mm512_set1_ps(kDecay);
  const __m512 drift = _mm512_set1_ps(kDrift);
  __m512 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(c));
  for (long long r = 0; r < rounds; ++r)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], decay, drift);
  __m512 sum = acc[0];
  for (int c = 1; c < kFmaChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  // Stored and summed by hand: GCC 12's _mm512_reduce_* helpers warn about an undefined vector.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

unsigned long long or_reduce_avx512(const unsigned long long* data, std::size_t words) {
  // Four independent accumulators keep several loads in flight; 32 words = 256 bytes per step.
  __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  std::size_t i = 0;
  for (; i + 32 <= words; i += 32) {
    acc0 = _mm512_or_si512(acc0, _mm512_loadu_si512(data + i));
    acc1 = _mm512_or_si512(acc1, _mm512_loadu_si512(data + i + 8));
    acc2 = _mm512_or_si512(acc2, _mm512_loadu_si512(data + i + 16));
    acc3 = _mm512_or_si512(acc3, _mm512_loadu_si512(data + i + 24));
  }
  alignas(64) unsigned long long lanes[8];
  _mm512_store_si512(lanes, _mm512_or_si512(_mm512_or_si512(acc0, acc1), _mm512_or_si512(acc2, acc3)));
  unsigned long long total = 0;
  for (unsigned long long lane : lanes) total |= lane;
  for (; i < words; ++i) total |= data[i];
  return total;
}

}  // namespace samebits::probe::detail
