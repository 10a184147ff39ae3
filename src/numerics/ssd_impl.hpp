// SIMD kernels of the SSD decode pieces, shared by the AVX2 and AVX-512 TUs.
//
// Include only inside a TU-unique (anonymous) namespace, after "numerics/vector_math_impl.hpp" (which
// brings Isa, V and exp_lanes). Lanes are independent output cells (GEMM columns, segsum columns, state
// entries); every chain stays serial inside its lane in the twin's order.

constexpr int kMaxLeaves = 8;

inline V flushed(V x) { return Isa::flush(x); }

// The balanced adjacent-pair fold of docs/numerics.md §3.3 over per-lane leaf partials; F(root).
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

// Chain values go through flush_if: flushed after every operation in the flushing pass, left alone in the
// pass that the MXCSR flags vouch for (mxcsr_flags::run_exact). Leaf partials and results are flushed in both
// passes, and so is the broadcast a[p], which sits off the chain (a tiny Mm entry then never forces the
// flushing pass).

using samebits::mxcsr_flags::run_exact;

// Where the rows of B_eff from `stop` on are all +0.0, a chain's steps there are FMA(F(a[p]), +0.0, acc):
// for finite a[p] they leave a nonzero chain alone and turn a -0.0 chain into +0.0 exactly when some a[p]
// has a clear sign bit (+0.0 product), which a single add of +0.0 reproduces; a chain that starts there
// stays +0.0. Lifts[t] tells whether leaf t's skipped steps hold such an a[p]. Returns false (run every
// step) when a skipped a[p] is not finite.
inline bool zero_tail(const float* a, std::int64_t k, std::int64_t stop, std::int64_t leaf, int leaves,
                      bool* lifts) {
  for (int t = 0; t < leaves; ++t) {
    const std::int64_t leaf_end = k < (t + 1) * leaf ? k : (t + 1) * leaf;
    bool lift = false, non_finite = false;
    for (std::int64_t p = stop > t * leaf ? stop : t * leaf; p < leaf_end; ++p) {
      const std::uint32_t bits = samebits::fp::bits(a[p]);
      non_finite |= (bits & 0x7F800000u) == 0x7F800000u;
      lift |= (bits & samebits::fp::kSignMask) == 0;
    }
    if (non_finite) return false;
    lifts[t] = lift;
  }
  return true;
}

