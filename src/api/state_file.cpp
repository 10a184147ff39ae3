// Saved decode states (docs/formats.md §9): each state kind as named counters and arrays in the container
// of state_file_format.hpp, and back into a fresh state once every field has been checked against the model.
#include <cstdio>
#include <fstream>
#include <limits>
#include <samebits/errors.hpp>
#include <samebits/state_file.hpp>
#include <string>
#include <utility>
#include <vector>

#include "api/api_access.hpp"
#include "api/state_file_format.hpp"
#include "io/file_bytes.hpp"

namespace samebits {

namespace {

using state_file::Kind;
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

void fill(const Reader& r, const std::string& p, const std::vector<std::string>& order,
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
  fill(r, p, transformer_names(), pins(s));
  s.set_cached_tokens(r.counter(p + "cached_tokens", 0, kMaxCount));
}

std::vector<std::string> expect_mamba1(const Reader& r, const std::string& p, const Mamba1State& one_row,
                                       std::int64_t batch) {
  r.counter(p + "batch", batch, batch);
  return expect_rows(r, p, one_row, batch, {p + "batch"});
}
std::vector<std::string> expect_mamba2(const Reader& r, const std::string& p, const Mamba2State& one_row,
                                       std::int64_t batch) {
  r.counter(p + "batch", batch, batch);
  r.counter(p + "buffered_tokens", 0, 255);
  return expect_rows(r, p, one_row, batch, {p + "batch", p + "buffered_tokens"});
}
std::vector<std::string> expect_mamba3(const Reader& r, const std::string& p, const Mamba3State& one_row,
                                       std::int64_t batch) {
  r.counter(p + "batch", batch, batch);
  r.counter(p + "buffered_tokens", 0, 64);
  r.counter(p + "pending", 0, 1);
  return expect_rows(r, p, one_row, batch, {p + "batch", p + "buffered_tokens", p + "pending"});
}

void fill_mamba1(const Reader& r, const std::string& p, Mamba1State& s) {
  fill(r, p, piece_names(pieces(s)), pins(s));
}
void fill_mamba2(const Reader& r, const std::string& p, Mamba2State& s) {
  fill(r, p, piece_names(pieces(s)), pins(s));
  s.set_buffered_tokens(r.counter(p + "buffered_tokens", 0, 255));
}
void fill_mamba3(const Reader& r, const std::string& p, Mamba3State& s) {
  fill(r, p, piece_names(pieces(s)), pins(s));
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

Reader open(const std::vector<std::uint8_t>& bytes, const std::string& source, Kind kind,
            const std::string& fingerprint) {
  return Reader(bytes.data(), bytes.size(), source, kind, fingerprint);
}

std::int64_t rows(const Reader& r) { return r.counter("batch", 1, kMaxRows); }

}  // namespace

// ---------------------------------------------------------------- single blocks

std::vector<std::uint8_t> state_bytes(const TransformerBlockInference& model, const TransformerState& state) {
  Writer w;
  put(w, "", state);
  return w.finish(Kind::kTransformer, model_fingerprint(model));
}
std::vector<std::uint8_t> state_bytes(const Mamba1BlockInference& model, const Mamba1State& state) {
  Writer w;
  put(w, "", state);
  return w.finish(Kind::kMamba1, model_fingerprint(model));
}
std::vector<std::uint8_t> state_bytes(const Mamba2BlockInference& model, const Mamba2State& state) {
  Writer w;
  put(w, "", state);
  return w.finish(Kind::kMamba2, model_fingerprint(model));
}
std::vector<std::uint8_t> state_bytes(const Mamba3BlockInference& model, const Mamba3State& state) {
  Writer w;
  put(w, "", state);
  return w.finish(Kind::kMamba3, model_fingerprint(model));
}

TransformerState transformer_state_from_bytes(const std::vector<std::uint8_t>& bytes,
                                              const TransformerBlockInference& model,
                                              const std::string& source) {
  const Reader r = open(bytes, source, Kind::kTransformer, model_fingerprint(model));
  const std::int64_t batch = rows(r);
  const std::int64_t ceiling = ApiAccess::block(model)->options().max_positions;
  const std::int64_t max_tokens = r.counter("max_tokens", 1, ceiling);
  r.expect_only(expect_kv(r, "", batch, model.n_kv_heads(), model.head_dim(), model.window(), max_tokens));
  TransformerState state = model.allocate_state(batch, max_tokens);
  fill_kv(r, "", state);
  return state;
}
Mamba1State mamba1_state_from_bytes(const std::vector<std::uint8_t>& bytes, const Mamba1BlockInference& model,
                                    const std::string& source) {
  const Reader r = open(bytes, source, Kind::kMamba1, model_fingerprint(model));
  const std::int64_t batch = rows(r);
  r.expect_only(expect_mamba1(r, "", model.allocate_state(1), batch));
  Mamba1State state = model.allocate_state(batch);
  fill_mamba1(r, "", state);
  return state;
}
Mamba2State mamba2_state_from_bytes(const std::vector<std::uint8_t>& bytes, const Mamba2BlockInference& model,
                                    const std::string& source) {
  const Reader r = open(bytes, source, Kind::kMamba2, model_fingerprint(model));
  const std::int64_t batch = rows(r);
  r.expect_only(expect_mamba2(r, "", model.allocate_state(1), batch));
  Mamba2State state = model.allocate_state(batch);
  fill_mamba2(r, "", state);
  return state;
}
Mamba3State mamba3_state_from_bytes(const std::vector<std::uint8_t>& bytes, const Mamba3BlockInference& model,
                                    const std::string& source) {
  const Reader r = open(bytes, source, Kind::kMamba3, model_fingerprint(model));
  const std::int64_t batch = rows(r);
  r.expect_only(expect_mamba3(r, "", model.allocate_state(1), batch));
  Mamba3State state = model.allocate_state(batch);
  fill_mamba3(r, "", state);
  return state;
}

// ---------------------------------------------------------------- stacks

std::vector<std::uint8_t> state_bytes(const SambaInference& model, const SambaState& state) {
  Writer w;
  w.counter("batch", state.batch_size());
  w.counter("max_tokens", state.max_tokens());
  w.counter("layers", state.layer_count());
  for (std::int64_t i = 0; i < state.layer_count(); ++i) {
    if (const Mamba3State* m3 = state.mamba3(i))
      put(w, layer_prefix(i), *m3);
    else
      put(w, layer_prefix(i), *state.attention(i));
  }
  return w.finish(Kind::kSamba, model_fingerprint(model));
}

SambaState samba_state_from_bytes(const std::vector<std::uint8_t>& bytes, const SambaInference& model,
                                  const std::string& source) {
  const Reader r = open(bytes, source, Kind::kSamba, model_fingerprint(model));
  const std::int64_t batch = rows(r);
  const std::int64_t max_tokens = r.counter("max_tokens", 1, kMaxCount);
  const SambaState one_row = model.allocate_state(1, 1);
  r.counter("layers", one_row.layer_count(), one_row.layer_count());
  std::vector<std::string> known{"batch", "max_tokens", "layers"};
  for (std::int64_t i = 0; i < one_row.layer_count(); ++i) {
    const std::string p = layer_prefix(i);
    std::vector<std::string> names;
    if (const Mamba3State* m3 = one_row.mamba3(i)) {
      names = expect_mamba3(r, p, *m3, batch);
    } else {
      const TransformerState& kv = *one_row.attention(i);
      names = expect_kv(r, p, batch, kv.n_kv_heads(), kv.head_dim(), kv.window(), max_tokens);
    }
    known.insert(known.end(), names.begin(), names.end());
  }
  r.expect_only(known);
  SambaState state = model.allocate_state(batch, max_tokens);
  for (std::int64_t i = 0; i < state.layer_count(); ++i) {
    if (Mamba3State* m3 = state.mamba3(i))
      fill_mamba3(r, layer_prefix(i), *m3);
    else
      fill_kv(r, layer_prefix(i), *state.attention(i));
  }
  return state;
}

std::vector<std::uint8_t> state_bytes(const CausalLM& model, const CausalLMState& state) {
  if (!state.belongs_to(model))
    throw_value_error("samebits saved state: the CausalLMState was allocated by another model");
  Writer w;
  w.counter("batch", state.batch_size());
  w.counter("max_tokens", state.max_tokens());
  w.counter("positions", state.positions());
  w.counter("layers", state.layers());
  for (std::int64_t i = 0; i < state.layers(); ++i) {
    if (const TransformerState* kv = state.transformer(i))
      put(w, layer_prefix(i), *kv);
    else if (const Mamba1State* m1 = state.mamba1(i))
      put(w, layer_prefix(i), *m1);
    else
      put(w, layer_prefix(i), *state.mamba2(i));
  }
  return w.finish(Kind::kCausalLM, model_fingerprint(model));
}

CausalLMState causal_lm_state_from_bytes(const std::vector<std::uint8_t>& bytes, const CausalLM& model,
                                         const std::string& source) {
  const Reader r = open(bytes, source, Kind::kCausalLM, model_fingerprint(model));
  const std::int64_t batch = rows(r);
  const std::int64_t max_tokens = r.counter("max_tokens", 1, model.max_positions().value_or(kMaxCount));
  const std::int64_t positions = r.counter("positions", 0, max_tokens);
  const CausalLMState one_row = model.allocate_state(1, 1);
  r.counter("layers", one_row.layers(), one_row.layers());
  std::vector<std::string> known{"batch", "max_tokens", "positions", "layers"};
  for (std::int64_t i = 0; i < one_row.layers(); ++i) {
    const std::string p = layer_prefix(i);
    std::vector<std::string> names;
    if (const TransformerState* kv = one_row.transformer(i)) {
      names = expect_kv(r, p, batch, kv->n_kv_heads(), kv->head_dim(), kv->window(), max_tokens);
      r.counter(p + "cached_tokens", positions, positions);  // a layer's cache holds the stack's positions
    } else if (const Mamba1State* m1 = one_row.mamba1(i)) {
      names = expect_mamba1(r, p, *m1, batch);
    } else {
      names = expect_mamba2(r, p, *one_row.mamba2(i), batch);
    }
    known.insert(known.end(), names.begin(), names.end());
  }
  r.expect_only(known);
  CausalLMState state = model.allocate_state(batch, max_tokens);
  for (std::int64_t i = 0; i < state.layers(); ++i) {
    if (TransformerState* kv = state.transformer(i))
      fill_kv(r, layer_prefix(i), *kv);
    else if (Mamba1State* m1 = state.mamba1(i))
      fill_mamba1(r, layer_prefix(i), *m1);
    else
      fill_mamba2(r, layer_prefix(i), *state.mamba2(i));
  }
  state.set_positions(positions);
  return state;
}

// ---------------------------------------------------------------- files

void save_state(const std::string& path, const TransformerBlockInference& model,
                const TransformerState& state) {
  write_file(path, state_bytes(model, state));
}
void save_state(const std::string& path, const Mamba1BlockInference& model, const Mamba1State& state) {
  write_file(path, state_bytes(model, state));
}
void save_state(const std::string& path, const Mamba2BlockInference& model, const Mamba2State& state) {
  write_file(path, state_bytes(model, state));
}
void save_state(const std::string& path, const Mamba3BlockInference& model, const Mamba3State& state) {
  write_file(path, state_bytes(model, state));
}
void save_state(const std::string& path, const SambaInference& model, const SambaState& state) {
  write_file(path, state_bytes(model, state));
}
void save_state(const std::string& path, const CausalLM& model, const CausalLMState& state) {
  write_file(path, state_bytes(model, state));
}

TransformerState load_state(const std::string& path, const TransformerBlockInference& model) {
  return transformer_state_from_bytes(read_file(path), model, path);
}
Mamba1State load_state(const std::string& path, const Mamba1BlockInference& model) {
  return mamba1_state_from_bytes(read_file(path), model, path);
}
Mamba2State load_state(const std::string& path, const Mamba2BlockInference& model) {
  return mamba2_state_from_bytes(read_file(path), model, path);
}
Mamba3State load_state(const std::string& path, const Mamba3BlockInference& model) {
  return mamba3_state_from_bytes(read_file(path), model, path);
}
SambaState load_state(const std::string& path, const SambaInference& model) {
  return samba_state_from_bytes(read_file(path), model, path);
}
CausalLMState load_state(const std::string& path, const CausalLM& model) {
  return causal_lm_state_from_bytes(read_file(path), model, path);
}

}  // namespace samebits
