// SIMD bodies of the Mamba-3 array kernels, shared by mamba3_kernels_avx2.cpp and mamba3_kernels_avx512.cpp.
//
// Include it only from those translation units, INSIDE a TU-unique (anonymous) namespace, after the ISA's
// `struct Isa` (numerics/isa_*.hpp). Every lane runs exactly the scalar twin's
// operations in the twin's order (real FMA instructions, the same flushes, or none where the MXCSR flags
// prove them inert); vectors run across independent outputs only, never across a chain's own index.

using V = Isa::V;
using I = Isa::I;
constexpr std::int64_t kLanes = Isa::kLanes;

inline V splat_bits(std::uint32_t pattern) {
  return Isa::cast_f(Isa::set1i(static_cast<std::int32_t>(pattern)));
}

// The chain step: acc = F(FMA(F(a), F(b_eff), acc)) with b_eff = F(MUL(F(b), scale)) when scaled. Without
// Flush the same operations run unflushed (valid only when mxcsr_flags::run_exact's flags prove every flush
// inert, docs/numerics.md §6a).
template <bool Flush, bool Scaled>
inline V chain_step(V a, V b, V scale, V acc) {
  if constexpr (Flush) {
    V be = Isa::flush(b);
    if constexpr (Scaled) be = Isa::flush(Isa::mul(be, scale));
    return Isa::flush(Isa::fma(Isa::flush(a), be, acc));
  } else {
    if constexpr (Scaled) b = Isa::mul(b, scale);
    return Isa::fma(a, b, acc);
  }
}

inline float chain_step_scalar(float a, float b, const float* scale, float acc) {
  float be = fp::F(b);
  if (scale != nullptr) be = fp::F(fp::MUL(be, *scale));
  return fp::F(fp::FMA(fp::F(a), be, acc));
}

// Loads kLanes consecutive floats of each lane's row and transposes them: out[j] lane l = rows[l][p0 + j].
inline void load_transposed(const float* const* rows, std::int64_t p0, V out[kLanes]) {
  for (int l = 0; l < kLanes; ++l) out[l] = Isa::load(rows[l] + p0);
  Isa::transpose(out);
}

