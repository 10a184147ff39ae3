// The bias-and-rotate loops of the Mamba-3 twin, shared by the twin (mamba3_kernels.cpp) and each SIMD
// target's table (mamba3_kernels_impl.hpp), which compiles the same loops for its ISA: they are elementwise
// (no chain), so the compiler's vectorization keeps every lane's operations and order. Include inside an
// anonymous namespace, after numerics/fp.hpp.

inline void bias_rotate_loops(const float* normed, const float* bias, const float* cosines,
                              const float* sines, std::int64_t pairs, std::int64_t n, float* biased,
                              float* rotated) {
  using fp::F;
  for (std::int64_t i = 0; i < n; ++i) biased[i] = F(F(normed[i]) + F(bias[i]));
  for (std::int64_t j = 0; j < pairs; ++j) {
    const float c = F(cosines[j]), s = F(sines[j]);
    const float v0 = biased[2 * j], v1 = biased[2 * j + 1];
    rotated[2 * j] = F(F(fp::MUL(v0, c)) - F(fp::MUL(v1, s)));
    rotated[2 * j + 1] = F(F(fp::MUL(v0, s)) + F(fp::MUL(v1, c)));
  }
  for (std::int64_t i = 2 * pairs; i < n; ++i) rotated[i] = biased[i];
}
