// The argument checks and message pieces the public classes share, worded as upstream's refusals.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <samebits/errors.hpp>
#include <samebits/tensor.hpp>
#include <string>
#include <vector>

namespace samebits {

// "(16, 8)" / "(16,)": Python's repr of a shape tuple, as upstream messages print it.
std::string shape_repr(const std::vector<std::int64_t>& shape);

// The x-shape refusals the block classes share: x is (B, L, d_model); a step also takes (B, d_model) and
// needs L = 1. `what` starts every message. Returns {B, L}; whether B and L are positive is the caller's
// check (the blocks differ in when they make it).
std::array<std::int64_t, 2> check_token_shape(const std::vector<std::int64_t>& shape, std::int64_t d_model,
                                              bool step, const std::string& what);

// Ragged-batch lengths (docs/api.md §11): `batch` entries, each in [1, length]; refused by name with `what`
// ("samebits TransformerBlock.forward") otherwise.
void check_ragged_lengths(const std::vector<std::int64_t>& lengths, std::int64_t batch, std::int64_t length,
                          const std::string& what);

// A step_many refusal: states[i] is the same object as an earlier entry, and each sequence needs its own
// state. `what` starts the message.
template <typename T>
void check_distinct_state(const std::vector<T*>& states, std::size_t i, const std::string& what) {
  for (std::size_t j = 0; j < i; ++j)
    if (states[j] == states[i])
      throw_value_error(what + ": state " + std::to_string(i) + " is state " + std::to_string(j) +
                        " again; each sequence needs its own state");
}

// The one ragged spelling (docs/blocks.md §6): a copy of x [batch, length, width] whose padding positions
// hold zeros (+0.0 / id 0) goes through `run`, whose [batch, length, out_width] result gets its padding
// positions overwritten with +0.0. No arithmetic changes, so real positions equal each row run alone.
template <typename T, typename Run>
std::vector<float> ragged_run(const T* x, std::int64_t batch, std::int64_t length, std::int64_t width,
                              const std::vector<std::int64_t>& lengths, std::int64_t out_width, Run&& run) {
  std::vector<T> padded(static_cast<std::size_t>(batch * length * width), T{});
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(x + b * length * width, x + (b * length + lengths[static_cast<std::size_t>(b)]) * width,
              padded.begin() + b * length * width);
  std::vector<float> out = run(padded.data());
  for (std::int64_t b = 0; b < batch; ++b)
    std::fill(out.begin() + (b * length + lengths[static_cast<std::size_t>(b)]) * out_width,
              out.begin() + (b + 1) * length * out_width, 0.0f);
  return out;
}

// A block's tensor table (its TensorSpec rows) as the public name-and-shape list.
template <typename Specs>
std::vector<TensorInfo> tensor_infos(const Specs& specs) {
  std::vector<TensorInfo> table;
  for (const auto& spec : specs) table.push_back({spec.name, spec.shape});
  return table;
}

// A decode step without a state is refused: "samebits <block>.step: state is required (...)", where
// `allocate` names the call that makes a fresh state.
void require_step_state(bool has_state, const std::string& block,
                        const std::string& allocate = "allocate_state(B)");

// Python's repr of a list of names: "['a', 'b']" (each name as Python's repr of a str).
std::string python_name_list(const std::vector<std::string>& names);

// The block weight-dict check: "<prefix>: weight dict mismatch; missing [...]; unknown [...]. The exact key
// set is [...] -- <names_note>" (a part only when non-empty), a ValueError; nothing when the sets agree.
void check_weight_key_set(const std::vector<std::string>& given, const std::vector<std::string>& expected,
                          const std::string& prefix, const std::string& names_note);

// A block's norm weight gives d_model: `tensor` ("norm.weight") must be 1-D with a positive length, else
// "<block>: <tensor> must be 1-D (d_model,), got shape (...)", a ValueError. Returns the length.
std::int64_t norm_weight_width(const std::vector<std::int64_t>& shape, const std::string& block,
                               const std::string& tensor);

// A weight index past the block's table (`count` rows) is refused: "<block>: no weight index N".
void check_weight_index(std::size_t index, std::size_t count, const std::string& block);

}  // namespace samebits
