// One row of a register tile over the vector vocabulary `Isa` defined just before this file is included
// (no include guard: every kernel family includes it into its own namespace after its Isa).

// acc[v] = FMA(x, b[v], acc[v]) for v < N with x broadcast once. kExact flushes x first and each accumulator
// after its FMA (the F of every serial chain step, docs/numerics.md §3.2).
template <bool kExact, int N>
inline void fma_row(float x, const typename Isa::V* b, typename Isa::V* acc) {
  if constexpr (kExact) x = samebits::fp::F(x);
  const typename Isa::V lane = Isa::set1(x);
  for (int v = 0; v < N; ++v) {
    acc[v] = Isa::fma(lane, b[v], acc[v]);
    if constexpr (kExact) acc[v] = Isa::flush(acc[v]);
  }
}
