// RMSNorm kernels shared by the AVX2 and AVX-512 TUs. A block runs Isa::kLanes rows side by side, each lane
// its own row's serial sum of squares (never a split of one row's sum); lone rows run the same serial chain
// with the hardware FMA of this TU. The scaling step is elementwise, so it vectorizes along the row.
// Include inside a TU-unique namespace after defining `struct Isa`.

// F(MUL(F(w_j), F(MUL(F(x_j), rstd)))) along one row.
void scale_row(const float* xr, const float* w, float* yr, std::int64_t d, float rstd) {
  using samebits::fp::F;
  const typename Isa::V rstd_v = Isa::set1(rstd);
  std::int64_t j = 0;
  for (; j + Isa::kLanes <= d; j += Isa::kLanes) {
    const typename Isa::V scaled = Isa::flush(Isa::mul(Isa::flush(Isa::load(xr + j)), rstd_v));
    Isa::store(yr + j, Isa::flush(Isa::mul(Isa::flush(Isa::load(w + j)), scaled)));
  }
  for (; j < d; ++j) yr[j] = F(samebits::fp::MUL(F(w[j]), F(samebits::fp::MUL(F(xr[j]), rstd))));
}

// Why the flushes can stop: a sum of squares never decreases (x^2 >= 0 and rounding is monotone), so once
// the accumulator is at least FLT_MIN, F leaves every later one as it is; and a subnormal x then adds
// x^2 < 2^-252, less than half an ulp of the accumulator (>= 2^-150), so the FMA rounds back to the
// accumulator exactly as it does with F(x) = 0. From there the chain is a plain FMA chain, twice as fast
// serially as one with a flush on its path.
void rmsnorm_block(const float* x, const float* w, float* y, std::int64_t d, float eps) {
  using Vec = typename Isa::V;
  Vec acc = Isa::zero();
  const auto offsets = Isa::lane_offsets(d);
  const Vec flt_min = Isa::set1(samebits::fp::flt_min());
  std::int64_t j = 0;
  for (; j < d && !Isa::all_ge(acc, flt_min); ++j) {
    const Vec xj = Isa::flush(Isa::gather(x + j, offsets));
    acc = Isa::flush(Isa::fma(xj, xj, acc));
  }
  for (; j < d; ++j) {
    const Vec xj = Isa::gather(x + j, offsets);
    acc = Isa::fma(xj, xj, acc);
  }
  alignas(64) float sums[Isa::kLanes];
  Isa::store(sums, acc);
  for (int r = 0; r < Isa::kLanes; ++r)
    scale_row(x + r * d, w, y + r * d, d, samebits::rmsnorm::detail::rmsnorm_rstd(sums[r], d, eps));
}

void rmsnorm_rows(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t d, float eps) {
  using samebits::fp::F;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float acc = 0.0f;
    std::int64_t j = 0;
    for (; j < d && !(acc >= samebits::fp::flt_min()); ++j) {  // (see rmsnorm_block for why F can stop)
      const float xj = F(xr[j]);
      acc = F(samebits::fp::FMA(xj, xj, acc));  // one vfmadd here: this TU is compiled with FMA
    }
    for (; j < d; ++j) acc = samebits::fp::FMA(xr[j], xr[j], acc);
    scale_row(xr, w, y + r * d, d, samebits::rmsnorm::detail::rmsnorm_rstd(acc, d, eps));
  }
}
