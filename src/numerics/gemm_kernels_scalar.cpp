// GEMM leaf kernels for the scalar target: the same tile template with one-lane "vectors".
// Used where no FMA-capable SIMD target is available (or when forced); every flush is applied.
#include <cstdint>

#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"

namespace samebits::gemm::detail {

namespace {

struct Isa {
  using Vec = float;
  static constexpr int kLanes = 1;
  static Vec zero() { return 0.0f; }
  static Vec broadcast(float x) { return x; }
  static Vec load(const float* p) { return *p; }
  static void store(float* p, Vec v) { *p = v; }
  static Vec add(Vec a, Vec b) { return a + b; }
  static Vec fma(Vec a, Vec b, Vec c) { return fp::FMA(a, b, c); }
  static Vec flush(Vec x) { return fp::F(x); }
};

#include "numerics/gemm_kernel_impl.hpp"

}  // namespace

const KernelSet& scalar_kernels() {
  static const KernelSet set = [] {
    KernelSet s{};
    s.tile_rows = 2;
    fill_kernels<2>(s);
    for (int r = 1; r <= 2; ++r) s.fast[r] = s.exact[r];  // no flag trick without SIMD
    return s;
  }();
  return set;
}

}  // namespace samebits::gemm::detail
