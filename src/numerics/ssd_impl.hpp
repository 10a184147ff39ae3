// SIMD kernels of the SSD decode pieces, shared by the AVX2 and AVX-512 TUs.
//
// Include only inside a TU-unique (anonymous) namespace, after "numerics/vector_math_impl.hpp" (which
// brings Isa, V and exp_lanes). Lanes are independent output cells (GEMM columns, segsum columns, state
// entries); every chain stays serial inside its lane in the twin's order.

constexpr int kMaxLeaves = 8;

inline V flushed(V x) { return Isa::flush(x); }

// The balanced adjacent-pair fold of numerics.md 3.3 over per-lane leaf partials; F(root).
inline V fold_lanes(V* parts, int count) {
  while (count > 1) {
    int kept = 0;
    for (int i = 0; i + 1 < count; i += 2)
      parts[kept++] = flushed(Isa::add(flushed(parts[i]), flushed(parts[i + 1])));
    if (count % 2 == 1) parts[kept++] = parts[count - 1];
    count = kept;
  }
  return flushed(parts[0]);
}

inline bool leaves_fit(std::int64_t k, std::int64_t& leaf, int& leaves) {
  if (k <= 0) return false;
  leaf = samebits::gemm::leaf_length(k);
  const std::int64_t count = (k + leaf - 1) / leaf;
  if (count > kMaxLeaves) return false;
  leaves = static_cast<int>(count);
  return true;
}

// Up to kGroups groups of lanes run their chains side by side (independent cells, so the FMA latency of
// one chain hides behind the others); each cell's chain is still serial in ascending p.
constexpr int kGroups = 4;

// NN cells: lane group g of row p of B_eff comes from b_lanes(p, g) (columns j0 + g * lanes ..), each chain
// serial in ascending p. Groups G cover columns j0 .. j0 + G * lanes.
template <int G, typename BLanes>
void nn_cells_of(const float* a, std::int64_t k, std::int64_t leaf, int leaves, std::int64_t j0, float* out,
                 const BLanes& b_lanes) {
  V parts[G][kMaxLeaves];
  for (int t = 0; t < leaves; ++t) {
    V acc[G];
    for (int g = 0; g < G; ++g) acc[g] = Isa::zero();
    const std::int64_t end = k < (t + 1) * leaf ? k : (t + 1) * leaf;
    for (std::int64_t p = t * leaf; p < end; ++p) {
      const V ap = Isa::set1(samebits::fp::F(a[p]));
      for (int g = 0; g < G; ++g) acc[g] = flushed(Isa::fma(ap, b_lanes(p, g), acc[g]));
    }
    for (int g = 0; g < G; ++g) parts[g][t] = flushed(acc[g]);
  }
  for (int g = 0; g < G; ++g) Isa::store(out + j0 + g * Isa::kLanes, fold_lanes(parts[g], leaves));
}

// B_eff[p][j] = b[p * ldb + j], contiguous in j.
template <int G>
void nn_cells(const float* a, const float* b, std::int64_t ldb, std::int64_t k, std::int64_t leaf, int leaves,
              std::int64_t j0, float* out) {
  nn_cells_of<G>(a, k, leaf, leaves, j0, out, [&](std::int64_t p, int g) {
    return flushed(Isa::load(b + p * ldb + j0 + g * Isa::kLanes));
  });
}

// Discretized rows: B_eff[p][j] = F(MUL(F(rows[p][j]), scales[p])) for p < real, +0.0 past it; the product
// is formed in the lane exactly as scale_lanes forms it.
template <int G>
void nn_scaled_cells(const float* a, const float* const* rows, const float* scales, std::int64_t real,
                     std::int64_t k, std::int64_t leaf, int leaves, std::int64_t j0, float* out) {
  nn_cells_of<G>(a, k, leaf, leaves, j0, out, [&](std::int64_t p, int g) {
    if (p >= real) return Isa::zero();
    return flushed(Isa::mul(flushed(Isa::load(rows[p] + j0 + g * Isa::kLanes)), Isa::set1(scales[p])));
  });
}

// Calls run.template operator()<G>(j0) over the whole lane groups of n columns, kGroups at a time, then
// the remaining groups together; returns the columns covered.
template <typename Run>
std::int64_t lane_groups(std::int64_t n, const Run& run) {
  const std::int64_t groups = n / Isa::kLanes;
  std::int64_t g0 = 0;
  for (; g0 + kGroups <= groups; g0 += kGroups) run.template operator()<kGroups>(g0 * Isa::kLanes);
  switch (groups - g0) {
    case 3:
      run.template operator()<3>(g0 * Isa::kLanes);
      break;
    case 2:
      run.template operator()<2>(g0 * Isa::kLanes);
      break;
    case 1:
      run.template operator()<1>(g0 * Isa::kLanes);
      break;
    default:
      break;
  }
  return groups * Isa::kLanes;
}

std::int64_t row_gemm_nn_scaled_lanes(const float* a, const float* const* rows, const float* scales,
                                      std::int64_t real, std::int64_t n, std::int64_t k, float* out) {
  std::int64_t leaf = 0;
  int leaves = 0;
  if (!leaves_fit(k, leaf, leaves)) return 0;
  return lane_groups(n, [&]<int G>(std::int64_t j0) {
    nn_scaled_cells<G>(a, rows, scales, real, k, leaf, leaves, j0, out);
  });
}