// G groups of kLanes rows advance together (independent chains hide the FMA latency). Lane l of group g
// runs row first + g * kLanes + l; rows past `rows` repeat the last row and are not stored.
template <int G, bool Flush, bool Scaled>
void dot_chain_groups(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                      const float* b_scale, std::int64_t first, std::int64_t rows, std::int64_t len,
                      float* out) {
  const float* a_rows[G][kLanes];
  const float* b_rows[G][kLanes];
  alignas(64) float scales[G][kLanes] = {};
  for (int g = 0; g < G; ++g)
    for (int l = 0; l < kLanes; ++l) {
      std::int64_t r = first + g * kLanes + l;
      if (r >= rows) r = rows - 1;
      a_rows[g][l] = a + r * a_stride;
      b_rows[g][l] = b + r * b_stride;
      if constexpr (Scaled) scales[g][l] = b_scale[r];
    }
  V acc[G], scale[G];
  for (int g = 0; g < G; ++g) {
    acc[g] = Isa::zero();
    scale[g] = Isa::load(scales[g]);
  }
  std::int64_t p0 = 0;
  for (; p0 + kLanes <= len; p0 += kLanes) {
    for (int g = 0; g < G; ++g) {
      V bt[kLanes], at[kLanes];
      load_transposed(b_rows[g], p0, bt);
      if (a_stride == 0) {
        for (int j = 0; j < kLanes; ++j) at[j] = Isa::set1(a[p0 + j]);
      } else {
        load_transposed(a_rows[g], p0, at);
      }
      for (int j = 0; j < kLanes; ++j) acc[g] = chain_step<Flush, Scaled>(at[j], bt[j], scale[g], acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) {
    alignas(64) float lanes[kLanes];
    Isa::store(lanes, Isa::flush(acc[g]));
    for (int l = 0; l < kLanes; ++l) {
      const std::int64_t r = first + g * kLanes + l;
      if (r >= rows) break;
      float c = lanes[l];
      for (std::int64_t p = p0; p < len; ++p)  // the last len % kLanes steps, lane by lane
        c = chain_step_scalar(a_rows[g][l][p], b_rows[g][l][p], Scaled ? &scales[g][l] : nullptr, c);
      out[r] = fp::F(c);
    }
  }
}

template <bool Flush, bool Scaled>
void dot_chains_pass(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                     const float* b_scale, std::int64_t rows, std::int64_t len, float* out) {
  std::int64_t r = 0;
  for (; r + kLanes < rows; r += 2 * kLanes)
    dot_chain_groups<2, Flush, Scaled>(a, a_stride, b, b_stride, b_scale, r, rows, len, out);
  if (r < rows) dot_chain_groups<1, Flush, Scaled>(a, a_stride, b, b_stride, b_scale, r, rows, len, out);
}

template <bool Scaled>
void dot_chains_any(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                    const float* b_scale, std::int64_t rows, std::int64_t len, float* out) {
  if (rows <= 0) return;
  samebits::mxcsr_flags::run_exact([&]<bool Flush>() {
    dot_chains_pass<Flush, Scaled>(a, a_stride, b, b_stride, b_scale, rows, len, out);
  });
}

void dot_chains_simd(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                     std::int64_t rows, std::int64_t len, float* out) {
  dot_chains_any<false>(a, a_stride, b, b_stride, nullptr, rows, len, out);
}

void scaled_dot_chains_simd(const float* a, const float* b, std::int64_t b_stride, const float* b_scale,
                            std::int64_t rows, std::int64_t len, float* out) {
  dot_chains_any<true>(a, 0, b, b_stride, b_scale, rows, len, out);
}

// Runs run.template operator()<B>(c) once, for B = blocks (0 < blocks <= Max): the switch over the
// remaining whole vectors, with B a constant so that each caller's accumulators stay in registers.
template <int Max, typename Run>
void run_blocks(int blocks, std::int64_t c, const Run& run) {
  if constexpr (Max > 0) {
    if (blocks == Max)
      run.template operator()<Max>(c);
    else
      run_blocks<Max - 1>(blocks, c, run);
  }
}

// Calls run.template operator()<B>(c) over the whole vectors of n lanes, Max at a time, then the remaining
// ones together; returns the lanes covered.
template <int Max, typename Run>
std::int64_t vector_blocks(std::int64_t n, const Run& run) {
  std::int64_t c = 0;
  for (; c + Max * kLanes <= n; c += Max * kLanes) run.template operator()<Max>(c);
  run_blocks<Max - 1>(static_cast<int>((n - c) / kLanes), c, run);
  return n / kLanes * kLanes;
}

// G groups of kLanes rows starting at r0 advance together, the right rows stored transposed: lane l of
// group g runs row r0 + g * kLanes + l, whose operand at step p is b_t[p * stride + row] (one load per
// group and step, no transposes). The broadcast a[p] is flushed in both passes (it sits off the chain).
// Partial (G = 1): only the first `valid` lanes are read and stored.
template <int G, bool Flush, bool Partial = false>
void transposed_chain_groups(const float* a, const float* b_t, std::int64_t stride, const float* b_scale,
                             std::int64_t r0, std::int64_t len, float* out, int valid = kLanes) {
  auto load = [=](const float* at) {  // [=]: `valid` is captured only where Partial reads it
    if constexpr (Partial) return Isa::load_first(at, valid);
    return Isa::load(at);
  };
  V acc[G], scale[G];
  for (int g = 0; g < G; ++g) {
    acc[g] = Isa::zero();
    scale[g] = load(b_scale + r0 + g * kLanes);
  }
  for (std::int64_t p = 0; p < len; ++p) {
    const V ap = Isa::set1(fp::F(a[p]));
    const float* row = b_t + p * stride + r0;
    for (int g = 0; g < G; ++g)
      acc[g] = chain_step<Flush, true>(ap, load(row + g * kLanes), scale[g], acc[g]);
  }
  if constexpr (Partial) {
    alignas(64) float cells[kLanes];
    Isa::store(cells, Isa::flush(acc[0]));
    for (int l = 0; l < valid; ++l) out[r0 + l] = cells[l];
  } else {
    for (int g = 0; g < G; ++g) Isa::store(out + r0 + g * kLanes, Isa::flush(acc[g]));
  }
}

// Four groups at a time, then the remaining whole groups, then the last rows as a partial group.
template <bool Flush>
void transposed_chains_pass(const float* a, const float* b_t, std::int64_t stride, const float* b_scale,
                            std::int64_t rows, std::int64_t len, float* out) {
  const std::int64_t r = vector_blocks<4>(rows, [&]<int G>(std::int64_t r0) {
    transposed_chain_groups<G, Flush>(a, b_t, stride, b_scale, r0, len, out);
  });
  if (r < rows)
    transposed_chain_groups<1, Flush, true>(a, b_t, stride, b_scale, r, len, out, static_cast<int>(rows - r));
}

void scaled_dot_chains_transposed_simd(const float* a, const float* b_t, std::int64_t stride,
                                       const float* b_scale, std::int64_t rows, std::int64_t len,
                                       float* out) {
  if (rows <= 0) return;
  if (len > 128) {  // outside the documented range (one leaf): the twin's loop
    samebits::mamba3_kernels::scaled_dot_chains_transposed_reference(a, b_t, stride, b_scale, rows, len, out);
    return;
  }
  samebits::mxcsr_flags::run_exact(
      [&]<bool Flush>() { transposed_chains_pass<Flush>(a, b_t, stride, b_scale, rows, len, out); });
}

// Blocks vectors of outputs starting at column c advance together, one independent chain per lane. Blocks is
// a template parameter so that the accumulators stay in registers.
template <bool Flush, int Blocks>
void axpy_chain_block(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                      std::int64_t c, float* out) {
  V acc[Blocks];
  for (int u = 0; u < Blocks; ++u) acc[u] = Isa::zero();
  for (std::int64_t p = 0; p < k; ++p) {
    const V xv = Isa::set1(x[p * x_stride]);
    const float* row = rows[p] + c;
    for (int u = 0; u < Blocks; ++u)
      acc[u] = chain_step<Flush, false>(xv, Isa::load(row + u * kLanes), xv, acc[u]);
  }
  for (int u = 0; u < Blocks; ++u) Isa::store(out + c + u * kLanes, Isa::flush(acc[u]));
}

// Up to eight vectors of outputs at a time; the last columns (n mod lanes) lane by lane.
template <bool Flush>
void axpy_chains_pass(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                      std::int64_t n, float* out) {
  std::int64_t c = vector_blocks<8>(n, [&]<int Blocks>(std::int64_t c0) {
    axpy_chain_block<Flush, Blocks>(x, x_stride, rows, k, c0, out);
  });
  for (; c < n; ++c) {
    float acc = 0.0f;
    for (std::int64_t p = 0; p < k; ++p) acc = chain_step_scalar(x[p * x_stride], rows[p][c], nullptr, acc);
    out[c] = fp::F(acc);
  }
}

void axpy_chains_simd(const float* x, std::int64_t x_stride, const float* const* rows, std::int64_t k,
                      std::int64_t n, float* out) {
  samebits::mxcsr_flags::run_exact(
      [&]<bool Flush>() { axpy_chains_pass<Flush>(x, x_stride, rows, k, n, out); });
}

void angle_scan_simd(float* run, std::int64_t lanes, const float* rates, std::int64_t rate_stride,
                     const float* dt, std::int64_t dt_stride, std::int64_t steps, float* out,
                     std::int64_t out_stride) {
  const V two_pi = splat_bits(0x40C90FDBu);
  const V minus_two_pi = splat_bits(0xC0C90FDBu);
  std::int64_t r = 0;
  for (; r + kLanes <= lanes; r += kLanes) {
    V value = Isa::load(run + r);
    for (std::int64_t s = 0; s < steps; ++s) {
      const V dts = Isa::flush(Isa::set1(dt[s * dt_stride]));
      const V inc = Isa::flush(Isa::mul(Isa::load(rates + s * rate_stride + r), dts));
      const V v = Isa::flush(Isa::add(value, inc));
      const V turns = Isa::flush(Isa::div(v, two_pi));  // DIV: v and 2pi are already flushed
      value = Isa::flush(Isa::fma(minus_two_pi, Isa::floor(turns), v));
      Isa::store(out + s * out_stride + r, value);
    }
    Isa::store(run + r, value);
  }
  for (; r < lanes; ++r) {  // the same steps one lane at a time
    float value = run[r];
    for (std::int64_t s = 0; s < steps; ++s) {
      const float inc = fp::F(fp::MUL(rates[s * rate_stride + r], fp::F(dt[s * dt_stride])));
      const float v = fp::F(value + inc);
      const float turns = fp::DIV(v, fp::from_bits(0x40C90FDBu));
      value = fp::F(fp::FMA(fp::from_bits(0xC0C90FDBu), primitives::detail::floor(turns), v));
      out[s * out_stride + r] = value;
    }
    run[r] = value;
  }
}

void scaled_copy_simd(const float* src, float scale, float* dst, std::int64_t n) {
  const V s = Isa::set1(scale);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    Isa::store(dst + i, Isa::flush(Isa::mul(Isa::flush(Isa::load(src + i)), s)));
  for (; i < n; ++i) dst[i] = fp::F(fp::MUL(fp::F(src[i]), scale));
}

void gate_row_simd(const float* y_state, const float* y_intra, float e, float tv, const float* v,
                   const float* silu_z, float* gate, std::int64_t n) {
  const V ev = Isa::set1(e), tvv = Isa::set1(tv);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V ys = Isa::flush(Isa::mul(Isa::flush(Isa::load(y_state + i)), ev));
    const V y0 = Isa::flush(Isa::add(ys, Isa::load(y_intra + i)));
    const V skip = Isa::flush(Isa::add(y0, Isa::flush(Isa::mul(tvv, Isa::flush(Isa::load(v + i))))));
    Isa::store(gate + i, Isa::flush(Isa::mul(skip, Isa::flush(Isa::load(silu_z + i)))));
  }
  for (; i < n; ++i) {
    const float ys = fp::F(fp::MUL(fp::F(y_state[i]), e));
    const float y0 = fp::F(ys + y_intra[i]);
    const float skip = fp::F(y0 + fp::F(fp::MUL(tv, fp::F(v[i]))));
    gate[i] = fp::F(fp::MUL(fp::F(skip), fp::F(silu_z[i])));
  }
}

// The twin's bias-and-rotate loops, compiled for this ISA (bias_rotate_loops).
#include "numerics/mamba3_bias_rotate_impl.hpp"

void decay_accumulate_simd(float* h, float decay, const float* inc, std::int64_t n) {
  const V scale = Isa::set1(decay);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    Isa::store(h + i,
               Isa::flush(Isa::fma(scale, Isa::flush(Isa::load(h + i)), Isa::flush(Isa::load(inc + i)))));
  for (; i < n; ++i) h[i] = fp::F(fp::FMA(decay, fp::F(h[i]), fp::F(inc[i])));
}

const detail::Kernels kIsaKernels{
    &dot_chains_simd,  &scaled_dot_chains_simd, &scaled_dot_chains_transposed_simd,
    &axpy_chains_simd, &angle_scan_simd,        &scaled_copy_simd,
    &gate_row_simd,    &bias_rotate_loops,      &decay_accumulate_simd};
