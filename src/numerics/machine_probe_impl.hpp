// The machine-probe loops over one target's vector vocabulary (numerics/simd_kernels_impl.hpp includes it
// inside samebits::machine_probe::detail after `struct Isa`). Each returns a value that depends on every
// operation, so nothing is elided.

// acc <- acc * kDecay + kDrift has the fixed point 1, so every chain stays a normal number near 1 however
// long it runs (no overflow, no subnormal slow path).
constexpr float kDecay = 0.9999f;
constexpr float kDrift = 1.0e-4f;

// kFmaChains independent chains of Isa::kLanes lanes, `rounds` FMAs each.
float fma_rounds_vector(long long rounds) {
  const Isa::V decay = Isa::set1(kDecay);
  const Isa::V drift = Isa::set1(kDrift);
  Isa::V acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = Isa::set1(1.0f + 0.01f * static_cast<float>(c));
  for (long long r = 0; r < rounds; ++r)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = Isa::fma(acc[c], decay, drift);
  Isa::V sum = acc[0];
  for (int c = 1; c < kFmaChains; ++c) sum = Isa::add(sum, acc[c]);
  alignas(64) float lanes[Isa::kLanes];
  Isa::store(lanes, sum);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}

// The same chains one lane wide: the scalar FMA instruction (vfmadd231ss; this TU has FMA).
float fma_rounds_one_lane(long long rounds) {
  float acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = 1.0f + 0.01f * static_cast<float>(c);
  for (long long r = 0; r < rounds; ++r)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = fp::FMA(acc[c], kDecay, kDrift);
  float total = 0.0f;
  for (float value : acc) total += value;
  return total;
}

// OR of `words` 64-bit words. Four independent accumulators keep several loads in flight.
unsigned long long or_reduce_vector(const unsigned long long* data, std::size_t words) {
  constexpr std::size_t kWords = Isa::kLanes / 2;  // 64-bit words per vector
  const auto load = [](const unsigned long long* p) {
    return Isa::cast_i(Isa::load(reinterpret_cast<const float*>(p)));
  };
  Isa::I acc0 = Isa::set1i(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  std::size_t i = 0;
  for (; i + 4 * kWords <= words; i += 4 * kWords) {
    acc0 = Isa::or_i(acc0, load(data + i));
    acc1 = Isa::or_i(acc1, load(data + i + kWords));
    acc2 = Isa::or_i(acc2, load(data + i + 2 * kWords));
    acc3 = Isa::or_i(acc3, load(data + i + 3 * kWords));
  }
  alignas(64) unsigned long long lanes[kWords];
  const Isa::I acc = Isa::or_i(Isa::or_i(acc0, acc1), Isa::or_i(acc2, acc3));
  Isa::store(reinterpret_cast<float*>(lanes), Isa::cast_f(acc));
  unsigned long long total = 0;
  for (unsigned long long lane : lanes) total |= lane;
  for (; i < words; ++i) total |= data[i];
  return total;
}

const ProbeLoops kProbeLoops{Isa::kLanes, &fma_rounds_vector, &fma_rounds_one_lane, &or_reduce_vector};
