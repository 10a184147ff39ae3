// Which compiled SIMD target the fast paths use: detected once, overridable for tests and benches.
#pragma once

#include <string>
#include <vector>

namespace samebits::simd {

enum class Target { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// Targets compiled into this build that the running CPU supports, Scalar first.
const std::vector<Target>& available_targets();
// The target fast paths dispatch to now: the override if set, else SAMEBITS_SIMD
// (scalar|avx2|avx512, capped by availability), else the best available.
Target active_target();
// The best available target at or below `wanted`.
Target best_available(Target wanted);
// Forces a target (must be available; otherwise the best available one below it is used).
void set_target(Target target);
// Back to automatic selection.
void reset_target();
const char* target_name(Target target);

}  // namespace samebits::simd
