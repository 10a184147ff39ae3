// The shared argument checks of the public classes, with upstream's wording.
#include "api/checks.hpp"

#include <samebits/errors.hpp>

#include "models/samba_config.hpp"

namespace samebits {

void check_ragged_lengths(const std::vector<std::int64_t>& lengths, std::int64_t batch, std::int64_t length,
                          const std::string& what) {
  if (static_cast<std::int64_t>(lengths.size()) != batch)
    throw_value_error(what + ": lengths has " + std::to_string(lengths.size()) +
                      " entries but the batch has B = " + std::to_string(batch));
  for (std::size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1 || lengths[i] > length)
      throw_value_error(what + ": lengths[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) +
                        " is outside [1, L = " + std::to_string(length) +
                        "] (right padding: a row has at least one real position and at most L)");
}

std::string python_name_list(const std::vector<std::string>& names) {
  std::string text = "[";
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + models::python_str_repr(names[i]);
  return text + "]";
}

void check_weight_key_set(const std::vector<std::string>& given, const std::vector<std::string>& expected,
                          const std::string& prefix, const std::string& names_note) {
  std::vector<std::string> missing, unknown;
  for (const auto& name : expected)
    if (std::find(given.begin(), given.end(), name) == given.end()) missing.push_back(name);
  for (const auto& name : given)
    if (std::find(expected.begin(), expected.end(), name) == expected.end()) unknown.push_back(name);
  if (missing.empty() && unknown.empty()) return;
  std::string message = prefix + ": weight dict mismatch";
  if (!missing.empty()) message += "; missing " + python_name_list(missing);
  if (!unknown.empty()) message += "; unknown " + python_name_list(unknown);
  throw_value_error(message + ". The exact key set is " + python_name_list(expected) + " -- " + names_note);
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

std::array<std::int64_t, 2> check_token_shape(const std::vector<std::int64_t>& shape, std::int64_t d_model,
                                              bool step, const std::string& what) {
  std::vector<std::int64_t> s = shape;
  if (step && s.size() == 2) s = {s[0], 1, s[1]};
  if (s.size() != 3)
    throw_value_error(what + ": x must be (B, L, d_model)" +
                      (step ? " -- or (B, d_model) for a step --" : "") + ", got " +
                      std::to_string(shape.size()) + "-D shape " + shape_repr(shape));
  if (s[2] != d_model)
    throw_value_error(what + ": x has d_model " + std::to_string(s[2]) + ", the weights have " +
                      std::to_string(d_model));
  if (step && s[1] != 1)
    throw_value_error(what + ": a decode step takes exactly one token per batch row, got L = " +
                      std::to_string(s[1]) + "; use forward() for prefill");
  return {s[0], s[1]};
}

void require_step_state(bool has_state, const std::string& block, const std::string& allocate) {
  if (!has_state)
    throw_value_error("samebits " + block + ".step: state is required (a decode step continues a sequence; " +
                      allocate + " makes the fresh one)");
}

std::int64_t norm_weight_width(const std::vector<std::int64_t>& shape, const std::string& block,
                               const std::string& tensor) {
  if (shape.size() != 1 || shape[0] < 1)
    throw_value_error(block + ": " + tensor + " must be 1-D (d_model,), got shape " + shape_repr(shape));
  return shape[0];
}

void check_weight_index(std::size_t index, std::size_t count, const std::string& block) {
  if (index >= count) throw_value_error(block + ": no weight index " + std::to_string(index));
}

}  // namespace samebits
