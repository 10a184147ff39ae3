// Kernels of the Mamba blocks' token mixers: the 4-tap causal depthwise conv + SiLU that feeds both
// selective scans (docs/blocks.md §1.3 step 5, §2.3 step 4) and the Mamba-1 selective scan
// (docs/blocks.md §1.3 step 9). Each has a literal scalar twin; the fast versions vectorize across channels
// (and, in the scan, every expf per (channel, state) runs in SIMD lanes of channels), never across the time
// recurrence or a chain.
#pragma once

#include <cstdint>

namespace samebits::selective_scan {

inline constexpr std::int64_t kConvTaps = 4;
inline constexpr std::int64_t kScanStates = 16;

// One batch row of the causal conv. For t < rows and channel c:
//   acc = F(bias[c]); for k = 0..3: acc = F(FMA(F(weight_t[k * channels + c]), F(v_k), acc));
//   out[t * out_stride + c] = F(silu(acc)),
// where v_k is input row r = t + k - 3: rows r < 0 are head[(r + 3) * channels + c] (the carried window,
// oldest first, 3 rows), rows r >= 0 are body[r * body_stride + c].
struct Conv4Args {
  const float* head;
  const float* body;
  std::int64_t body_stride;
  const float* weight_t;  // [4][channels]: tap-major
  const float* bias;      // [channels]
  float* out;
  std::int64_t out_stride;
  std::int64_t rows;
  std::int64_t channels;
};

// Channels [c0, c1) of every row. The twin walks one cell at a time with primitives::silu and fp::FMA.
void conv4_silu_reference(const Conv4Args& args, std::int64_t c0, std::int64_t c1);
void conv4_silu(const Conv4Args& args, std::int64_t c0, std::int64_t c1);

// The Mamba-1 scan of one batch row, channels d independent. h[s] = F(h_io[d * 16 + s]); for each row t
// in order: uv = F(u[t, d]), dl = F(delta[t, d]); for s = 0..15: dA = F(expf(F(MUL(dl, F(A[d, s]))))),
// dB = F(MUL(dl, F(B[t, s]))), dBu = F(MUL(dB, uv)), h[s] = F(FMA(dA, h[s], dBu)); then
// y = +0.0; for s = 0..15: y = F(FMA(F(C[t, s]), h[s], y)); y_out[t, d] = y. The final h goes back to h_io.
struct ScanArgs {
  const float* u;
  std::int64_t u_stride;
  const float* delta;
  std::int64_t delta_stride;
  const float* B;  // B[t * bc_stride + s]
  const float* C;  // C[t * bc_stride + s]
  std::int64_t bc_stride;
  const float* A;  // [channels][16]
  float* h;        // [channels][16], read and written
  float* y;
  std::int64_t y_stride;
  std::int64_t rows;
};

void selective_scan_reference(const ScanArgs& args, std::int64_t c0, std::int64_t c1);
void selective_scan(const ScanArgs& args, std::int64_t c0, std::int64_t c1);

namespace detail {
// Per-target kernels. Each handles whole lane groups of channels starting at c0 and returns the first
// channel it did not handle (the caller finishes the tail with the twin).
struct ScanKernels {
  std::int64_t (*conv4_silu)(const Conv4Args& args, std::int64_t c0, std::int64_t c1);
  std::int64_t (*selective_scan)(const ScanArgs& args, std::int64_t c0, std::int64_t c1);
};
const ScanKernels* scan_kernels_avx2();
const ScanKernels* scan_kernels_avx512();
}  // namespace detail

}  // namespace samebits::selective_scan