// NT cells: B_eff[p][j] = b[j * ldb + p], a column of rows. Whole blocks of lanes x lanes are loaded
// row-wise and transposed in registers (Isa::transpose); the rest of a leaf is
// gathered. Either way lane j sees exactly its cell's operands in ascending p.
template <int G>
void nt_cells(const float* a, const float* b, std::int64_t ldb, std::int64_t k, std::int64_t leaf, int leaves,
              std::int64_t j0, float* out) {
  constexpr int kLanes = Isa::kLanes;
  const auto offsets = Isa::lane_offsets(ldb);
  V parts[G][kMaxLeaves];
  for (int t = 0; t < leaves; ++t) {
    V acc[G];
    for (int g = 0; g < G; ++g) acc[g] = Isa::zero();
    std::int64_t p = t * leaf;
    const std::int64_t stop = k < (t + 1) * leaf ? k : (t + 1) * leaf;
    for (; p + kLanes <= stop; p += kLanes) {
      V cols[G][kLanes];
      for (int g = 0; g < G; ++g) {
        const float* base = b + (j0 + g * kLanes) * ldb + p;
        for (int r = 0; r < kLanes; ++r) cols[g][r] = Isa::load(base + r * ldb);
        Isa::transpose(cols[g]);
      }
      for (int q = 0; q < kLanes; ++q) {
        const V ap = Isa::set1(samebits::fp::F(a[p + q]));
        for (int g = 0; g < G; ++g) acc[g] = flushed(Isa::fma(ap, flushed(cols[g][q]), acc[g]));
      }
    }
    for (; p < stop; ++p) {
      const V ap = Isa::set1(samebits::fp::F(a[p]));
      for (int g = 0; g < G; ++g)
        acc[g] =
            flushed(Isa::fma(ap, flushed(Isa::gather(b + (j0 + g * kLanes) * ldb + p, offsets)), acc[g]));
    }
    for (int g = 0; g < G; ++g) parts[g][t] = flushed(acc[g]);
  }
  for (int g = 0; g < G; ++g) Isa::store(out + j0 + g * kLanes, fold_lanes(parts[g], leaves));
}

// Whole lane groups of the n columns through Cells<G>::run.
template <template <int> class Cells>
std::int64_t row_groups(const float* a, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                        float* out) {
  std::int64_t leaf = 0;
  int leaves = 0;
  if (!leaves_fit(k, leaf, leaves) || ldb > (std::int64_t{1} << 26)) return 0;
  return lane_groups(n, [&]<int G>(std::int64_t j0) { Cells<G>::run(a, b, ldb, k, leaf, leaves, j0, out); });
}

template <int G>
struct NnCells {
  static void run(const float* a, const float* b, std::int64_t ldb, std::int64_t k, std::int64_t leaf,
                  int leaves, std::int64_t j0, float* out) {
    nn_cells<G>(a, b, ldb, k, leaf, leaves, j0, out);
  }
};

template <int G>
struct NtCells {
  static void run(const float* a, const float* b, std::int64_t ldb, std::int64_t k, std::int64_t leaf,
                  int leaves, std::int64_t j0, float* out) {
    nt_cells<G>(a, b, ldb, k, leaf, leaves, j0, out);
  }
};

std::int64_t row_gemm_nt_lanes(const float* a, const float* b, std::int64_t ldb, std::int64_t n,
                               std::int64_t k, float* out) {
  return row_groups<NtCells>(a, b, ldb, n, k, out);
}

std::int64_t row_gemm_nn_lanes(const float* a, const float* b, std::int64_t ldb, std::int64_t n,
                               std::int64_t k, float* out) {
  return row_groups<NnCells>(a, b, ldb, n, k, out);
}

std::int64_t scale_lanes(const float* x, float scale, float* out, std::int64_t n) {
  const V s = Isa::set1(scale);
  const std::int64_t end = n / Isa::kLanes * Isa::kLanes;
  for (std::int64_t e = 0; e < end; e += Isa::kLanes)
    Isa::store(out + e, flushed(Isa::mul(flushed(Isa::load(x + e)), s)));
  return end;
}

std::int64_t segsum_prefix_lanes(float* frontier, std::int64_t count, float dA_i, const float* g, float* mm) {
  const V dA = Isa::set1(dA_i);
  const std::int64_t end = count / Isa::kLanes * Isa::kLanes;
  for (std::int64_t j = 0; j < end; j += Isa::kLanes) {
    const V acc = flushed(Isa::add(Isa::load(frontier + j), dA));
    Isa::store(frontier + j, acc);
    const V seg = flushed(flushed(exp_lanes(acc)));
    Isa::store(mm + j, flushed(Isa::mul(flushed(Isa::load(g + j)), seg)));
  }
  return end;
}

std::int64_t chunk_pass_lanes(float scale, const float* h, const float* c, float* out, std::int64_t n) {
  const V s = Isa::set1(scale);
  const std::int64_t end = n / Isa::kLanes * Isa::kLanes;
  for (std::int64_t e = 0; e < end; e += Isa::kLanes)
    Isa::store(out + e, flushed(Isa::fma(s, flushed(Isa::load(h + e)), flushed(Isa::load(c + e)))));
  return end;
}

const samebits::ssd::detail::SsdKernels kSsdKernels{&row_gemm_nt_lanes,   &row_gemm_nn_lanes,
                                                    &segsum_prefix_lanes, &chunk_pass_lanes,
                                                    &scale_lanes,         &row_gemm_nn_scaled_lanes};
