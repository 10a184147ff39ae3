// The vocabulary of tensors every public class takes and reports: borrowed float32 and token-id inputs,
// named weights, and (name, shape) descriptions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

// A borrowed, C-contiguous float32 array with its shape; the caller keeps the memory alive for the call.
struct TensorView {
  const float* data = nullptr;
  std::vector<std::int64_t> shape;
  std::int64_t elements() const {
    std::int64_t count = 1;
    for (std::int64_t d : shape) count *= d;
    return count;
  }
};

// Borrowed token ids (batch, length), int32, C-contiguous.
struct IdsView {
  const std::int32_t* data = nullptr;
  std::int64_t batch = 0;
  std::int64_t length = 0;
};

// Weights by upstream parameter name, in the caller's order (the key set is checked, the order is free).
using NamedTensors = std::vector<std::pair<std::string, TensorView>>;

// One named tensor of a weights table or a state: its name and row-major shape.
struct TensorInfo {
  std::string name;
  std::vector<std::int64_t> shape;
};

// A shape as Python prints the tuple, for messages and reports: "(16, 8)", "(16,)", "()".
std::string shape_repr(const std::vector<std::int64_t>& shape);

}  // namespace samebits
