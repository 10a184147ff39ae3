// TensorSpec: one named tensor of a weights table. Every block exports its table as TensorSpecs (the
// upstream parameter names in upstream order, row-major shapes), and the Samba registry composes the
// blocks' tables under a layer prefix ("layers.{i}." + name), so a name or a shape is written once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace samebits::blocks {

// `Dim` is std::int64_t everywhere but in the Samba registry, which evaluates the same tables in a wider
// integer so that an absurd config's sizes saturate instead of wrapping (models/samba_config.cpp).
template <typename Dim>
struct BasicTensorSpec {
  BasicTensorSpec(const char* name_, std::vector<Dim> shape_, std::vector<Dim> alt_shape_ = {})
      : name(name_), shape(std::move(shape_)), alt_shape(std::move(alt_shape_)) {}

  const char* name;
  std::vector<Dim> shape;
  std::vector<Dim> alt_shape;  // the one other spelling a loader accepts (Mamba conv weights); usually empty

  Dim elements() const {
    Dim count = 1;
    for (Dim d : shape) count *= d;
    return count;
  }
};

using TensorSpec = BasicTensorSpec<std::int64_t>;

}  // namespace samebits::blocks
