// SIMD bodies of the block_ops family (numerics/block_ops.hpp), shared by the AVX2 and AVX-512 TUs. Include
// inside a TU-unique anonymous namespace after the ISA's `struct Isa` and numerics/vector_math_impl.hpp
// (whose lane primitives equal the scalar ones bit for bit). As there, every branch of a scalar step list
// runs on all lanes and selects pick each lane's branch, so a lane's result is the scalar function's.

namespace ops_lit = samebits::block_ops::lit;

// erfc_ge1 for lanes with |a| >= 1 (other lanes compute something that is discarded).
inline V erfc_ge1_lanes(V a) {
  const V x = abs_of(a);
  const V z = negate(Isa::mul(x, x));
  const V ez = exp_lanes(z);
  const V q = div_flushed(splat(1.0f), x);
  const V y = Isa::mul(q, q);
  const V p = horner_lanes(
      y, {ops_lit::kErfcP0, ops_lit::kErfcP1, ops_lit::kErfcP2, ops_lit::kErfcP3, ops_lit::kErfcP4,
          ops_lit::kErfcP5, ops_lit::kErfcP6, ops_lit::kErfcP7, ops_lit::kErfcP8});
  const V r_poly = horner_lanes(y, {ops_lit::kErfcR0, ops_lit::kErfcR1, ops_lit::kErfcR2, ops_lit::kErfcR3,
                                    ops_lit::kErfcR4, ops_lit::kErfcR5, ops_lit::kErfcR6, ops_lit::kErfcR7});
  const V poly = Isa::select(Isa::lt(x, splat(2.0f)), r_poly, p);
  const V t = flush(Isa::mul(ez, q));
  V r = flush(Isa::mul(t, poly));
  const M negative = Isa::lt(a, splat(0.0f));
  r = Isa::select(negative, r, Isa::sub(splat(2.0f), r));
  const V underflow = Isa::select(negative, splat(0.0f), splat(2.0f));
  return Isa::select(Isa::lt(z, splat(ops_lit::kErfcUnderflow)), r, underflow);
}

inline V erf_lanes(V x_in) {
  const V x = flush(x_in);
  const V z = Isa::mul(x, x);
  const V p = horner_lanes(z, {ops_lit::kErfT0, ops_lit::kErfT1, ops_lit::kErfT2, ops_lit::kErfT3,
                               ops_lit::kErfT4, ops_lit::kErfT5, ops_lit::kErfT6});
  const V small = Isa::mul(x, p);
  const V large = Isa::sub(splat(1.0f), erfc_ge1_lanes(x));
  const V result = Isa::select(Isa::gt(abs_of(x), splat(1.0f)), small, large);
  return Isa::select(is_nan(x), result, x);
}

inline V gelu_erf_lanes(V x_in) {
  const V x = flush(x_in);
  const V e = erf_lanes(div_flushed(x, splat(ops_lit::kSqrt2)));
  const V s = Isa::add(splat(1.0f), e);
  const V h = flush(Isa::mul(x, splat(0.5f)));
  return Isa::select(is_nan(x), flush(Isa::mul(h, s)), x);
}

inline V gelu_tanh_lanes(V x_in) {
  const V x = flush(x_in);
  const V x2 = flush(Isa::mul(x, x));
  const V x3 = flush(Isa::mul(x2, x));
  const V cx = flush(Isa::mul(splat(ops_lit::kGeluCubic), x3));
  const V inner = flush(Isa::add(x, cx));
  const V arg = flush(Isa::mul(splat(ops_lit::kSqrt2OverPi), inner));
  const V s = Isa::add(splat(1.0f), tanh_lanes(arg));
  const V h = flush(Isa::mul(x, splat(0.5f)));
  return Isa::select(is_nan(x), flush(Isa::mul(h, s)), x);
}

void bias_add_vector(float* y, const float* b, std::size_t n) {
  std::size_t j = 0;
  for (; j + Isa::kLanes <= n; j += Isa::kLanes)
    Isa::store(y + j, flush(Isa::add(flush(Isa::load(y + j)), flush(Isa::load(b + j)))));
  if (j < n) samebits::block_ops::bias_add_reference(y + j, b + j, n - j);
}

