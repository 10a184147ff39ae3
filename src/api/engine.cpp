// The engine-wide facts and controls of samebits/engine.hpp over core's thread pool and numerics' SIMD
// selection and kernels.
#include <samebits/engine.hpp>
#include <samebits/errors.hpp>

#include "numerics/gemm.hpp"
#include "numerics/primitives.hpp"
#include "numerics/simd_target.hpp"

namespace samebits {

const char* version() { return SAMEBITS_VERSION; }
const char* neural_arithmetic_profile() { return "mojolearn.neural-training.fp32.v1"; }
const char* numeric_mode() { return "identical"; }

std::vector<std::string> simd_targets() {
  std::vector<std::string> names;
  for (simd::Target t : simd::available_targets()) names.emplace_back(simd::target_name(t));
  return names;
}

std::string simd_target() { return simd::target_name(simd::active_target()); }

void set_simd_target(const std::string& name) {
  for (simd::Target t : {simd::Target::Scalar, simd::Target::Avx2, simd::Target::Avx512}) {
    if (name == simd::target_name(t)) {
      simd::set_target(t);
      return;
    }
  }
  throw_value_error("samebits: unknown SIMD target '" + name + "' (scalar, avx2 or avx512)");
}

void reset_simd_target() { simd::reset_target(); }

void matmul(const std::string& orientation, const float* a, const float* b, float* c, std::int64_t m,
            std::int64_t n, std::int64_t k, bool reference) {
  gemm::Orientation o;
  if (orientation == "NT")
    o = gemm::Orientation::NT;
  else if (orientation == "NN")
    o = gemm::Orientation::NN;
  else if (orientation == "TN")
    o = gemm::Orientation::TN;
  else
    throw_value_error("samebits.gemm: orientation must be 'NT', 'NN' or 'TN', got '" + orientation + "'");
  if (reference)
    gemm::gemm_reference(o, a, b, c, m, n, k);
  else
    gemm::gemm(o, a, b, c, m, n, k);
}

bool sabotage_build() { return gemm::sabotage_build(); }

float exact_exp(float x) { return primitives::expf(x); }
float exact_log(float x) { return primitives::logf(x); }

}  // namespace samebits
