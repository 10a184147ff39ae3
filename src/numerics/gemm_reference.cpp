// The scalar twin of the GEMM profile: docs/numerics.md §3 spelled out one output cell at a time.
#include <vector>

#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"

namespace samebits::gemm {

using fp::F;
using fp::FMA;

std::int64_t leaf_length(std::int64_t k) {
  if (k <= 0) return 0;
  if (k <= 128) return k;
  if ((k + 127) / 128 <= 1024) return 128;
  return (k + 1023) / 1024;
}

float fold_partials(float* partials, std::int64_t count) {
  // Level by level: pair (0,1), (2,3), ...; an odd last element is carried up unchanged.
  while (count > 1) {
    std::int64_t next = 0;
    for (std::int64_t i = 0; i + 1 < count; i += 2) partials[next++] = F(F(partials[i]) + F(partials[i + 1]));
    if (count % 2 == 1) partials[next++] = partials[count - 1];
    count = next;
  }
  return F(partials[0]);
}

void gemm_reference(Orientation orientation, const float* A, const float* B, float* C, std::int64_t m,
                    std::int64_t n, std::int64_t k) {
  auto a_eff = [&](std::int64_t i, std::int64_t p) {
    return orientation == Orientation::TN ? A[p * m + i] : A[i * k + p];
  };
  auto b_eff = [&](std::int64_t p, std::int64_t j) {
    return orientation == Orientation::NT ? B[j * k + p] : B[p * n + j];
  };
  const std::int64_t leaf = leaf_length(k);
  const std::int64_t leaves = leaf == 0 ? 0 : (k + leaf - 1) / leaf;
  std::vector<float> partials(static_cast<std::size_t>(leaves));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      if (leaves == 0) {
        C[i * n + j] = 0.0f;
        continue;
      }
      for (std::int64_t t = 0; t < leaves; ++t) {
        const std::int64_t end = (t + 1) * leaf < k ? (t + 1) * leaf : k;
        float acc = 0.0f;
        for (std::int64_t p = t * leaf; p < end; ++p) acc = F(FMA(F(a_eff(i, p)), F(b_eff(p, j)), acc));
        partials[t] = F(acc);
      }
      C[i * n + j] = fold_partials(partials.data(), leaves);
    }
  }
}

}  // namespace samebits::gemm
