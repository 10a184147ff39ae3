// Binding of TransformerBlockInference and its KV-cache state; samebits/_transformer.py wraps both.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/transformer_inference.hpp"
#include "array_convert.hpp"
#include "bindings.hpp"
#include "blocks/transformer/state.hpp"
#include "core/aligned_buffer.hpp"
#include "core/state_size.hpp"

namespace samebits::python {
namespace {

// The caller's cache buffers, updated in place: never converted (a converted copy would be updated instead).
using FloatArrayInOut = nb::ndarray<float, nb::c_contig, nb::device::cpu>;

std::vector<std::size_t> shape_of(const TensorView& view) {
  std::vector<std::size_t> shape;
  for (auto extent : view.shape) shape.push_back(static_cast<std::size_t>(extent));
  return shape;
}

// Returns (y, cached_tokens, trusted): the state view's outcome, which the Python state keeps.
nb::tuple carried(const TransformerBlockInference& self, const FloatArrayIn& x, FloatArrayInOut& k,
                  FloatArrayInOut& v, std::int64_t batch_size, std::int64_t max_tokens, std::int64_t window,
                  std::int64_t cached_tokens, bool spread, bool trusted, bool private_buffers, bool step,
                  bool reference, nb::handle tiles) {
  const TensorView view = view_of(x);
  TransformerStateView state{k.data(), v.data(), batch_size, max_tokens, window, cached_tokens};
  state.spread = spread;
  if (spread && window == 0)
    state.k_tiles =
        borrowed_key_tiles(tiles, batch_size * self.dims().n_kv_heads, self.dims().head_dim, max_tokens);
  state.trusted = trusted;
  state.private_buffers = private_buffers;
  const auto want = static_cast<std::size_t>(batch_size * self.dims().n_kv_heads *
                                             (window > 0 ? window : max_tokens) * self.dims().head_dim);
  if (k.size() != want || v.size() != want)
    throw_value_error(
        "samebits TransformerBlock: the state buffers do not hold batch_size * n_kv_heads * capacity * "
        "head_dim floats");
  std::vector<float> y;
  {
    nb::gil_scoped_release release;
    y = reference ? self.forward_reference(view, state, step)
        : step    ? self.step(view, state)
                  : self.forward(view, state);
  }
  return nb::make_tuple(to_numpy(std::move(y), shape_of(view)), state.cached_tokens, state.trusted);
}

// A full-causal cache held in Python buffers, seen as one batch row of `blocks` heads (the same block
// order), once its sizes match the buffers (`v` may be absent).
struct PythonCache {
  blocks::KvCache cache;
  blocks::TransformerDims dims;
};
PythonCache python_cache(FloatArrayInOut& k, FloatArrayInOut* v, std::int64_t blocks, std::int64_t head_dim,
                         std::int64_t max_tokens, std::int64_t cached_tokens) {
  std::int64_t floats = 0;
  if (blocks < 1 || head_dim < 1 || max_tokens < 1 || cached_tokens < 0 || cached_tokens > max_tokens ||
      __builtin_mul_overflow(blocks, max_tokens, &floats) ||
      __builtin_mul_overflow(floats, head_dim, &floats) || static_cast<std::int64_t>(k.size()) != floats ||
      (v != nullptr && static_cast<std::int64_t>(v->size()) != floats))
    throw_value_error("samebits TransformerState: the cache buffers do not match the state's sizes");
  PythonCache out{{k.data(), v != nullptr ? v->data() : nullptr, 1, max_tokens, cached_tokens}, {}};
  out.dims.n_kv_heads = blocks;
  out.dims.head_dim = head_dim;
  return out;
}

// Moves a full-causal cache held in Python buffers between the packed and the spread layout
// (blocks::kv::spread_packed / pack_spread): `blocks` = batch_size * n_kv_heads.
void relayout(FloatArrayInOut& k, FloatArrayInOut& v, std::int64_t blocks, std::int64_t head_dim,
              std::int64_t max_tokens, std::int64_t cached_tokens, bool to_spread) {
  auto [cache, dims] = python_cache(k, &v, blocks, head_dim, max_tokens, cached_tokens);
  cache.spread = !to_spread;
  if (to_spread)
    blocks::kv::spread_packed(cache, dims);
  else
    blocks::kv::pack_spread(cache, dims);
}

// An array that owns an engine buffer (freed with the array).
nb::ndarray<nb::numpy, float, nb::ndim<1>> owning_array(std::unique_ptr<AlignedBuffer<float>> owned) {
  AlignedBuffer<float>* buffer = owned.release();  // the capsule owns it from here
  nb::capsule owner(buffer, [](void* p) noexcept { delete static_cast<AlignedBuffer<float>*>(p); });
  const std::size_t shape[1] = {buffer->size()};
  return nb::ndarray<nb::numpy, float, nb::ndim<1>>(buffer->data(), 1, shape, owner);
}

// The key tiles of a spread cache held in Python buffers (blocks::KvCache::k_tiles), filled from its keys
// (positions [0, cached_tokens)); None when the system refuses the memory (the calls then read the rows).
nb::object kv_tiles(FloatArrayInOut& k, std::int64_t blocks, std::int64_t head_dim, std::int64_t max_tokens,
                    std::int64_t cached_tokens) {
  auto [cache, dims] = python_cache(k, nullptr, blocks, head_dim, max_tokens, cached_tokens);
  cache.spread = true;
  auto owned = std::make_unique<AlignedBuffer<float>>();
  if (!blocks::kv::make_key_tiles(cache, dims, *owned)) return nb::none();
  return nb::cast(owning_array(std::move(owned)));
}

// A zero cache buffer of extents[0] x extents[1] x ... floats in engine memory, owned by the array: KV
// buffers of 2 MiB or more then start on a huge page and are advised as huge pages (AlignedBuffer), which
// numpy's own allocations are not below 4 MiB; a decode step streams the whole cache. Its zeros become
// resident only where written, so a cache for more tokens than the machine holds costs what it uses.
nb::ndarray<nb::numpy, float, nb::ndim<1>> kv_zeros(const std::vector<std::int64_t>& extents) {
  for (std::int64_t extent : extents)
    if (extent < 1) throw_value_error("samebits TransformerState: a cache buffer needs at least one float");
  std::int64_t count = 1;
  auto owned = std::make_unique<AlignedBuffer<float>>();
  allocate_state_buffers("TransformerState", extents, [&] {
    for (std::int64_t extent : extents) count *= extent;  // at most 2^61: checked before this runs
    owned->assign_zero(static_cast<std::size_t>(count));
  });
  return owning_array(std::move(owned));
}

// A flat float32 view of one state buffer; the owner is the state object (reference_internal).
nb::ndarray<nb::numpy, float, nb::ndim<1>> buffer_view(float* data, std::int64_t count) {
  const std::size_t shape[1] = {static_cast<std::size_t>(count)};
  return nb::ndarray<nb::numpy, float, nb::ndim<1>>(data, 1, shape, nb::handle());
}

}  // namespace

float* borrowed_key_tiles(nb::handle tiles, std::int64_t blocks, std::int64_t head_dim,
                          std::int64_t max_tokens) {
  if (tiles.is_none()) return nullptr;
  FloatArrayInOut array;
  if (!nb::try_cast(tiles, array)) return nullptr;
  const std::int64_t want = blocks * blocks::kv::key_tile_floats(max_tokens, head_dim);
  return static_cast<std::int64_t>(array.size()) == want ? array.data() : nullptr;
}

void bind_transformer(nb::module_& m) {
  m.def("transformer_check_weight_names",
        [](const std::vector<std::string>& names) { TransformerBlockInference::check_weight_names(names); });

  m.def("kv_zeros", &kv_zeros, nb::arg("extents"));
  m.def("kv_tiles", &kv_tiles, nb::arg("k").noconvert(), nb::arg("blocks"), nb::arg("head_dim"),
        nb::arg("max_tokens"), nb::arg("cached_tokens"));
  m.def("kv_relayout", &relayout, nb::arg("k").noconvert(), nb::arg("v").noconvert(), nb::arg("blocks"),
        nb::arg("head_dim"), nb::arg("max_tokens"), nb::arg("cached_tokens"), nb::arg("to_spread"));

  nb::class_<TransformerState>(m, "TransformerStateBuffers")
      .def_prop_ro("batch_size", &TransformerState::batch_size)
      .def_prop_ro("n_kv_heads", &TransformerState::n_kv_heads)
      .def_prop_ro("head_dim", &TransformerState::head_dim)
      .def_prop_ro("max_tokens", &TransformerState::max_tokens)
      .def_prop_ro("window", &TransformerState::window)
      .def_prop_ro(
          "k_cache", [](TransformerState& s) { return buffer_view(s.k_cache(), s.cache_floats()); },
          nb::rv_policy::reference_internal)
      .def_prop_ro(
          "v_cache", [](TransformerState& s) { return buffer_view(s.v_cache(), s.cache_floats()); },
          nb::rv_policy::reference_internal);

  nb::class_<TransformerBlockInference>(m, "TransformerEngine")
      .def(
          "__init__",
          [](TransformerBlockInference* self, const std::vector<std::string>& names,
             const std::vector<FloatArrayIn>& arrays, std::int64_t n_heads,
             std::optional<std::int64_t> n_kv_heads, std::optional<std::int64_t> head_dim,
             std::int64_t window, const std::string& weight_format) {
            if (names.size() != arrays.size())
              throw_value_error("samebits TransformerBlock: names and arrays differ");
            TransformerBlockInference::NamedWeights weights;
            for (std::size_t i = 0; i < names.size(); ++i) weights.push_back({names[i], view_of(arrays[i])});
            TransformerOptions options;
            options.n_heads = n_heads;
            options.n_kv_heads = n_kv_heads;
            options.head_dim = head_dim;
            options.window = window;
            new (self) TransformerBlockInference(weights, options, weight_format);
          },
          nb::arg("names"), nb::arg("arrays"), nb::arg("n_heads"), nb::arg("n_kv_heads").none(),
          nb::arg("head_dim").none(), nb::arg("window"), nb::arg("weight_format"))
      .def_prop_ro("d_model", [](const TransformerBlockInference& s) { return s.dims().d_model; })
      .def_prop_ro("n_heads", [](const TransformerBlockInference& s) { return s.dims().n_heads; })
      .def_prop_ro("n_kv_heads", [](const TransformerBlockInference& s) { return s.dims().n_kv_heads; })
      .def_prop_ro("head_dim", [](const TransformerBlockInference& s) { return s.dims().head_dim; })
      .def_prop_ro("intermediate", [](const TransformerBlockInference& s) { return s.dims().intermediate; })
      .def_prop_ro("window", [](const TransformerBlockInference& s) { return s.dims().window; })
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
             std::vector<float> y;
             {
               nb::gil_scoped_release release;
               y = self.forward(view);
             }
             return to_numpy(std::move(y), shape_of(view));
           })
      .def("forward_reference",
           [](const TransformerBlockInference& self, const FloatArrayIn& x) {
             const TensorView view = view_of(x);
             std::vector<float> y;
             {
               nb::gil_scoped_release release;
               y = self.forward_reference(view);
             }
             return to_numpy(std::move(y), shape_of(view));
           })
      .def(
          "forward_state",
          [](const TransformerBlockInference& self, const FloatArrayIn& x, FloatArrayInOut k,
             FloatArrayInOut v, std::int64_t batch_size, std::int64_t max_tokens, std::int64_t window,
             std::int64_t cached_tokens, bool spread, bool trusted, bool private_buffers, bool step,
             bool reference, nb::handle tiles) {
            return carried(self, x, k, v, batch_size, max_tokens, window, cached_tokens, spread, trusted,
                           private_buffers, step, reference, tiles);
          },
          nb::arg("x"), nb::arg("k").noconvert(), nb::arg("v").noconvert(), nb::arg("batch_size"),
          nb::arg("max_tokens"), nb::arg("window"), nb::arg("cached_tokens"), nb::arg("spread"),
          nb::arg("trusted"), nb::arg("private_buffers"), nb::arg("step"), nb::arg("reference") = false,
          nb::arg("tiles").none() = nb::none())
      .def("backward", [](const TransformerBlockInference& self) { self.backward(); })
      .def("weight",
           [](const TransformerBlockInference& self, const std::string& name) {
             const auto tensors = blocks::transformer_tensors(self.dims());
             for (std::size_t i = 0; i < tensors.size(); ++i) {
               if (name != tensors[i].name) continue;
               std::vector<std::size_t> shape;
               for (auto e : tensors[i].shape) shape.push_back(static_cast<std::size_t>(e));
               return to_numpy(self.weight(i), shape);
             }
             throw_value_error("samebits TransformerBlock: no weight named '" + name + "'");
           })
      .def_prop_ro("weight_format", [](const TransformerBlockInference& s) { return s.weight_format(); });
}

namespace {
const Registration kRegistration{&bind_transformer, 30};
}  // namespace

}  // namespace samebits::python
