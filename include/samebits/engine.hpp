// Engine-wide facts and controls: version and arithmetic profile, worker threads, the SIMD target the fast
// paths use, and the exact kernels a caller may check bits against. None of the controls changes a bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace samebits {

// The library version ("0.1.0").
const char* version();
// The neural arithmetic profile this engine implements (docs/formats.md §8.3).
const char* neural_arithmetic_profile();
// The numeric mode every surface runs in ("identical").
const char* numeric_mode();

// Worker threads for the fast paths (default: SAMEBITS_NUM_THREADS, else every core); n >= 1.
void set_num_threads(int n);
int num_threads();

// SIMD targets compiled in and supported by this CPU ("scalar" first, then "avx2", "avx512").
std::vector<std::string> simd_targets();
// The target the fast paths dispatch to now (an override, else SAMEBITS_SIMD, else the best available).
std::string simd_target();
// Forces a target by name; an unknown name is a ValueError, an unavailable one falls back to the best below.
void set_simd_target(const std::string& name);
// Back to automatic selection.
void reset_simd_target();

// C = A_eff B_eff in the identical GEMM profile (docs/numerics.md §3.1): orientation "NT" (A (m, k), B (n,
// k)), "NN" (B (k, n)) or "TN" (A (k, m), B (k, n)); reference selects the scalar twin. Same bits either way.
void matmul(const std::string& orientation, const float* a, const float* b, float* c, std::int64_t m,
            std::int64_t n, std::int64_t k, bool reference = false);
// Whether this build folds GEMM leaves in the wrong order on purpose (a test-only build; suites must fail).
bool sabotage_build();

// The profile's own exp and log (docs/numerics.md §2), bit-exact and independent of libm.
float exact_exp(float x);
float exact_log(float x);

}  // namespace samebits
