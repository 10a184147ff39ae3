// GEMM leaf kernels for the scalar target: the same tile template with one-lane "vectors".
// Used where no FMA-capable SIMD target is available (or when forced); every flush is applied.
#include <cstdint>
#include <samebits/lowbit.hpp>

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
  // The row widenings of docs/numerics.md §3.6, one column per "vector".
  static void widen_bf16_row(const std::uint16_t* p, V* out) {
    for (int c = 0; c < 16; ++c) {  // columns c and c + 16 share a 32-bit word, c in its low half
      out[c] = fp::from_bits(static_cast<std::uint32_t>(p[2 * c]) << 16);
      out[c + 16] = fp::from_bits(static_cast<std::uint32_t>(p[2 * c + 1]) << 16);
    }
  }
  static void widen_i8_row(const std::int8_t* p, V* out) {
    for (int c = 0; c < 32; ++c) out[c] = static_cast<float>(p[c]);
  }
  static V load_halves(const std::uint16_t* p) { return lowbit::f32_from_f16(*p); }
  static void widen_nibble_row(const unsigned char* p, int bias, V* out) {
    for (int c = 0; c < 16; ++c) {
      out[c] = static_cast<float>((p[c] & 15) - bias);
      out[c + 16] = static_cast<float>((p[c] >> 4) - bias);
    }
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
    s.f32_tile_rows = 2;
    fill_kernels<2>(s);
    for (LeafKernels& storage : s.storage)  // no flag trick without SIMD
      for (int r = 1; r <= 2; ++r) storage.fast[r] = storage.exact[r];
    return s;
  }();
  return set;
}

}  // namespace samebits::gemm::detail
