// The x86 MXCSR status flags that prove skipped flushes inert (docs/numerics.md §6a), for the SIMD kernels.
#pragma once

#include <xmmintrin.h>

namespace samebits::mxcsr_flags {

// A skipped flush could only have acted if a subnormal was produced inexactly (UE) or used as an
// arithmetic operand (DE); kernels flush the values that leave them explicitly. So a pass that skips the
// per-operation flushes and sees neither flag equals the flushing pass.
constexpr unsigned kDenormalFlag = 0x0002;
constexpr unsigned kUnderflowFlag = 0x0010;
constexpr unsigned kStatusFlags = 0x003F;

// Saves the thread's MXCSR and restores it on exit, sticky flags included, so nothing a kernel raises
// leaks to its caller or to the next kernel on the thread.
class FlagScope {
 public:
  FlagScope() : saved_(_mm_getcsr()) {}
  ~FlagScope() { _mm_setcsr(saved_); }
  FlagScope(const FlagScope&) = delete;
  FlagScope& operator=(const FlagScope&) = delete;
  void clear() const { _mm_setcsr(saved_ & ~kStatusFlags); }
  static bool subnormal_seen() { return (_mm_getcsr() & (kDenormalFlag | kUnderflowFlag)) != 0; }

 private:
  unsigned saved_;
};

// Runs pass.template operator()<false>() (the skipped-flush pass) with the flags cleared and, when a
// skipped flush might have acted, pass.template operator()<true>() (the flushing pass) over it. Each pass
// must write every output it owns, so that the second replaces the first.
template <typename Pass>
void run_exact(const Pass& pass) {
  {
    FlagScope flags;
    flags.clear();
    pass.template operator()<false>();
    if (!FlagScope::subnormal_seen()) return;
  }
  pass.template operator()<true>();
}

}  // namespace samebits::mxcsr_flags