// NN cells over the first `real` rows of B: lane group g of row p of B_eff is b[p * ldb + j0 + g * lanes ..]
// for p < real and +0.0 past it (never read), each chain serial in ascending p. Groups G cover columns
// j0 .. j0 + G * lanes. Steps from `stop` on are skipped as zero_tail describes (stop == k: none).
template <int G, bool kFlush>
void nn_rows_cells(const float* a, const float* b, std::int64_t ldb, std::int64_t real, std::int64_t k,
                   std::int64_t stop, const bool* lifts, std::int64_t leaf, int leaves, std::int64_t j0,
                   float* out) {
  const float* const cols = b + j0;
  // One step of a leaf's chains at row p.
  auto step = [a, cols, ldb, real](V(&acc)[G], std::int64_t p) {
    const V ap = Isa::set1(samebits::fp::F(a[p]));
    if (p < real) {
      const float* row = cols + p * ldb;
      for (int g = 0; g < G; ++g)
        acc[g] = flush_if<kFlush>(Isa::fma(ap, flush_if<kFlush>(Isa::load(row + g * Isa::kLanes)), acc[g]));
    } else {
      for (int g = 0; g < G; ++g) acc[g] = flush_if<kFlush>(Isa::fma(ap, Isa::zero(), acc[g]));
    }
  };
  auto leaf_end = [&](int t) { return k < (t + 1) * leaf ? k : (t + 1) * leaf; };
  // Where leaf t's steps end: its last row, or `stop`.
  auto run_end = [&](int t) {
    const std::int64_t to = leaf_end(t) < stop ? leaf_end(t) : stop;
    return to > t * leaf ? to : t * leaf;
  };
  V parts[G][kMaxLeaves];
  // Leaf t's partials once its steps ran: then the skipped zero rows' one lift (zero_tail).
  auto finish = [&](V(&acc)[G], int t) {
    if (run_end(t) < leaf_end(t) && lifts[t])
      for (int g = 0; g < G; ++g) acc[g] = Isa::add(acc[g], Isa::zero());
    for (int g = 0; g < G; ++g) parts[g][t] = flushed(acc[g]);
  };
  // Two leaves at a time: their chains are independent, so running them side by side keeps twice as many
  // chains in flight; each chain still takes its own steps in ascending p.
  int t = 0;
  for (; t + 2 <= leaves; t += 2) {
    V first[G], second[G];
    for (int g = 0; g < G; ++g) first[g] = second[g] = Isa::zero();
    const std::int64_t b0 = t * leaf, b1 = (t + 1) * leaf;
    const std::int64_t e0 = run_end(t), e1 = run_end(t + 1);
    // A later leaf never runs more steps than an earlier one (only the last leaf and `stop` cut them).
    const std::int64_t both = e1 - b1;
    for (std::int64_t i = 0; i < both; ++i) {
      step(first, b0 + i);
      step(second, b1 + i);
    }
    for (std::int64_t p = b0 + both; p < e0; ++p) step(first, p);
    finish(first, t);
    finish(second, t + 1);
  }
  if (t < leaves) {
    V last[G];
    for (int g = 0; g < G; ++g) last[g] = Isa::zero();
    const std::int64_t e = run_end(t);
    for (std::int64_t p = t * leaf; p < e; ++p) step(last, p);
    finish(last, t);
  }
  for (int g = 0; g < G; ++g) Isa::store(out + j0 + g * Isa::kLanes, fold_lanes(parts[g], leaves));
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

std::int64_t row_gemm_nn_rows_lanes(const float* a, const float* b, std::int64_t ldb, std::int64_t real,
                                    std::int64_t n, std::int64_t k, float* out) {
  std::int64_t leaf = 0;
  int leaves = 0;
  if (!leaves_fit(k, leaf, leaves)) return 0;
  bool lifts[kMaxLeaves];
  const std::int64_t stop = zero_tail(a, k, real, leaf, leaves, lifts) ? real : k;
  std::int64_t done = 0;
  run_exact([&]<bool kFlush>() {
    done = lane_groups(n, [&]<int G>(std::int64_t j0) {
      nn_rows_cells<G, kFlush>(a, b, ldb, real, k, stop, lifts, leaf, leaves, j0, out);
    });
  });
  return done;
}

// NT cells: B_eff[p][j] = b[j * ldb + p], a column of rows. Whole blocks of lanes x lanes are loaded
// row-wise and transposed in registers (Isa::transpose); the rest of a leaf is
// gathered. Either way lane j sees exactly its cell's operands in ascending p. With valid < lanes a single
// group (G = 1) covers the last `valid` columns only: the rows past them are never read (zeros stand in,
// transposed into lanes that are never stored); that needs no gathered part (whole blocks only).
template <int G, bool kFlush>
void nt_cells(const float* a, const float* b, std::int64_t ldb, std::int64_t k, std::int64_t leaf, int leaves,
              std::int64_t j0, float* out, int valid = Isa::kLanes) {
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
        for (int r = 0; r < kLanes; ++r) cols[g][r] = r < valid ? Isa::load(base + r * ldb) : Isa::zero();
        Isa::transpose(cols[g]);
      }
      for (int q = 0; q < kLanes; ++q) {
        const V ap = Isa::set1(samebits::fp::F(a[p + q]));
        for (int g = 0; g < G; ++g)
          acc[g] = flush_if<kFlush>(Isa::fma(ap, flush_if<kFlush>(cols[g][q]), acc[g]));
      }
    }
    for (; p < stop; ++p) {
      const V ap = Isa::set1(samebits::fp::F(a[p]));
      for (int g = 0; g < G; ++g)
        acc[g] = flush_if<kFlush>(
            Isa::fma(ap, flush_if<kFlush>(Isa::gather(b + (j0 + g * kLanes) * ldb + p, offsets)), acc[g]));
    }
    for (int g = 0; g < G; ++g) parts[g][t] = flushed(acc[g]);
  }
  if (valid < kLanes) {
    alignas(64) float lanes[kLanes];
    Isa::store(lanes, fold_lanes(parts[0], leaves));
    for (int l = 0; l < valid; ++l) out[j0 + l] = lanes[l];
    return;
  }
  for (int g = 0; g < G; ++g) Isa::store(out + j0 + g * kLanes, fold_lanes(parts[g], leaves));
}

