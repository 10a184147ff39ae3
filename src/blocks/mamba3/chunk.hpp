// The per-(batch row, head) chunk arithmetic shared by the Mamba-3 fast path and its reports: scratch,
// the open chunk's running sums (docs/blocks.md §3.3 steps 12-13) and the inter-chunk fold (step 15).
#pragma once

#include <cstdint>

#include "blocks/mamba3/mamba3.hpp"
#include "core/aligned_buffer.hpp"

namespace samebits::blocks::mamba3_chunk {

constexpr std::int64_t N = mamba3::kStateDim, P = mamba3::kHeadDim, Q = mamba3::kChunk, R = mamba3::kAngles;

// Per-thread scratch of one (batch row, head) schedule, reused across calls.
struct HeadScratch {
  AlignedBuffer<float> h_run{P * N}, kscale{Q * N}, v_chunk{Q * P}, vs{Q * P}, inc{P * N};
  AlignedBuffer<float> kscale_t{N * Q}, h_t{N * P};  // transposed copies packed row-major (a cheap pack)
  AlignedBuffer<float> lseg{Q * Q}, scores{Q * Q}, mixed{Q * Q}, y_intra{Q * P}, y_state{Q * P};
  AlignedBuffer<float> e_row{Q}, decay_in{Q}, z{Q * P}, silu_z{Q * P};
  float dacs[Q], colacc[Q], scale[Q];
};

// This thread's scratch (reused across calls).
HeadScratch& head_scratch();

// Appends row i (flushed adt a) to the running sums: dacs (step 12) and the column sums of Lseg's strict
// lower triangle (step 13: each column starts from +0.0 at the row below its diagonal). colacc may be null.
void extend_open_chunk(float* dacs, float* colacc, std::int64_t i, float a);

// Step 15 for one chunk of `real` rows: s.h_run <- F(FMA(F(expf(dl)), F(s.h_run), F(GEMM_TN(vs, kscale)))),
// with vs_i = v_rows[i] * expf(dl - dacs_i), kscale = s.kscale's first `real` rows and dl = s.dacs[63]
// (s.dacs padded past `real`).
void fold_rows(HeadScratch& s, const float* const* v_rows, std::int64_t real);

}  // namespace samebits::blocks::mamba3_chunk
