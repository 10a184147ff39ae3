// SIMD kernels of the causal conv and the Mamba-1 scan, shared by the AVX2 and AVX-512 TUs.
//
// Include only inside a TU-unique (anonymous) namespace, after "numerics/vector_math_impl.hpp" (which
// brings Isa, V, flush and exp_lanes / silu_lanes). Lanes are CHANNELS: every chain (the conv's four
// taps, the scan's recurrence over t and its y sum over s) runs serially inside its own lane, in the
// twin's order, so each lane computes exactly the scalar twin's value.

inline V flushed(V x) { return Isa::flush(x); }

std::int64_t conv4_silu_lanes(const samebits::selective_scan::Conv4Args& a, std::int64_t c0,
                              std::int64_t c1) {
  constexpr std::int64_t kLanes = Isa::kLanes;
  constexpr std::int64_t kTaps = samebits::selective_scan::kConvTaps;
  const std::int64_t end = c0 + (c1 - c0) / kLanes * kLanes;
  for (std::int64_t t = 0; t < a.rows; ++t) {
    const float* rows[kTaps];
    for (std::int64_t k = 0; k < kTaps; ++k) {
      const std::int64_t r = t + k - (kTaps - 1);
      rows[k] = r < 0 ? a.head + (r + kTaps - 1) * a.channels : a.body + r * a.body_stride;
    }
    float* out = a.out + t * a.out_stride;
    for (std::int64_t c = c0; c < end; c += kLanes) {
      V acc = flushed(Isa::load(a.bias + c));
      for (std::int64_t k = 0; k < kTaps; ++k) {
        const V w = flushed(Isa::load(a.weight_t + k * a.channels + c));
        acc = flushed(Isa::fma(w, flushed(Isa::load(rows[k] + c)), acc));
      }
      Isa::store(out + c, flushed(silu_lanes(acc)));
    }
  }
  return end;
}

// A and h are [channel][16 states]; lanes are channels, so each state's vector is a column: kLanes
// channel rows are loaded whole and transposed in registers (kLanes divides the 16 states).
constexpr int kStates = static_cast<int>(samebits::selective_scan::kScanStates);
static_assert(kStates % Isa::kLanes == 0, "the states split into whole lane tiles");

// out[s] lane l = rows[(d0 + l) * kStates + s].
inline void load_state_columns(const float* rows, std::int64_t d0, V out[kStates]) {
  for (int tile = 0; tile < kStates / Isa::kLanes; ++tile) {
    V r[Isa::kLanes];
    for (int l = 0; l < Isa::kLanes; ++l) r[l] = Isa::load(rows + (d0 + l) * kStates + tile * Isa::kLanes);
    Isa::transpose(r);
    for (int j = 0; j < Isa::kLanes; ++j) out[tile * Isa::kLanes + j] = r[j];
  }
}

// The inverse: rows[(d0 + l) * kStates + s] = columns[s] lane l.
inline void store_state_columns(const V columns[kStates], std::int64_t d0, float* rows) {
  for (int tile = 0; tile < kStates / Isa::kLanes; ++tile) {
    V r[Isa::kLanes];
    for (int j = 0; j < Isa::kLanes; ++j) r[j] = columns[tile * Isa::kLanes + j];
    Isa::transpose(r);
    for (int l = 0; l < Isa::kLanes; ++l) Isa::store(rows + (d0 + l) * kStates + tile * Isa::kLanes, r[l]);
  }
}

// One group of kLanes channels over every row. Without Flush the per-operation flushes are skipped (valid
// only when the MXCSR flags prove them inert, docs/numerics.md §6a); the values that leave (y, the final h)
// are flushed either way, since an exact subnormal result raises no flag. The final h is stored only when
// `keep` says the pass stands, so a flushing rerun starts from the same h.
template <bool Flush, typename Keep>
void scan_group(const samebits::selective_scan::ScanArgs& a, std::int64_t d0, const Keep& keep) {
  V A[kStates];
  V h[kStates];
  load_state_columns(a.A, d0, A);
  load_state_columns(a.h, d0, h);
  for (int s = 0; s < kStates; ++s) {
    A[s] = flushed(A[s]);
    h[s] = flushed(h[s]);
  }
  for (std::int64_t t = 0; t < a.rows; ++t) {
    const V uv = flush_if<Flush>(Isa::load(a.u + t * a.u_stride + d0));
    const V dl = flush_if<Flush>(Isa::load(a.delta + t * a.delta_stride + d0));
    const float* brow = a.B + t * a.bc_stride;
    const float* crow = a.C + t * a.bc_stride;
    for (int s = 0; s < kStates; ++s) {
      // exp_lanes returns +0.0 below FLT_MIN itself: its result needs no flush.
      const V dA = exp_lanes(flush_if<Flush>(Isa::mul(dl, A[s])));
      const V b = Isa::set1(Flush ? samebits::fp::F(brow[s]) : brow[s]);
      const V dB = flush_if<Flush>(Isa::mul(dl, b));
      const V dBu = flush_if<Flush>(Isa::mul(dB, uv));
      h[s] = flush_if<Flush>(Isa::fma(dA, h[s], dBu));
    }
    V y = Isa::zero();
    for (int s = 0; s < kStates; ++s) {
      const V c = Isa::set1(Flush ? samebits::fp::F(crow[s]) : crow[s]);
      y = flush_if<Flush>(Isa::fma(c, h[s], y));
    }
    Isa::store(a.y + t * a.y_stride + d0, flushed(y));
  }
  if (!keep()) return;
  for (int s = 0; s < kStates; ++s) h[s] = flushed(h[s]);
  store_state_columns(h, d0, a.h);
}

std::int64_t selective_scan_lanes(const samebits::selective_scan::ScanArgs& a, std::int64_t c0,
                                  std::int64_t c1) {
  constexpr std::int64_t kLanes = Isa::kLanes;
  const std::int64_t end = c0 + (c1 - c0) / kLanes * kLanes;
  samebits::mxcsr_flags::FlagScope flags;
  for (std::int64_t d0 = c0; d0 < end; d0 += kLanes) {
    flags.clear();
    bool stands = false;
    scan_group<false>(a, d0, [&] { return stands = !samebits::mxcsr_flags::FlagScope::subnormal_seen(); });
    if (!stands) scan_group<true>(a, d0, [] { return true; });
  }
  return end;
}

const samebits::selective_scan::detail::ScanKernels kScanKernels{&conv4_silu_lanes, &selective_scan_lanes};
