// The scalar twins of the causal conv and the Mamba-1 scan, and the dispatch to the SIMD kernels.
#include "numerics/selective_scan.hpp"

#include "numerics/fp.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::selective_scan {

using fp::F;
using fp::FMA;
using fp::MUL;

namespace {

const detail::ScanKernels* active_kernels() { return simd::kernels().selective_scan; }

}  // namespace

void conv4_silu_reference(const Conv4Args& a, std::int64_t c0, std::int64_t c1) {
  for (std::int64_t t = 0; t < a.rows; ++t) {
    for (std::int64_t c = c0; c < c1; ++c) {
      float acc = F(a.bias[c]);
      for (std::int64_t k = 0; k < kConvTaps; ++k) {
        const std::int64_t r = t + k - (kConvTaps - 1);
        const float v = r < 0 ? a.head[(r + kConvTaps - 1) * a.channels + c] : a.body[r * a.body_stride + c];
        acc = F(FMA(F(a.weight_t[k * a.channels + c]), F(v), acc));
      }
      a.out[t * a.out_stride + c] = F(primitives::silu(acc));
    }
  }
}

void conv4_silu(const Conv4Args& args, std::int64_t c0, std::int64_t c1) {
  if (const detail::ScanKernels* kernels = active_kernels()) c0 = kernels->conv4_silu(args, c0, c1);
  if (c0 < c1) conv4_silu_reference(args, c0, c1);
}

void selective_scan_reference(const ScanArgs& a, std::int64_t c0, std::int64_t c1) {
  for (std::int64_t d = c0; d < c1; ++d) {
    float h[kScanStates];
    for (std::int64_t s = 0; s < kScanStates; ++s) h[s] = F(a.h[d * kScanStates + s]);
    for (std::int64_t t = 0; t < a.rows; ++t) {
      const float uv = F(a.u[t * a.u_stride + d]);
      const float dl = F(a.delta[t * a.delta_stride + d]);
      for (std::int64_t s = 0; s < kScanStates; ++s) {
        const float dA = F(primitives::expf(F(MUL(dl, F(a.A[d * kScanStates + s])))));
        const float dB = F(MUL(dl, F(a.B[t * a.bc_stride + s])));
        const float dBu = F(MUL(dB, uv));
        h[s] = F(FMA(dA, h[s], dBu));
      }
      float y = 0.0f;
      for (std::int64_t s = 0; s < kScanStates; ++s) y = F(FMA(F(a.C[t * a.bc_stride + s]), h[s], y));
      a.y[t * a.y_stride + d] = y;
    }
    for (std::int64_t s = 0; s < kScanStates; ++s) a.h[d * kScanStates + s] = h[s];
  }
}

void selective_scan(const ScanArgs& args, std::int64_t c0, std::int64_t c1) {
  if (const detail::ScanKernels* kernels = active_kernels()) c0 = kernels->selective_scan(args, c0, c1);
  if (c0 < c1) selective_scan_reference(args, c0, c1);
}

}  // namespace samebits::selective_scan