// out = F(op(F(a), F(b))) lane by lane (op: add, mul, or SwiGLU's silu and product), the tail by the twin.
template <V (*Op)(V, V), void (*Twin)(const float*, const float*, float*, std::size_t)>
void binary_vector(const float* a, const float* b, float* out, std::size_t n) {
  std::size_t j = 0;
  for (; j + Isa::kLanes <= n; j += Isa::kLanes)
    Isa::store(out + j, flush(Op(flush(Isa::load(a + j)), flush(Isa::load(b + j)))));
  if (j < n) Twin(a + j, b + j, out + j, n - j);
}
inline V add_lanes(V a, V b) { return Isa::add(a, b); }
inline V mul_lanes(V a, V b) { return Isa::mul(a, b); }
inline V swiglu_lanes(V gate, V up) { return Isa::mul(flush(silu_lanes(gate)), up); }

void softcap_vector(float* s, std::size_t n, float cap) {
  const V c = splat(samebits::fp::F(cap));
  std::size_t j = 0;
  for (; j + Isa::kLanes <= n; j += Isa::kLanes)
    Isa::store(s + j, flush(Isa::mul(flush(tanh_lanes(div_flushed(Isa::load(s + j), c))), c)));
  if (j < n) samebits::block_ops::softcap_reference(s + j, n - j, cap);
}

// Isa::kLanes rows (stride d) side by side: each lane runs its row's two serial chains, then each row's
// output step runs along the row.
void layernorm_block(const float* x, const float* w, const float* b, float* y, std::int64_t d, float eps) {
  const auto offsets = Isa::lane_offsets(d);
  V acc = Isa::zero();
  for (std::int64_t j = 0; j < d; ++j) acc = flush(Isa::add(flush(acc), flush(Isa::gather(x + j, offsets))));
  const V mean = div_flushed(acc, splat(static_cast<float>(d)));
  V acc2 = Isa::zero();
  for (std::int64_t j = 0; j < d; ++j) {
    const V dev = flush(Isa::sub(flush(Isa::gather(x + j, offsets)), mean));
    acc2 = flush(Isa::fma(dev, dev, acc2));
  }
  alignas(64) float sums[Isa::kLanes];
  alignas(64) float means[Isa::kLanes];
  Isa::store(sums, acc2);
  Isa::store(means, mean);
  for (int r = 0; r < Isa::kLanes; ++r) {
    const float rstd = samebits::block_ops::detail::layernorm_rstd(sums[r], d, eps);
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const V mean_v = splat(means[r]);
    const V rstd_v = splat(rstd);
    std::int64_t j = 0;
    for (; j + Isa::kLanes <= d; j += Isa::kLanes) {
      const V dev = flush(Isa::sub(flush(Isa::load(xr + j)), mean_v));
      V out = flush(Isa::mul(flush(Isa::load(w + j)), flush(Isa::mul(dev, rstd_v))));
      if (b != nullptr) out = flush(Isa::add(out, flush(Isa::load(b + j))));
      Isa::store(yr + j, out);
    }
    for (; j < d; ++j) {
      using samebits::fp::F;
      const float dev = F(F(xr[j]) - means[r]);
      float out = F(samebits::fp::MUL(F(w[j]), F(samebits::fp::MUL(dev, rstd))));
      if (b != nullptr) out = F(F(out) + F(b[j]));
      yr[j] = out;
    }
  }
}

const samebits::block_ops::detail::Kernels kBlockOpsKernels{
    &array_kernel<gelu_erf_lanes>,
    &array_kernel<gelu_tanh_lanes>,
    &bias_add_vector,
    &softcap_vector,
    Isa::kLanes,
    &layernorm_block,
    &binary_vector<add_lanes, samebits::block_ops::residual_add_reference>,
    &binary_vector<mul_lanes, samebits::block_ops::gated_product_reference>,
    &binary_vector<swiglu_lanes, samebits::block_ops::swiglu_reference>,
};
