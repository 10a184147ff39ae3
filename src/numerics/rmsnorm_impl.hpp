// RMSNorm row-block kernel shared by the AVX2 and AVX-512 TUs: Isa::kLanes rows side by side, each
// lane running its own row's serial sum of squares (never a split of one row's sum).
// Include inside a TU-unique namespace after defining `struct Isa`.

void rmsnorm_block(const float* x, const float* w, float* y, std::int64_t d, float eps) {
  using Vec = typename Isa::V;
  Vec acc = Isa::zero();
  const auto offsets = Isa::lane_offsets(d);
  for (std::int64_t j = 0; j < d; ++j) {
    const Vec xj = Isa::flush(Isa::gather(x + j, offsets));
    acc = Isa::flush(Isa::fma(xj, xj, acc));
  }
  alignas(64) float sums[Isa::kLanes];
  Isa::store(sums, acc);
  for (int r = 0; r < Isa::kLanes; ++r) {
    const float rstd = samebits::norm::detail::rmsnorm_rstd(sums[r], d, eps);
    const Vec rstd_v = Isa::set1(rstd);
    const float* xr = x + r * d;
    float* yr = y + r * d;
    std::int64_t j = 0;
    for (; j + Isa::kLanes <= d; j += Isa::kLanes) {
      const Vec scaled = Isa::flush(Isa::mul(Isa::flush(Isa::load(xr + j)), rstd_v));
      Isa::store(yr + j, Isa::flush(Isa::mul(Isa::flush(Isa::load(w + j)), scaled)));
    }
    for (; j < d; ++j) {
      using samebits::fp::F;
      yr[j] = F(samebits::fp::MUL(F(w[j]), F(samebits::fp::MUL(F(xr[j]), rstd))));
    }
  }
}
