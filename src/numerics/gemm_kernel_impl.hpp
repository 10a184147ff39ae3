// Leaf kernel template shared by the AVX2 and AVX-512 translation units. Include it inside a
// TU-unique namespace after defining `struct Isa` (vector type, lane count, load/store/fma/flush).
// Each output cell is its own serial FMA chain in ascending depth: SIMD runs across columns only.

// Rows x (Panels * 32) cells: panel q starts at panel + q * panel_stride; its partials go to
// out + q * kLeafStride + r * 32. Several panels side by side give skinny tiles (few rows) enough
// independent chains to hide the FMA latency; every cell's chain is unchanged.
template <int Rows, int Panels, bool Exact>
void leaf_kernel(const float* a, std::int64_t a_row, std::int64_t a_depth, const float* panel,
                 std::int64_t panel_stride, std::int64_t len, float* out) {
  constexpr int kVecs = 32 / Isa::kLanes;
  typename Isa::V acc[Rows][Panels * kVecs];
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Panels * kVecs; ++v) acc[r][v] = Isa::zero();
  for (std::int64_t step = 0; step < len; ++step) {
#if defined(SAMEBITS_SABOTAGE_REVERSED_LEAF)
    const std::int64_t q = len - 1 - step;  // test-only sabotage: the suite must catch this
#else
    const std::int64_t q = step;
#endif
    typename Isa::V a_lane[Rows];
    for (int r = 0; r < Rows; ++r) {
      float value = a[r * a_row + q * a_depth];
      if constexpr (Exact) value = samebits::fp::F(value);
      a_lane[r] = Isa::set1(value);
    }
    for (int v = 0; v < Panels * kVecs; ++v) {
      const float* b_row = panel + (v / kVecs) * panel_stride + q * 32;
      const typename Isa::V b = Isa::load(b_row + (v % kVecs) * Isa::kLanes);
      for (int r = 0; r < Rows; ++r) {
        acc[r][v] = Isa::fma(a_lane[r], b, acc[r][v]);
        if constexpr (Exact) acc[r][v] = Isa::flush(acc[r][v]);
      }
    }
  }
  constexpr std::int64_t kStride = samebits::gemm::detail::kLeafStride;
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Panels * kVecs; ++v)
      Isa::store(out + (v / kVecs) * kStride + r * 32 + (v % kVecs) * Isa::kLanes, Isa::flush(acc[r][v]));
}

// The fold runs level by level exactly as the twin's fold_partials, but on whole vectors of cells:
// node = F(left + right) (both operands are already flushed), an odd last node is carried unchanged.
void fold_tile(float* partials, std::int64_t leaves, std::int64_t leaf_stride, int rows, float* c,
               std::int64_t ldc, int cols) {
  const std::int64_t kStride = leaf_stride;
  std::int64_t count = leaves;
  while (count > 1) {
    std::int64_t next = 0;
    for (std::int64_t i = 0; i + 1 < count; i += 2, ++next) {
      const float* left = partials + i * kStride;
      const float* right = left + kStride;
      float* node = partials + next * kStride;
      for (int j = 0; j < rows * 32; j += Isa::kLanes)
        Isa::store(node + j, Isa::flush(Isa::add(Isa::load(left + j), Isa::load(right + j))));
    }
    if (count % 2 == 1) {
      const float* last = partials + (count - 1) * kStride;
      float* node = partials + next * kStride;
      for (int j = 0; j < rows * 32; j += Isa::kLanes) Isa::store(node + j, Isa::load(last + j));
      ++next;
    }
    count = next;
  }
  for (int r = 0; r < rows; ++r) {
    const float* root = partials + r * 32;  // already flushed: F(root) is the root itself
    float* out = c + r * ldc;
    for (int col = 0; col < cols; ++col) out[col] = root[col];
  }
}

template <int Rows>
void fill_kernels(samebits::gemm::detail::KernelSet& set) {
  set.fold = &fold_tile;
  if constexpr (Rows >= 1) {
    set.fast[Rows] = &leaf_kernel<Rows, 1, false>;
    set.exact[Rows] = &leaf_kernel<Rows, 1, true>;
    fill_kernels<Rows - 1>(set);
  }
}

template <int Rows, int Panels>
void fill_skinny_kernels(samebits::gemm::detail::KernelSet& set) {
  set.skinny_panels = Panels;
  if constexpr (Rows >= 1) {
    set.skinny_rows = set.skinny_rows > Rows ? set.skinny_rows : Rows;
    set.skinny_fast[Rows] = &leaf_kernel<Rows, Panels, false>;
    set.skinny_exact[Rows] = &leaf_kernel<Rows, Panels, true>;
    fill_skinny_kernels<Rows - 1, Panels>(set);
  }
}
