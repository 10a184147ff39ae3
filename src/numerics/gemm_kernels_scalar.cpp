// GEMM leaf kernels for the scalar target: the same tile template with one-lane "vectors".
// Used where no FMA-capable SIMD target is available (or when forced); every flush is applied.
#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"

namespace samebits::gemm::detail {

namespace {

struct Isa {
  using V = float;
  static constexpr int kLanes = 1;
  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V load_bf16(const std::uint16_t* p) { return fp::from_bits(static_cast<std::uint32_t>(*p) << 16); }
  static V load_i8(const std::int8_t* p) { return static_cast<float>(*p); }
  static V load_nibbles(const unsigned char* p, bool high, int bias) {
    return static_cast<float>((high ? *p >> 4 : *p & 15) - bias);
  }
  static V fma(V a, V b, V c) { return fp::FMA(a, b, c); }
  static V flush(V x) { return fp::F(x); }
};

#include "numerics/gemm_kernel_impl.hpp"

}  // namespace

const KernelSet& scalar_kernels() {
  static const KernelSet set = [] {
    KernelSet s{};
    s.tile_rows = 2;
    fill_kernels<2>(s);
    for (LeafKernels& storage : s.storage)  // no flag trick without SIMD
      for (int r = 1; r <= 2; ++r) storage.fast[r] = storage.exact[r];
    return s;
  }();
  return set;
}

}  // namespace samebits::gemm::detail
