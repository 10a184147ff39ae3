// The vector body of finite_scan::all_finite, shared by finite_scan_avx2.cpp and finite_scan_avx512.cpp.
// Include it inside a TU-unique namespace after the ISA's `struct Isa` (numerics/isa_*.hpp).

// Four vectors per iteration keep several loads in flight; the verdict is one OR of "exponent all ones"
// masks, so a buffer is read exactly once and only the tail runs the scalar test.
bool all_finite_vector(const float* data, std::int64_t count) {
  using I = typename Isa::I;
  constexpr std::int64_t kLanes = Isa::kLanes;
  const I exponent = Isa::set1i(static_cast<std::int32_t>(samebits::fp::kInfBits));
  typename Isa::M bad = Isa::ieq(Isa::set1i(1), Isa::set1i(0));  // all false
  std::int64_t i = 0;
  for (; i + 4 * kLanes <= count; i += 4 * kLanes) {
    for (int v = 0; v < 4; ++v) {
      const I e = Isa::and_i(Isa::cast_i(Isa::load(data + i + v * kLanes)), exponent);
      bad = Isa::mask_or(bad, Isa::ieq(e, exponent));
    }
  }
  alignas(64) float flags[kLanes];
  Isa::store(flags, Isa::select(bad, Isa::zero(), Isa::set1(1.0f)));
  for (std::int64_t l = 0; l < kLanes; ++l)
    if (flags[l] != 0.0f) return false;
  return samebits::finite_scan::all_finite_reference(data + i, count - i);
}
