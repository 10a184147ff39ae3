// Runtime detection of the SIMD targets this build compiled and this CPU runs.
#include "numerics/simd_target.hpp"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace samebits::simd {
namespace {

// Each target's name once: what target_name returns and what SAMEBITS_SIMD accepts.
constexpr std::array<std::pair<Target, const char*>, 3> kTargetNames{{
    {Target::Scalar, "scalar"},
    {Target::Avx2, "avx2"},
    {Target::Avx512, "avx512"},
}};

#if defined(SAMEBITS_HAVE_SIMD) && (defined(__x86_64__) || defined(__i386__))
// F16C (the AVX2 kernels widen fp16 scales with it): CPUID leaf 1, ECX bit 29. Every AVX2 CPU has it, but
// the compilers' feature-name builtins do not all know its name.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif

bool cpu_supports(Target target) {
#if defined(SAMEBITS_HAVE_SIMD) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  switch (target) {
    case Target::Scalar:
      return true;
    case Target::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case Target::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  }
  return false;
#else
  return target == Target::Scalar;
#endif
}

Target automatic_target() {
  Target best = available_targets().back();
  if (const char* text = std::getenv("SAMEBITS_SIMD")) {
    for (const auto& [target, name] : kTargetNames)
      if (std::strcmp(text, name) == 0) return best_available(target);
  }
  return best;
}

std::atomic<int> g_override{-1};

}  // namespace

const std::vector<Target>& available_targets() {
  static const std::vector<Target> targets = [] {
    std::vector<Target> list{Target::Scalar};
    if (cpu_supports(Target::Avx2)) list.push_back(Target::Avx2);
    if (cpu_supports(Target::Avx512)) list.push_back(Target::Avx512);
    return list;
  }();
  return targets;
}

Target best_available(Target wanted) {
  Target best = Target::Scalar;
  for (Target t : available_targets())
    if (static_cast<int>(t) <= static_cast<int>(wanted)) best = t;
  return best;
}

Target active_target() {
  int forced = g_override.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<Target>(forced);
  static const Target automatic = automatic_target();
  return automatic;
}

void set_target(Target target) { g_override.store(static_cast<int>(best_available(target))); }

void reset_target() { g_override.store(-1); }

const char* target_name(Target target) {
  for (const auto& [known, name] : kTargetNames)
    if (known == target) return name;
  return "unknown";
}

}  // namespace samebits::simd
