// The whole-buffer non-finite test of docs/numerics.md §1.3, vectorized: every block scans its inputs and
// state buffers with it on each call before any arithmetic (docs/blocks.md §1.3, §2.3, §3.3, §4.3).
#pragma once

#include <cstdint>

namespace samebits::finite_scan {

// True when every float of data[0, count) is finite, judged on the bit pattern (exponent not all ones).
// The answer is a pure function of the bits: the SIMD target only changes the speed.
bool all_finite(const float* data, std::int64_t count);

// The literal loop, for tests and as the fallback without SIMD.
bool all_finite_reference(const float* data, std::int64_t count);

namespace detail {
using FiniteFn = bool (*)(const float* data, std::int64_t count);
FiniteFn all_finite_avx2();    // nullptr when not compiled in
FiniteFn all_finite_avx512();  // nullptr when not compiled in
}  // namespace detail

}  // namespace samebits::finite_scan
