// samebits::shape_repr (include/samebits/tensor.hpp): one spelling of a shape for every message and report.
#include <samebits/tensor.hpp>

namespace samebits {

std::string shape_repr(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace samebits
