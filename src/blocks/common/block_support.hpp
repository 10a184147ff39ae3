// Checks shared by every block: non-finite refusal by name and flat index (docs/numerics.md §1.3).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <samebits/errors.hpp>
#include <string>
#include <vector>

#include "blocks/common/tensor_spec.hpp"
#include "numerics/finite_scan.hpp"
#include "numerics/fp.hpp"

namespace samebits::blocks {

// Throws a ValueError "<what>: NaN in <name> at flat index <i> REFUSED" (or "infinity in …") for the
// first non-finite element, judged on the bit pattern; nothing is computed before every input passed.
// `first_index` is added to the index named (data is a part of a larger array).
inline void refuse_non_finite(const float* data, std::int64_t count, const std::string& what,
                              const std::string& name, std::int64_t first_index = 0) {
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint32_t a = fp::bits(data[i]) & fp::kAbsMask;
    if (a >= fp::kInfBits) {
      throw_value_error(what + ": " + (a > fp::kInfBits ? "NaN" : "infinity") + " in " + name +
                        " at flat index " + std::to_string(first_index + i) + " REFUSED");
    }
  }
}

// One array of a combined scan: `name` is what a refusal calls it (after the scan's name prefix).
struct ScannedArray {
  const float* data;
  std::int64_t count;
  const char* name;
};

// The vectorized scan first, then refuse_non_finite to name the first offender only when there is one.
// The arrays are scanned as one job split over the pool (a state's whole-buffer scan runs on every call,
// and its arrays are many and mid-sized); a refusal names the first offending array in list order, exactly
// as scanning each in turn would.
void refuse_if_any_non_finite(std::initializer_list<ScannedArray> arrays, const std::string& what,
                              const std::string& name_prefix = "");
void refuse_if_any_non_finite(const ScannedArray* arrays, std::size_t count, const std::string& what,
                              const std::string& name_prefix = "");
inline void refuse_if_non_finite(const float* data, std::int64_t count, const std::string& what,
                                 const std::string& name) {
  refuse_if_any_non_finite({ScannedArray{data, count, name.c_str()}}, what);
}

// A block's weights against its table: each must hold its row's element count (else a ValueError
// "<block>: <name> has the wrong element count"). Returns the first weight, in table order, holding a NaN
// or an infinity: the block is built, and every call on it is refused (refuse_non_finite_weight).
template <std::size_t N>
std::optional<std::size_t> check_weight_table(const std::array<std::vector<float>, N>& weights,
                                              const std::array<TensorSpec, N>& table, const char* block) {
  std::optional<std::size_t> non_finite;
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::int64_t>(weights[i].size()) != table[i].elements())
      throw_value_error(std::string(block) + ": " + table[i].name + " has the wrong element count");
    if (!non_finite &&
        !finite_scan::all_finite(weights[i].data(), static_cast<std::int64_t>(weights[i].size())))
      non_finite = i;
  }
  return non_finite;
}

// Refuses a call on a block whose weight `non_finite` (check_weight_table's answer) holds a NaN or an
// infinity, naming the weight and the first offending flat index.
template <std::size_t N>
void refuse_non_finite_weight(std::optional<std::size_t> non_finite,
                              const std::array<std::vector<float>, N>& weights,
                              const std::array<TensorSpec, N>& table, const std::string& what) {
  if (!non_finite) return;
  const std::size_t i = *non_finite;
  refuse_non_finite(weights[i].data(), static_cast<std::int64_t>(weights[i].size()), what, table[i].name);
}

// Whether every span a call wrote ({at, count} runs of a state) holds only finite values: what a block
// checks before it trusts a state again (Mamba2State / Mamba3State::trusted).
template <typename Spans>
bool spans_finite(const Spans& spans) {
  for (const auto& span : spans)
    if (!finite_scan::all_finite(span.at, span.count)) return false;
  return true;
}

}  // namespace samebits::blocks
