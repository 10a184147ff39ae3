// The AVX2 vector vocabulary shared by every avx2 kernel TU. Include it ONLY inside an anonymous
// namespace of a translation unit compiled for avx2 (a *_avx2.cpp file), so no instantiation can leak
// into baseline code.
// The including file must have included <immintrin.h> and <cstdint> at global scope first.

struct Isa {
  using V = __m256;
  using I = __m256i;
  using M = __m256;  // all-ones / all-zeros lanes
  static constexpr int kLanes = 8;

  static V load(const float* p) { return _mm256_loadu_ps(p); }
  // The first `count` lanes from p (0 < count <= kLanes), +0.0 in the rest; nothing past them is read.
  static V load_first(const float* p, int count) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lanes));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static I set1i(std::int32_t x) { return _mm256_set1_epi32(x); }

  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V floor(V a) { return _mm256_floor_ps(a); }

  // Ordered quiet compares behave like the scalar C++ operators (false with a NaN operand).
  static M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M le(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
  static M gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static M ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static M eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static M unord(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
  static M not_lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_NLT_UQ); }
  static M mask_and(M a, M b) { return _mm256_and_ps(a, b); }
  static M mask_or(M a, M b) { return _mm256_or_ps(a, b); }
  // Whether every lane of a compares >= the same lane of b.
  static bool all_ge(V a, V b) { return _mm256_movemask_ps(ge(a, b)) == 0xFF; }

  // select(m, if_false, if_true)
  static V select(M m, V if_false, V if_true) { return _mm256_blendv_ps(if_false, if_true, m); }
  static I selecti(M m, I if_false, I if_true) {
    return _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(if_false), _mm256_castsi256_ps(if_true), m));
  }

  static I cast_i(V a) { return _mm256_castps_si256(a); }
  static V cast_f(I a) { return _mm256_castsi256_ps(a); }
  static I and_i(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_i(I a, I b) { return _mm256_or_si256(a, b); }
  static I xor_i(I a, I b) { return _mm256_xor_si256(a, b); }
  static I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub_i(I a, I b) { return _mm256_sub_epi32(a, b); }
  template <int N>
  static I srai(I a) {
    return _mm256_srai_epi32(a, N);
  }
  template <int N>
  static I srli(I a) {
    return _mm256_srli_epi32(a, N);
  }
  template <int N>
  static I slli(I a) {
    return _mm256_slli_epi32(a, N);
  }
  static M ieq(I a, I b) { return _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b)); }
  static M igt(I a, I b) { return _mm256_castsi256_ps(_mm256_cmpgt_epi32(a, b)); }
  static V cvt_f(I a) { return _mm256_cvtepi32_ps(a); }
  static I cvtt_i(V a) { return _mm256_cvttps_epi32(a); }  // 0x80000000 when out of range

  // Additions used by the GEMM and RMSNorm kernels.
  static V zero() { return _mm256_setzero_ps(); }
  // F: |x| < FLT_MIN keeps only the sign bit (zeros are unchanged by that; NaN compares false).
  static V flush(V x) {
    const V sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
    const V tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, x),
                                 _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000)), _CMP_LT_OQ);
    return _mm256_blendv_ps(x, _mm256_and_ps(x, sign), tiny);
  }
  // The GEMM's row widenings (docs/numerics.md §3.6), each exact, one panel row of 32 columns into out[0..4):
  // bfloat16 patterns as the float32 values they are the upper halves of; int8 codes as floats; 4-bit codes
  // (column c in the low nibble of byte c, column c + 16 in the high one) minus `bias`, as floats.
  // A bfloat16 row holds columns c and c + 16 in one 32-bit word (c in the low half): each 8-word load
  // gives 8 columns by a shift and the 8 columns 16 further on by a mask.
  static void widen_bf16_row(const std::uint16_t* p, V* out) {
    const __m256i high_halves = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int half = 0; half < 2; ++half) {
      const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * half));
      out[half] = _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
      out[2 + half] = _mm256_castsi256_ps(_mm256_and_si256(words, high_halves));
    }
  }
  static void widen_i8_row(const std::int8_t* p, V* out) {
    for (int v = 0; v < 4; ++v)
      out[v] = _mm256_cvtepi32_ps(
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * v))));
  }
  // kLanes fp16 values as float32, exactly (F16C, which the avx2 target requires).
  static V load_halves(const std::uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // Each zero-extended half row serves two output vectors: its low nibbles and its high ones.
  static void widen_nibble_row(const unsigned char* p, int bias, V* out) {
    const __m256i low_mask = _mm256_set1_epi32(15), biases = _mm256_set1_epi32(bias);
    for (int half = 0; half < 2; ++half) {
      const __m256i bytes =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * half)));
      out[half] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(bytes, low_mask), biases));
      out[2 + half] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bytes, 4), biases));
    }
  }
  // Lane i reads base[i * stride] (stride * (kLanes - 1) must fit in int32).
  static I lane_offsets(std::int64_t stride) {
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                              _mm256_set1_epi32(static_cast<int>(stride)));
  }
  static V gather(const float* base, I offsets) { return _mm256_i32gather_ps(base, offsets, 4); }

  // In-place 8x8 transpose: afterwards r[j] lane l holds what r[l] lane j held.
  static void transpose(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int k = 0; k < 4; ++k) {
      t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
      t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    // u[4k + j], 128-bit lane L: column 4L + j of rows 4k..4k+3.
    for (int k = 0; k < 2; ++k) {
      const __m256d t0 = _mm256_castps_pd(t[4 * k]), t1 = _mm256_castps_pd(t[4 * k + 1]);
      const __m256d t2 = _mm256_castps_pd(t[4 * k + 2]), t3 = _mm256_castps_pd(t[4 * k + 3]);
      u[4 * k] = _mm256_castpd_ps(_mm256_unpacklo_pd(t0, t2));
      u[4 * k + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(t0, t2));
      u[4 * k + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(t1, t3));
      u[4 * k + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(t1, t3));
    }
    for (int j = 0; j < 4; ++j) {
      r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
      r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
  }
};
