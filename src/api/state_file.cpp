// Saved decode states (docs/formats.md §9): each state kind as named counters and arrays in the container
// of state_file_format.hpp, and back into a fresh state once every field has been checked against the model.
#include <cstdio>
#include <fstream>
#include <limits>
#include <samebits/errors.hpp>
#include <samebits/state_file.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/api_access.hpp"
#include "api/state_file_format.hpp"
#include "io/file_bytes.hpp"

namespace samebits {

namespace {

using state_file::Reader;
using state_file::Writer;

constexpr std::int64_t kMaxRows = std::int64_t{1} << 31;
constexpr std::int64_t kMaxCount = std::numeric_limits<std::int64_t>::max() / 4;

// One float32 array of a state: its name, shape and read-only data.
struct Piece {
  std::string name;
  std::vector<std::int64_t> shape;
  const float* data;
};

// ---------------------------------------------------------------- the pieces of each block state

std::vector<Piece> pieces(const TransformerState& s, std::vector<float>& k, std::vector<float>& v) {
  k = s.k_cache_copy();
  v = s.v_cache_copy();
  const std::vector<std::int64_t> shape{s.batch_size(), s.n_kv_heads(), s.capacity(), s.head_dim()};
  return {{"k_cache", shape, k.data()}, {"v_cache", shape, v.data()}};
}

std::vector<Piece> pieces(const Mamba1State& s) {
  return {{"conv_window", {s.batch(), s.d_inner(), kMambaConvWidth}, s.conv_window()},
          {"h", {s.batch(), s.d_inner(), kMamba1StateDim}, s.h()}};
}

std::vector<Piece> pieces(const Mamba2State& s) {
  std::vector<Piece> out;
  const float* data[] = {s.conv_window(), s.h(), s.buffer_xbc(), s.buffer_dtraw()};
  for (int b = Mamba2State::kConvWindow; b <= Mamba2State::kBufferDtraw; ++b) {
    const auto buffer = static_cast<Mamba2State::Buffer>(b);
    out.push_back({Mamba2State::buffer_name(buffer), s.buffer_shape(buffer), data[b]});
  }
  return out;
}

std::vector<Piece> pieces(const Mamba3State& s) {
  std::vector<Piece> out;
  for (int p = 0; p < Mamba3State::kPieceCount; ++p)
    out.push_back({s.piece_name(p), s.piece_shape(p), s.piece(p)});
  return out;
}

// Writable views, in the order of pieces().
std::vector<BufferPin> pins(TransformerState& s) {
  std::vector<BufferPin> out;
  out.push_back(s.pin_k_cache());
  out.push_back(s.pin_v_cache());
  return out;
}
std::vector<BufferPin> pins(Mamba1State& s) {
  std::vector<BufferPin> out;
  out.push_back(s.pin_conv_window());
  out.push_back(s.pin_h());
  return out;
}
std::vector<BufferPin> pins(Mamba2State& s) {
  std::vector<BufferPin> out;
  for (int b = Mamba2State::kConvWindow; b <= Mamba2State::kBufferDtraw; ++b)
    out.push_back(s.pin(static_cast<Mamba2State::Buffer>(b)));
  return out;
}
std::vector<BufferPin> pins(Mamba3State& s) {
  std::vector<BufferPin> out;
  for (int p = 0; p < Mamba3State::kPieceCount; ++p) out.push_back(s.pin(p));
  return out;
}

// ---------------------------------------------------------------- writing

void put_pieces(Writer& w, const std::string& prefix, const std::vector<Piece>& list) {
  for (const Piece& piece : list) w.array(prefix + piece.name, piece.shape, piece.data);
}

void put(Writer& w, const std::string& p, const TransformerState& s) {
  w.counter(p + "batch", s.batch_size());
  w.counter(p + "n_kv_heads", s.n_kv_heads());
  w.counter(p + "head_dim", s.head_dim());
  w.counter(p + "max_tokens", s.max_tokens());
  w.counter(p + "window", s.window());
  w.counter(p + "cached_tokens", s.cached_tokens());
  std::vector<float> k, v;
  put_pieces(w, p, pieces(s, k, v));
}
void put(Writer& w, const std::string& p, const Mamba1State& s) {
  w.counter(p + "batch", s.batch());
  put_pieces(w, p, pieces(s));
}
void put(Writer& w, const std::string& p, const Mamba2State& s) {
  w.counter(p + "batch", s.batch());
  w.counter(p + "buffered_tokens", s.buffered_tokens());
  put_pieces(w, p, pieces(s));
}
void put(Writer& w, const std::string& p, const Mamba3State& s) {
  w.counter(p + "batch", s.batch());
  w.counter(p + "buffered_tokens", s.buffered_tokens());
  w.counter(p + "pending", s.pending() ? 1 : 0);
  put_pieces(w, p, pieces(s));
}

// ---------------------------------------------------------------- reading: check, then fill

// What a block state of `batch` rows must hold, from a one-row template of the model's own (so the shapes
// come from the engine, not from a second copy of its formulas): every piece's shape with dim 0 = batch.
template <typename State>
std::vector<std::string> expect_rows(const Reader& r, const std::string& p, const State& one_row,
                                     std::int64_t batch, std::vector<std::string> names) {
  for (const Piece& piece : pieces(one_row)) {
    std::vector<std::int64_t> shape = piece.shape;
    shape[0] = batch;
    state_file::element_count(r, p + piece.name, shape);
    r.expect(p + piece.name, shape);
    names.push_back(p + piece.name);
  }
  return names;
}

void copy_pieces(const Reader& r, const std::string& p, const std::vector<std::string>& order,
                 std::vector<BufferPin> list) {
  for (std::size_t i = 0; i < list.size(); ++i) r.copy_into(p + order[i], list[i]);
}

const std::vector<std::string>& transformer_names() {
  static const std::vector<std::string> names{"k_cache", "v_cache"};
  return names;
}
std::vector<std::string> piece_names(const std::vector<Piece>& list) {
  std::vector<std::string> out;
  for (const Piece& piece : list) out.push_back(piece.name);
  return out;
}

// A KV cache's fields against the geometry the model gives (n_kv, head_dim, window) and the rows and
// max_tokens of the enclosing state; returns the field names checked.
std::vector<std::string> expect_kv(const Reader& r, const std::string& p, std::int64_t batch,
                                   std::int64_t n_kv, std::int64_t head_dim, std::int64_t window,
                                   std::int64_t max_tokens) {
  r.counter(p + "batch", batch, batch);
  r.counter(p + "n_kv_heads", n_kv, n_kv);
  r.counter(p + "head_dim", head_dim, head_dim);
  r.counter(p + "window", window, window);
  r.counter(p + "max_tokens", max_tokens, max_tokens);
  r.counter(p + "cached_tokens", 0, window > 0 ? kMaxCount : max_tokens);
  const std::vector<std::int64_t> shape{batch, n_kv, window > 0 ? window : max_tokens, head_dim};
  std::vector<std::string> names;
  for (const std::string& name : transformer_names()) {
    state_file::element_count(r, p + name, shape);
    r.expect(p + name, shape);
    names.push_back(p + name);
  }
  for (const char* counter : {"batch", "n_kv_heads", "head_dim", "window", "max_tokens", "cached_tokens"})
    names.push_back(p + counter);
  return names;
}

void fill_kv(const Reader& r, const std::string& p, TransformerState& s) {
  copy_pieces(r, p, transformer_names(), pins(s));
  s.set_cached_tokens(r.counter(p + "cached_tokens", 0, kMaxCount));
}

std::vector<std::string> expect(const Reader& r, const std::string& p, const Mamba1State& one_row,
                                std::int64_t batch) {
  r.counter(p + "batch", batch, batch);
  return expect_rows(r, p, one_row, batch, {p + "batch"});
}
std::vector<std::string> expect(const Reader& r, const std::string& p, const Mamba2State& one_row,
                                std::int64_t batch) {
  r.counter(p + "batch", batch, batch);
  r.counter(p + "buffered_tokens", 0, 255);
  return expect_rows(r, p, one_row, batch, {p + "batch", p + "buffered_tokens"});
}
std::vector<std::string> expect(const Reader& r, const std::string& p, const Mamba3State& one_row,
                                std::int64_t batch) {
  r.counter(p + "batch", batch, batch);
  r.counter(p + "buffered_tokens", 0, 64);
  r.counter(p + "pending", 0, 1);
  return expect_rows(r, p, one_row, batch, {p + "batch", p + "buffered_tokens", p + "pending"});
}

void fill(const Reader& r, const std::string& p, Mamba1State& s) {
  copy_pieces(r, p, piece_names(pieces(s)), pins(s));
}
void fill(const Reader& r, const std::string& p, Mamba2State& s) {
  copy_pieces(r, p, piece_names(pieces(s)), pins(s));
  s.set_buffered_tokens(r.counter(p + "buffered_tokens", 0, 255));
}
void fill(const Reader& r, const std::string& p, Mamba3State& s) {
  copy_pieces(r, p, piece_names(pieces(s)), pins(s));
  s.set_buffered_tokens(r.counter(p + "buffered_tokens", 0, 64));
  s.set_pending(r.counter(p + "pending", 0, 1) != 0);
}

std::string layer_prefix(std::int64_t i) { return "layer." + std::to_string(i) + "."; }

// ---------------------------------------------------------------- files

std::vector<std::uint8_t> read_file(const std::string& path) {
  const io::FileBytes file(path, "samebits saved state " + path, "a saved state", 0,
                           [](std::uint64_t) { return std::string(); });
  return std::vector<std::uint8_t>(file.data(), file.data() + file.size());
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw_value_error("samebits saved state " + path + ": cannot be written");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw_value_error("samebits saved state " + path + ": writing failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw_value_error("samebits saved state " + path + ": cannot be renamed into place");
  }
}

std::int64_t rows(const Reader& r) { return r.counter("batch", 1, kMaxRows); }

// ---------------------------------------------------------------- each kind: write its entries, read a new
// state

// A single block: its state's counters and pieces at the top level.
template <typename Model, typename State>
void write(Writer& w, const Model&, const State& state) {
  put(w, "", state);
}

TransformerState read(const Reader& r, const TransformerBlockInference& model) {
  const std::int64_t batch = rows(r);
  const std::int64_t ceiling = ApiAccess::block(model)->options().max_positions;
  const std::int64_t max_tokens = r.counter("max_tokens", 1, ceiling);
  r.expect_only(expect_kv(r, "", batch, model.n_kv_heads(), model.head_dim(), model.window(), max_tokens));
  TransformerState state = model.allocate_state(batch, max_tokens);
  fill_kv(r, "", state);
  return state;
}

// A Mamba block: shapes from a one-row state of the model's own.
template <typename Model>
auto read(const Reader& r, const Model& model) -> decltype(model.allocate_state(1)) {
  const std::int64_t batch = rows(r);
  r.expect_only(expect(r, "", model.allocate_state(1), batch));
  auto state = model.allocate_state(batch);
  fill(r, "", state);
  return state;
}

// The stacks: f(layer i's state), whichever kind it is (const or not, as the stack is).
template <typename Stack, typename F>
requires std::is_same_v<std::remove_const_t<Stack>, SambaState>
void with_layer(Stack& stack, std::int64_t i, F&& f) {
  if (auto* m3 = stack.mamba3(i))
    f(*m3);
  else
    f(*stack.attention(i));
}
template <typename Stack, typename F>
requires std::is_same_v<std::remove_const_t<Stack>, CausalLMState>
void with_layer(Stack& stack, std::int64_t i, F&& f) {
  if (auto* kv = stack.transformer(i))
    f(*kv);
  else if (auto* m1 = stack.mamba1(i))
    f(*m1);
  else
    f(*stack.mamba2(i));
}
std::int64_t layer_count(const SambaState& stack) { return stack.layer_count(); }
std::int64_t layer_count(const CausalLMState& stack) { return stack.layers(); }

std::vector<std::string> expect_layer(const Reader& r, const std::string& p, const TransformerState& one_row,
                                      std::int64_t batch, std::int64_t max_tokens) {
  return expect_kv(r, p, batch, one_row.n_kv_heads(), one_row.head_dim(), one_row.window(), max_tokens);
}
template <typename Mamba>
std::vector<std::string> expect_layer(const Reader& r, const std::string& p, const Mamba& one_row,
                                      std::int64_t batch, std::int64_t) {
  return expect(r, p, one_row, batch);
}
void fill_layer(const Reader& r, const std::string& p, TransformerState& s) { fill_kv(r, p, s); }
template <typename Mamba>
void fill_layer(const Reader& r, const std::string& p, Mamba& s) {
  fill(r, p, s);
}

void write_layers(Writer& w, const auto& stack) {
  w.counter("batch", stack.batch_size());
  w.counter("max_tokens", stack.max_tokens());
  w.counter("layers", layer_count(stack));
  for (std::int64_t i = 0; i < layer_count(stack); ++i)
    with_layer(stack, i, [&](const auto& layer) { put(w, layer_prefix(i), layer); });
}

// Every layer's fields against a one-row stack of the model's own, then the new stack from `allocate`,
// filled.
template <typename Stack, typename Allocate>
Stack read_layers(const Reader& r, const Stack& one_row, std::int64_t batch, std::int64_t max_tokens,
                  std::vector<std::string> known, Allocate allocate) {
  r.counter("layers", layer_count(one_row), layer_count(one_row));
  for (std::int64_t i = 0; i < layer_count(one_row); ++i) {
    with_layer(one_row, i, [&](const auto& layer) {
      const std::vector<std::string> names = expect_layer(r, layer_prefix(i), layer, batch, max_tokens);
      known.insert(known.end(), names.begin(), names.end());
    });
  }
  r.expect_only(known);
  Stack state = allocate();
  for (std::int64_t i = 0; i < layer_count(state); ++i)
    with_layer(state, i, [&](auto& layer) { fill_layer(r, layer_prefix(i), layer); });
  return state;
}

void write(Writer& w, const SambaInference&, const SambaState& state) { write_layers(w, state); }

SambaState read(const Reader& r, const SambaInference& model) {
  const std::int64_t batch = rows(r);
  const std::int64_t max_tokens = r.counter("max_tokens", 1, kMaxCount);
  return read_layers(r, model.allocate_state(1, 1), batch, max_tokens, {"batch", "max_tokens", "layers"},
                     [&] { return model.allocate_state(batch, max_tokens); });
}

void write(Writer& w, const CausalLM& model, const CausalLMState& state) {
  if (!state.belongs_to(model))
    throw_value_error("samebits saved state: the CausalLMState was allocated by another model");
  w.counter("positions", state.positions());
  write_layers(w, state);
}

CausalLMState read(const Reader& r, const CausalLM& model) {
  const std::int64_t batch = rows(r);
  const std::int64_t max_tokens = r.counter("max_tokens", 1, model.max_positions().value_or(kMaxCount));
  const std::int64_t positions = r.counter("positions", 0, max_tokens);
  const CausalLMState one_row = model.allocate_state(1, 1);
  for (std::int64_t i = 0; i < one_row.layers(); ++i)  // a layer's cache holds the stack's positions
    if (one_row.transformer(i) != nullptr) r.counter(layer_prefix(i) + "cached_tokens", positions, positions);
  CausalLMState state =
      read_layers(r, one_row, batch, max_tokens, {"batch", "max_tokens", "positions", "layers"},
                  [&] { return model.allocate_state(batch, max_tokens); });
  state.set_positions(positions);
  return state;
}

static_assert(std::tuple_size_v<SavedStateModels> == 6,
              "SAMEBITS_FOR_EACH_SAVED_STATE_MODEL lists every model");

template <typename Model>
constexpr state_file::Kind kind_of() {
  return static_cast<state_file::Kind>(state_file_detail::IndexIn<Model, SavedStateModels>::value + 1);
}

}  // namespace

// ---------------------------------------------------------------- the public templates, one per operation

template <typename Model>
std::vector<std::uint8_t> state_bytes(const Model& model, const SavedStateOf<Model>& state) {
  Writer w;
  write(w, model, state);
  return w.finish(kind_of<Model>(), model_fingerprint(model));
}

template <typename Model>
SavedStateOf<Model> state_from_bytes(const std::vector<std::uint8_t>& bytes, const Model& model,
                                     const std::string& source) {
  const Reader r(bytes.data(), bytes.size(), source, kind_of<Model>(), model_fingerprint(model));
  return read(r, model);
}

template <typename Model>
void save_state(const std::string& path, const Model& model, const SavedStateOf<Model>& state) {
  write_file(path, state_bytes(model, state));
}

template <typename Model>
SavedStateOf<Model> load_state(const std::string& path, const Model& model) {
  return state_from_bytes(read_file(path), model, path);
}

// Every operation for every model of SavedStateModels.
#define SAMEBITS_SAVED_STATE_OPERATIONS(Model)                                                         \
  template std::vector<std::uint8_t> state_bytes<Model>(const Model&, const SavedStateOf<Model>&);     \
  template SavedStateOf<Model> state_from_bytes<Model>(const std::vector<std::uint8_t>&, const Model&, \
                                                       const std::string&);                            \
  template void save_state<Model>(const std::string&, const Model&, const SavedStateOf<Model>&);       \
  template SavedStateOf<Model> load_state<Model>(const std::string&, const Model&);
SAMEBITS_FOR_EACH_SAVED_STATE_MODEL(SAMEBITS_SAVED_STATE_OPERATIONS)
#undef SAMEBITS_SAVED_STATE_OPERATIONS

}  // namespace samebits