std::int64_t row_gemm_nt_lanes(const float* a, const float* b, std::int64_t ldb, std::int64_t n,
                               std::int64_t k, float* out) {
  std::int64_t leaf = 0;
  int leaves = 0;
  if (!leaves_fit(k, leaf, leaves) || ldb > (std::int64_t{1} << 26)) return 0;
  // Columns past the whole groups run as one partial group when no leaf needs the gathered part.
  const bool whole_blocks = leaf % Isa::kLanes == 0 && k % Isa::kLanes == 0;
  std::int64_t done = 0;
  run_exact([&]<bool kFlush>() {
    done = lane_groups(
        n, [&]<int G>(std::int64_t j0) { nt_cells<G, kFlush>(a, b, ldb, k, leaf, leaves, j0, out); });
    if (done < n && whole_blocks) {
      nt_cells<1, kFlush>(a, b, ldb, k, leaf, leaves, done, out, static_cast<int>(n - done));
      done = n;
    }
  });
  return done;
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
  auto columns = [&](const float* f_in, const float* g_in, float* f_out, float* mm_out) {
    const V acc = flushed(Isa::add(Isa::load(f_in), dA));
    Isa::store(f_out, acc);
    const V seg = flushed(flushed(exp_lanes(acc)));
    Isa::store(mm_out, flushed(Isa::mul(flushed(Isa::load(g_in)), seg)));
  };
  const std::int64_t end = count / Isa::kLanes * Isa::kLanes;
  for (std::int64_t j = 0; j < end; j += Isa::kLanes) columns(frontier + j, g + j, frontier + j, mm + j);
  if (end < count) {
    // The last columns through a staged full vector (each lane is its own column; the extra lanes' values
    // are dropped), so no column falls back to the scalar exp.
    alignas(64) float f_in[Isa::kLanes] = {}, g_in[Isa::kLanes] = {}, f_out[Isa::kLanes], mm_out[Isa::kLanes];
    const std::int64_t rest = count - end;
    for (std::int64_t j = 0; j < rest; ++j) {
      f_in[j] = frontier[end + j];
      g_in[j] = g[end + j];
    }
    columns(f_in, g_in, f_out, mm_out);
    for (std::int64_t j = 0; j < rest; ++j) {
      frontier[end + j] = f_out[j];
      mm[end + j] = mm_out[j];
    }
  }
  return count;
}

std::int64_t chunk_pass_lanes(float scale, const float* h, const float* c, float* out, std::int64_t n) {
  const V s = Isa::set1(scale);
  const std::int64_t end = n / Isa::kLanes * Isa::kLanes;
  for (std::int64_t e = 0; e < end; e += Isa::kLanes)
    Isa::store(out + e, flushed(Isa::fma(s, flushed(Isa::load(h + e)), flushed(Isa::load(c + e)))));
  return end;
}

const samebits::ssd::detail::SsdKernels kSsdKernels{&row_gemm_nt_lanes, &row_gemm_nn_rows_lanes,
                                                    &segsum_prefix_lanes, &chunk_pass_lanes, &scale_lanes};
