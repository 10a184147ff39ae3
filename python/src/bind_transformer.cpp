// Binding of TransformerBlockInference and its KV-cache state (the C++ owner of the layout policy);
// samebits/_transformer.py wraps both.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/transformer.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "array_convert.hpp"
#include "bindings.hpp"

namespace samebits::python {
namespace {

// The caller's cache buffers, updated in place: never converted (a converted copy would be updated instead).
using FloatArrayInOut = nb::ndarray<float, nb::c_contig, nb::device::cpu>;

// A writable numpy view of one whole cache buffer (pinned_array).
FloatArrayOut pinned_view(TransformerState& state, bool keys, std::vector<std::size_t> shape) {
  return pinned_array(nb::find(&state), keys ? state.pin_k_cache() : state.pin_v_cache(), std::move(shape));
}

// keys() / values(): full causal, a pinned view of the used region [B, KV, S, HD] of the packed buffer;
// a window, a copy of its min(S, W) most recent positions, oldest first.
FloatArrayOut used_region(TransformerState& state, bool keys) {
  const std::int64_t held = state.held_tokens();
  if (held < 0 || (state.window() == 0 && held > state.max_tokens()))
    throw_value_error("samebits TransformerState: cached_tokens " + std::to_string(state.cached_tokens()) +
                      " is outside [0, " + std::to_string(state.max_tokens()) + "]");
  std::vector<std::size_t> shape;
  for (std::int64_t extent : {state.batch_size(), state.n_kv_heads(), held, state.head_dim()})
    shape.push_back(static_cast<std::size_t>(extent));
  if (state.window() == 0) return pinned_view(state, keys, shape);
  return to_numpy(keys ? state.keys() : state.values(), shape);
}

// A state over caller buffers (kept alive by the returned object): always packed, scanned by every call.
TransformerState borrow(FloatArrayInOut k, FloatArrayInOut v, std::int64_t batch_size,
                        std::int64_t n_kv_heads, std::int64_t head_dim, std::int64_t max_tokens,
                        std::int64_t cached_tokens, std::int64_t window) {
  std::int64_t floats = 0;
  if (batch_size < 1 || n_kv_heads < 1 || head_dim < 1 || (window > 0 ? window : max_tokens) < 1 ||
      __builtin_mul_overflow(batch_size, n_kv_heads, &floats) ||
      __builtin_mul_overflow(floats, window > 0 ? window : max_tokens, &floats) ||
      __builtin_mul_overflow(floats, head_dim, &floats) || static_cast<std::int64_t>(k.size()) != floats ||
      static_cast<std::int64_t>(v.size()) != floats)
    throw_value_error(
        "samebits TransformerBlock: the state buffers do not hold batch_size * n_kv_heads * capacity * "
        "head_dim floats");
  return TransformerState::borrowing(batch_size, n_kv_heads, head_dim, max_tokens, window, k.data(), v.data(),
                                     cached_tokens);
}

// One option field from Python: a plain field takes the value; an optional one stays unset for None.
template <typename T>
void assign(nb::handle value, T& field) {
  field = nb::cast<T>(value);
}
template <typename T>
void assign(nb::handle value, std::optional<T>& field) {
  if (!value.is_none()) field = nb::cast<T>(value);
}
template <auto Member>
void set_option(nb::handle value, TransformerOptions& options) {
  assign(value, options.*Member);
}

using OptionSetter = void (*)(nb::handle, TransformerOptions&);
using O = TransformerOptions;
const std::pair<std::string_view, OptionSetter> kOptionFields[] = {
    {"rope_theta", &set_option<&O::rope_theta>},
    {"rope_scaling", &set_option<&O::rope_scaling>},
    {"rope_factor", &set_option<&O::rope_factor>},
    {"rope_low_freq_factor", &set_option<&O::rope_low_freq_factor>},
    {"rope_high_freq_factor", &set_option<&O::rope_high_freq_factor>},
    {"rope_original_max_position_embeddings", &set_option<&O::rope_original_max_position_embeddings>},
    {"rope_dim", &set_option<&O::rope_dim>},
    {"max_positions", &set_option<&O::max_positions>},
    {"qkv_bias", &set_option<&O::qkv_bias>},
    {"o_bias", &set_option<&O::o_bias>},
    {"norm", &set_option<&O::norm>},
    {"norm_eps", &set_option<&O::norm_eps>},
    {"norm_bias", &set_option<&O::norm_bias>},
    {"mlp", &set_option<&O::mlp>},
    {"mlp_bias", &set_option<&O::mlp_bias>},
    {"qk_norm", &set_option<&O::qk_norm>},
    {"attn_softcap", &set_option<&O::attn_softcap>},
};

// The block options of docs/models.md §2 from the dict samebits/_transformer.py builds (names as in
// TransformerOptions; floats already rounded to float32, None for an absent optional).
void read_block_options(const nb::dict& given, TransformerOptions& options) {
  for (auto [key, value] : given) {
    const std::string name = nb::cast<std::string>(key);
    const auto field = std::find_if(std::begin(kOptionFields), std::end(kOptionFields),
                                    [&](const auto& entry) { return entry.first == name; });
    if (field == std::end(kOptionFields))
      throw_value_error("samebits TransformerBlock: no block option named '" + name + "'");
    field->second(value, options);
  }
}

}  // namespace

void bind_transformer(nb::module_& m) {
  m.def(
      "transformer_check_weight_names",
      [](const std::vector<std::string>& names, const nb::dict& block_options) {
        TransformerOptions options;
        read_block_options(block_options, options);
        TransformerBlockInference::check_weight_names(names, options);
      },
      nb::arg("names"), nb::arg("block_options") = nb::dict());

  // The one owner of a KV cache (samebits/_transformer.py's TransformerState wraps it).
  nb::class_<TransformerState>(m, "TransformerStateEngine")
      .def_static("borrow", &borrow, nb::arg("k").noconvert(), nb::arg("v").noconvert(),
                  nb::arg("batch_size"), nb::arg("n_kv_heads"), nb::arg("head_dim"), nb::arg("max_tokens"),
                  nb::arg("cached_tokens"), nb::arg("window"), nb::keep_alive<0, 1>(), nb::keep_alive<0, 2>())
      .def_prop_ro("batch_size", &TransformerState::batch_size)
      .def_prop_ro("n_kv_heads", &TransformerState::n_kv_heads)
      .def_prop_ro("head_dim", &TransformerState::head_dim)
      .def_prop_ro("max_tokens", &TransformerState::max_tokens)
      .def_prop_ro("window", &TransformerState::window)
      .def_prop_rw("cached_tokens", &TransformerState::cached_tokens, &TransformerState::set_cached_tokens)
      .def_prop_ro(
          "k_cache",
          [](TransformerState& s) { return pinned_view(s, true, {std::size_t(s.cache_floats())}); },
          nb::rv_policy::automatic)
      .def_prop_ro(
          "v_cache",
          [](TransformerState& s) { return pinned_view(s, false, {std::size_t(s.cache_floats())}); },
          nb::rv_policy::automatic)
      .def("keys", [](TransformerState& s) { return used_region(s, true); })
      .def("values", [](TransformerState& s) { return used_region(s, false); })
      .def("clone", &TransformerState::clone)
      // Diagnostics for the tests: the engine's layout and trust.
      .def_prop_ro("spread", &TransformerState::spread)
      .def_prop_ro("trusted", &TransformerState::trusted);

  nb::class_<TransformerBlockInference>(m, "TransformerEngine")
      .def(
          "__init__",
          [](TransformerBlockInference* self, const std::vector<std::string>& names,
             const std::vector<FloatArrayIn>& arrays, std::int64_t n_heads,
             std::optional<std::int64_t> n_kv_heads, std::optional<std::int64_t> head_dim,
             std::int64_t window, const std::string& weight_format, const nb::dict& block_options) {
            const NamedTensors weights = named(names, arrays, "samebits TransformerBlock");
            TransformerOptions options;
            options.n_heads = n_heads;
            options.n_kv_heads = n_kv_heads;
            options.head_dim = head_dim;
            options.window = window;
            read_block_options(block_options, options);
            new (self) TransformerBlockInference(weights, options, weight_format);
          },
          nb::arg("names"), nb::arg("arrays"), nb::arg("n_heads"), nb::arg("n_kv_heads").none(),
          nb::arg("head_dim").none(), nb::arg("window"), nb::arg("weight_format"),
          nb::arg("block_options") = nb::dict())
      .def_prop_ro("d_model", &TransformerBlockInference::d_model)
      .def_prop_ro("n_heads", &TransformerBlockInference::n_heads)
      .def_prop_ro("n_kv_heads", &TransformerBlockInference::n_kv_heads)
      .def_prop_ro("head_dim", &TransformerBlockInference::head_dim)
      .def_prop_ro("intermediate", &TransformerBlockInference::intermediate)
      .def_prop_ro("window", &TransformerBlockInference::window)
      .def("check_tokens",
           [](const TransformerBlockInference& self, const std::vector<std::int64_t>& shape, bool step) {
             const auto bl = self.check_tokens(shape, step);
             return std::make_pair(bl[0], bl[1]);
           })
      .def("check_state", &TransformerBlockInference::check_state)
      .def("allocate", &TransformerBlockInference::allocate_state)
      .def("forward",
           [](const TransformerBlockInference& self, const FloatArrayIn& x) {
             const TensorView view = view_of(x);
             return computed_array([&] { return self.forward(view); }, sizes(view.shape));
           })
      .def("forward_reference",
           [](const TransformerBlockInference& self, const FloatArrayIn& x) {
             const TensorView view = view_of(x);
             return computed_array([&] { return self.forward_reference(view); }, sizes(view.shape));
           })
      .def(
          "forward_state",
          [](const TransformerBlockInference& self, const FloatArrayIn& x, TransformerState& state, bool step,
             bool reference) {
            const TensorView view = view_of(x);
            return computed_array(
                [&] {
                  return reference ? self.forward_reference(view, state, step)
                         : step    ? self.step(view, state)
                                   : self.forward(view, state);
                },
                sizes(view.shape));
          },
          nb::arg("x"), nb::arg("state"), nb::arg("step"), nb::arg("reference") = false)
      .def("step_many",
           [](const TransformerBlockInference& self, const FloatArrayIn& x,
              const std::vector<TransformerState*>& states) {
             const TensorView view = view_of(x);
             return computed_array([&] { return self.step_many(view, states); }, sizes(view.shape));
           })
      .def("backward", [](const TransformerBlockInference& self) { self.backward(); })
      .def("weight",
           [](const TransformerBlockInference& self, const std::string& name) {
             const std::vector<TensorInfo> tensors = self.weight_table();
             for (std::size_t i = 0; i < tensors.size(); ++i) {
               if (name != tensors[i].name) continue;
               std::vector<float> values = self.weight(i);
               if (values.empty())  // an ungated MLP has no gate_proj.weight (docs/models.md §2)
                 throw_value_error("samebits TransformerBlock: no weight named '" + name +
                                   "' (the MLP is ungated)");
               return to_numpy(std::move(values), sizes(tensors[i].shape));
             }
             throw_value_error("samebits TransformerBlock: no weight named '" + name + "'");
           })
      .def_prop_ro("weight_format", [](const TransformerBlockInference& s) { return s.weight_format(); });
}

namespace {
const Registration kRegistration{&bind_transformer, 30};
}  // namespace

}  // namespace samebits::python
