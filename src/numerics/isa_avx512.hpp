// The AVX512 vector vocabulary shared by every avx512 kernel TU. Include it ONLY inside an anonymous
// namespace of a translation unit compiled for avx512 (a *_avx512.cpp file), so no instantiation can leak
// into baseline code.
// The including file must have included <immintrin.h> and <cstdint> at global scope first.

struct Isa {
  using V = __m512;
  using I = __m512i;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  // GCC 12's unmasked forms of several intrinsics (shifts, conversions, sqrt, roundscale, gather,
  // unpack, shuffle) merge into _mm512_undefined_*(), a self-initialised local that -Wuninitialized
  // reports once inlined (GCC PR 105593). Their all-lanes masked forms name a real merge source and
  // compile to the same instruction, so this vocabulary uses those.
  static constexpr M kAll = static_cast<M>(0xFFFF);
  static constexpr __mmask8 kAll8 = static_cast<__mmask8>(0xFF);  // the 8 double lanes

  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // The first `count` lanes from p (0 < count <= kLanes), +0.0 in the rest; nothing past them is read.
  static V load_first(const float* p, int count) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u), p);
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static I set1i(std::int32_t x) { return _mm512_set1_epi32(x); }

  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V sqrt(V a) { return _mm512_mask_sqrt_ps(a, kAll, a); }
  static V floor(V a) {
    return _mm512_mask_roundscale_ps(a, kAll, a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }

  // Ordered quiet compares behave like the scalar C++ operators (false with a NaN operand).
  static M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M le(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
  static M gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static M ge(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static M eq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M unord(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
  static M not_lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ); }
  static M mask_and(M a, M b) { return _kand_mask16(a, b); }
  static M mask_or(M a, M b) { return _kor_mask16(a, b); }
  // Whether every lane of a compares >= the same lane of b.
  static bool all_ge(V a, V b) { return ge(a, b) == static_cast<M>(0xFFFF); }

  // select(m, if_false, if_true)
  static V select(M m, V if_false, V if_true) { return _mm512_mask_blend_ps(m, if_false, if_true); }
  static I selecti(M m, I if_false, I if_true) { return _mm512_mask_blend_epi32(m, if_false, if_true); }

  static I cast_i(V a) { return _mm512_castps_si512(a); }
  static V cast_f(I a) { return _mm512_castsi512_ps(a); }
  static I and_i(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_i(I a, I b) { return _mm512_or_si512(a, b); }
  static I xor_i(I a, I b) { return _mm512_xor_si512(a, b); }
  static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int N>
  static I srai(I a) {
    return _mm512_mask_srai_epi32(a, kAll, a, N);
  }
  template <int N>
  static I srli(I a) {
    return _mm512_mask_srli_epi32(a, kAll, a, N);
  }
  template <int N>
  static I slli(I a) {
    return _mm512_mask_slli_epi32(a, kAll, a, N);
  }
  static M ieq(I a, I b) { return _mm512_cmpeq_epi32_mask(a, b); }
  static M igt(I a, I b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static V cvt_f(I a) { return _mm512_mask_cvtepi32_ps(_mm512_castsi512_ps(a), kAll, a); }
  // 0x80000000 when out of range
  static I cvtt_i(V a) { return _mm512_mask_cvttps_epi32(_mm512_castps_si512(a), kAll, a); }

  // Additions used by the GEMM and RMSNorm kernels.
  static V zero() { return _mm512_setzero_ps(); }
  // F: lanes classified as denormal keep only their sign bit.
  static V flush(V x) {
    const __mmask16 denormal = _mm512_fpclass_ps_mask(x, 0x20);
    return _mm512_mask_and_ps(x, denormal, x,
                              _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u))));
  }
  // The GEMM's row widenings (docs/numerics.md §3.6), each exact, one panel row of 32 columns into out[0..2):
  // bfloat16 patterns as the float32 values they are the upper halves of; int8 codes as floats; 4-bit codes
  // (column c in the low nibble of byte c, column c + 16 in the high one) minus `bias`, as floats.
  // A bfloat16 row holds columns c and c + 16 in one 32-bit word (c in the low half): one load, then a
  // shift for columns 0..15 and a mask for 16..31.
  static void widen_bf16_row(const std::uint16_t* p, V* out) {
    const I words = _mm512_loadu_si512(p);
    out[0] = cast_f(slli<16>(words));
    out[1] = cast_f(and_i(words, set1i(static_cast<std::int32_t>(0xFFFF0000u))));
  }
  static void widen_i8_row(const std::int8_t* p, V* out) {
    for (int v = 0; v < 2; ++v)
      out[v] = cvt_f(
          _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v))));
  }
  // kLanes fp16 values (finite) as float32, exactly.
  static V load_halves(const std::uint16_t* p) {
    return _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // One zero extension serves both halves, and vpermps, which reads only the low four bits of each index
  // lane, looks a nibble's float up in a 16-entry table: no mask, no subtraction, no conversion.
  static void widen_nibble_row(const unsigned char* p, int bias, V* out) {
    const V table = sub(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                        set1(static_cast<float>(bias)));
    const I bytes = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    out[0] = _mm512_mask_permutexvar_ps(table, kAll, bytes, table);
    out[1] = _mm512_mask_permutexvar_ps(table, kAll, srli<4>(bytes), table);
  }
  // Lane i reads base[i * stride] (stride * (kLanes - 1) must fit in int32).
  static I lane_offsets(std::int64_t stride) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(static_cast<int>(stride)));
  }
  static V gather(const float* base, I offsets) {
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), kAll, offsets, base, 4);
  }

  // In-place 16x16 transpose: afterwards r[j] lane l holds what r[l] lane j held.
  static void transpose(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int k = 0; k < 8; ++k) {
      t[2 * k] = _mm512_mask_unpacklo_ps(r[2 * k], kAll, r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm512_mask_unpackhi_ps(r[2 * k], kAll, r[2 * k], r[2 * k + 1]);
    }
    // u[4k + j], 128-bit lane L: column 4L + j of rows 4k..4k+3.
    for (int k = 0; k < 4; ++k) {
      const __m512d t0 = _mm512_castps_pd(t[4 * k]), t1 = _mm512_castps_pd(t[4 * k + 1]);
      const __m512d t2 = _mm512_castps_pd(t[4 * k + 2]), t3 = _mm512_castps_pd(t[4 * k + 3]);
      u[4 * k] = _mm512_castpd_ps(_mm512_mask_unpacklo_pd(t0, kAll8, t0, t2));
      u[4 * k + 1] = _mm512_castpd_ps(_mm512_mask_unpackhi_pd(t0, kAll8, t0, t2));
      u[4 * k + 2] = _mm512_castpd_ps(_mm512_mask_unpacklo_pd(t1, kAll8, t1, t3));
      u[4 * k + 3] = _mm512_castpd_ps(_mm512_mask_unpackhi_pd(t1, kAll8, t1, t3));
    }
    for (int j = 0; j < 4; ++j) {
      const __m512 x0 = _mm512_mask_shuffle_f32x4(u[j], kAll, u[j], u[4 + j], 0x88),
                   y0 = _mm512_mask_shuffle_f32x4(u[j], kAll, u[j], u[4 + j], 0xDD);
      const __m512 x1 = _mm512_mask_shuffle_f32x4(u[8 + j], kAll, u[8 + j], u[12 + j], 0x88);
      const __m512 y1 = _mm512_mask_shuffle_f32x4(u[8 + j], kAll, u[8 + j], u[12 + j], 0xDD);
      r[j] = _mm512_mask_shuffle_f32x4(x0, kAll, x0, x1, 0x88);
      r[4 + j] = _mm512_mask_shuffle_f32x4(y0, kAll, y0, y1, 0x88);
      r[8 + j] = _mm512_mask_shuffle_f32x4(x0, kAll, x0, x1, 0xDD);
      r[12 + j] = _mm512_mask_shuffle_f32x4(y0, kAll, y0, y1, 0xDD);
    }
  }
};
