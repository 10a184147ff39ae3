// Checks shared by every block: non-finite refusal by name and flat index (numerics.md 1.3).
#pragma once

#include <cstdint>
#include <string>

#include "core/errors.hpp"
#include "numerics/fp.hpp"

namespace samebits::blocks {

// Throws a ValueError "<what>: NaN in <name> at flat index <i> REFUSED" (or "infinity in …") for the
// first non-finite element, judged on the bit pattern; nothing is computed before every input passed.
inline void refuse_non_finite(const float* data, std::int64_t count, const std::string& what,
                              const std::string& name) {
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint32_t a = fp::bits(data[i]) & fp::kAbsMask;
    if (a >= fp::kInfBits) {
      throw_value_error(what + ": " + (a > fp::kInfBits ? "NaN" : "infinity") + " in " + name +
                        " at flat index " + std::to_string(i) + " REFUSED");
    }
  }
}

// The vectorized scan first (split over the pool for a large buffer, since a whole-buffer state scan
// runs on every call), then refuse_non_finite to name the first offender only when there is one.
void refuse_if_non_finite(const float* data, std::int64_t count, const std::string& what,
                          const std::string& name);

}  // namespace samebits::blocks
