// Fuzzes the state validators on tiny models: KV-cache views and owned states, the Mamba-1/2/3 states, and
// SambaInference's borrowed per-layer states; refused or accepted, never a crash, and a refusal changes
// nothing.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"
#include "fuzz_tiny_models.hpp"
#include "fuzz_weights_support.hpp"

namespace {

using namespace samebits;
using fuzz::tiny_models;
using fuzz::WeightSpec;

constexpr std::int64_t kMaxStateFloats = 1 << 18;  // the harness never backs a state larger than this
constexpr std::int64_t kAskFloats = 1 << 22;       // nor asks the API for one larger than this (16 MiB)

// A state the API allocates itself: small ones run, absurd ones (more floats than memory can address,
// 2^61) must be refused, and the merely huge ones in between (a real allocation of gigabytes) are not
// asked for at all, as libFuzzer's malloc limit would report them.
__int128 product(std::initializer_list<std::int64_t> extents) {
  __int128 floats = 1;
  for (std::int64_t e : extents) {
    if (e <= 0) return 0;  // refused as non-positive
    floats = std::min<__int128>(floats * e, __int128{1} << 100);
  }
  return floats;
}
bool absurd(std::initializer_list<std::int64_t> extents) { return product(extents) > (__int128{1} << 61); }
bool worth_asking(std::initializer_list<std::int64_t> extents) {
  return product(extents) <= kAskFloats || absurd(extents);
}

// The floats of one batch row of each state, exactly as the constructors count them.
std::int64_t mamba2_floats_per_row(const blocks::Mamba2Dims& d) {
  using D = blocks::Mamba2Dims;
  return d.conv_dim * D::kConv + d.nheads * D::kHeadDim * D::kState + D::kChunk * (d.conv_dim + d.nheads);
}
std::int64_t mamba3_floats_per_row(std::int64_t heads) {
  std::int64_t per_head = 3 * blocks::mamba3::kChunk;
  for (int p = 0; p < Mamba3State::kPieceCount; ++p) {
    std::int64_t floats = 1;
    for (std::int64_t extent : blocks::Mamba3State::piece_shape_for(p, 1, 1)) floats *= extent;
    per_head += floats;
  }
  return heads * per_head;
}

// A small count, now and then anything at all.
std::int64_t count(FuzzedDataProvider& in, std::int64_t lo, std::int64_t hi) {
  return in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegral<std::int64_t>()
                                                    : in.ConsumeIntegralInRange<std::int64_t>(lo, hi);
}

// A call kind in [0, last]: 0 and 1 are the fast forward and step, 2 and up the scalar twins, which are
// picked one time in eight: they validate exactly as the fast calls do and cost far more under ASan.
int reference_rarely(FuzzedDataProvider& in, int last) {
  const int pick = in.ConsumeIntegralInRange<int>(0, 7);
  if (pick == 7 && last >= 2) return in.ConsumeIntegralInRange<int>(2, last);
  return pick % 2;
}

// State contents: zeros, small values, small values with a few NaN/inf/huge, or raw fuzzed words up front.
void fill(FuzzedDataProvider& in, float* p, std::int64_t n) {
  if (n <= 0) return;
  const int mode = in.ConsumeIntegralInRange<int>(0, 3);
  if (mode == 0) return;
  for (std::int64_t i = 0; i < n; ++i) p[i] = fuzz::default_value("state", i);
  if (mode == 2) {
    for (int k = in.ConsumeIntegralInRange<int>(1, 3); k > 0; --k)
      p[in.ConsumeIntegralInRange<std::int64_t>(0, n - 1)] =
          in.PickValueInArray({std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(), -3.0e38f, 1e-45f});
  }
  if (mode == 3) {
    for (std::int64_t i = 0; i < n && i < 64 && in.remaining_bytes() >= 4; ++i)
      p[i] = fp::from_bits(in.ConsumeIntegral<std::uint32_t>());
  }
}

// Token inputs x with a fuzzed shape (rank 1-3, small extents), backed by exactly its floats.
struct Tokens {
  std::vector<float> data;
  TensorView view;
};
Tokens tokens(FuzzedDataProvider& in, std::int64_t width) {
  std::vector<std::int64_t> shape;
  const int rank = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegralInRange<int>(0, 4) : 3;
  if (rank >= 1) shape.push_back(in.ConsumeIntegralInRange<std::int64_t>(0, 3));
  if (rank >= 3) shape.push_back(in.ConsumeIntegralInRange<std::int64_t>(0, 4));
  if (rank >= 2) shape.push_back(in.ConsumeIntegralInRange<int>(0, 7) == 0 ? width + 1 : width);
  for (int r = 3; r < rank; ++r) shape.push_back(1);
  Tokens t{fuzz::small_inputs(fuzz::claimed_floats(shape)), {}};
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0 && !t.data.empty())
    t.data[0] = std::numeric_limits<float>::quiet_NaN();
  t.view = TensorView{t.data.data(), shape};
  return t;
}

// Bit-for-bit equality of two state pieces of n floats (a NaN equals itself here).
bool same_floats(const float* a, const float* b, std::int64_t n) {
  return n <= 0 || std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

void transformer_view(FuzzedDataProvider& in) {
  const TransformerBlockInference& model = in.ConsumeBool() ? *tiny_models().full : *tiny_models().windowed;
  // A state borrowing caller buffers (what the binding makes for the buffers a caller passes).
  const std::int64_t batch_size = count(in, -1, 3);
  const std::int64_t max_tokens = count(in, -1, 6);
  const std::int64_t window = count(in, -1, 3);
  const std::int64_t cached0 = count(in, -2, 8);
  // The caller's buffers hold what the state's own fields imply (that is the binding's promise).
  const std::int64_t capacity = window > 0 ? window : max_tokens;
  const std::int64_t per_row = model.n_kv_heads() * model.head_dim();
  std::int64_t floats = 0;
  if (batch_size > 0 && capacity > 0) {
    if (batch_size > kMaxStateFloats / per_row / capacity) return;
    floats = batch_size * per_row * capacity;
  }
  std::vector<float> k(static_cast<std::size_t>(floats)), v(static_cast<std::size_t>(floats));
  fill(in, k.data(), floats);
  fill(in, v.data(), floats);
  const std::vector<float> k0 = k, v0 = v;
  std::optional<TransformerState> view;
  Tokens x = tokens(in, model.d_model());
  const int call = in.ConsumeIntegralInRange<int>(0, 3);
  const bool ok = fuzz::accepted([&] {
    view.emplace(TransformerState::borrowing(batch_size, model.n_kv_heads(), model.head_dim(), max_tokens,
                                             window, k.data(), v.data(), cached0));
    if (call == 0) model.forward(x.view, *view);
    if (call == 1) model.step(x.view, *view);
    if (call >= 2) model.forward_reference(x.view, *view, call == 3);
  });
  if (!ok)
    fuzz::require(fuzz::same_bits(k, k0) && fuzz::same_bits(v, v0) &&
                      (!view.has_value() || view->cached_tokens() == cached0),
                  "a refused call changed the borrowed KV state");
}

void transformer_owned(FuzzedDataProvider& in) {
  const TransformerBlockInference& model = in.ConsumeBool() ? *tiny_models().full : *tiny_models().windowed;
  std::optional<TransformerState> state;
  const std::int64_t batch = count(in, -1, 3), max_tokens = count(in, -1, 6);
  if (!worth_asking(
          {batch, model.n_kv_heads(), model.window() > 0 ? model.window() : max_tokens, model.head_dim()}))
    return;
  if (!fuzz::accepted([&] { state.emplace(model.allocate_state(batch, max_tokens)); })) return;
  fuzz::require(state->cache_floats() <= kAskFloats, "allocate_state accepted a state past 2^61 floats");
  state->set_cached_tokens(count(in, -2, 8));
  fill(in, state->pin_k_cache().data(), state->cache_floats());
  const TransformerState before = state->clone();
  Tokens x = tokens(in, model.d_model());
  const bool step = in.ConsumeBool();
  if (fuzz::accepted([&] { step ? model.step(x.view, *state) : model.forward(x.view, *state); })) return;
  fuzz::require(
      state->cached_tokens() == before.cached_tokens() &&
          same_floats(state->k_cache_copy().data(), before.k_cache_copy().data(), state->cache_floats()) &&
          same_floats(state->v_cache_copy().data(), before.v_cache_copy().data(), state->cache_floats()),
      "a refused call changed the TransformerState");
}

// The state a Mamba call gets: as the input picks, the model's own for `batch` rows (false, ending the run,
// when a state of `extents` is not worth asking for or the allocation is refused) or, for a batch in
// [1, max_batch], the one `other()` builds (maybe another model's); otherwise none.
template <typename Model, typename State, typename Other>
bool pick_state(FuzzedDataProvider& in, const Model& model, std::int64_t batch, std::int64_t max_batch,
                std::initializer_list<std::int64_t> extents, std::optional<State>& state, Other&& other) {
  if (in.ConsumeBool()) {
    if (!worth_asking(extents)) return false;
    return fuzz::accepted([&] { state.emplace(model.allocate_state(batch)); });
  }
  if (batch > 0 && batch <= max_batch) state.emplace(other());
  return true;
}

void mamba1(FuzzedDataProvider& in) {
  const Mamba1BlockInference& model = *tiny_models().m1;
  std::optional<Mamba1State> state;
  const std::int64_t batch = count(in, -1, 3);
  if (!pick_state(in, model, batch, 3,
                  {batch, model.d_inner(), blocks::Mamba1Dims::kConv + blocks::Mamba1Dims::kState}, state,
                  [&] { return Mamba1State(batch, in.ConsumeIntegralInRange<std::int64_t>(1, 8)); }))
    return;
  if (state) {
    fill(in, state->pin_conv_window().data(), state->conv_window_size());
    fill(in, state->pin_h().data(), state->h_size());
  }
  std::optional<Mamba1State> before;
  if (state) before.emplace(state->clone());
  Tokens x = tokens(in, model.d_model());
  Mamba1State* s = state ? &*state : nullptr;
  const int call = in.ConsumeIntegralInRange<int>(0, 3);
  const bool ok = fuzz::accepted([&] {
    if (call == 0) model.forward(x.view, s);
    if (call == 1) model.step(x.view, s);
    if (call == 2) model.forward_reference(x.view, s);
    if (call == 3) model.step_reference(x.view, s);
  });
  if (!ok && state)
    fuzz::require(same_floats(state->conv_window(), before->conv_window(), state->conv_window_size()) &&
                      same_floats(state->h(), before->h(), state->h_size()),
                  "a refused call changed the Mamba1State");
}

void mamba2(FuzzedDataProvider& in) {
  const Mamba2BlockInference& model = *tiny_models().m2;
  std::optional<Mamba2State> state;
  const std::int64_t batch = count(in, -1, 2);
  if (!pick_state(in, model, batch, 2,
                  {batch, mamba2_floats_per_row(blocks::Mamba2Dims::for_d_model(model.d_model()))}, state,
                  [&] { return Mamba2State(batch, in.ConsumeBool() ? 32 : 64); }))
    return;
  struct Piece {
    float* data;
    std::int64_t floats;
  };
  auto pieces = [](Mamba2State& s) {
    return std::vector<Piece>{{s.pin(Mamba2State::kConvWindow).data(), s.conv_window_size()},
                              {s.pin(Mamba2State::kH).data(), s.h_size()},
                              {s.pin(Mamba2State::kBufferXbc).data(), s.buffer_xbc_size()},
                              {s.pin(Mamba2State::kBufferDtraw).data(), s.buffer_dtraw_size()}};
  };
  if (state) {
    for (const Piece& p : pieces(*state)) fill(in, p.data, p.floats);
    // Mostly a short open chunk: the scalar twin replays every buffered row, which under the sanitizers
    // costs seconds at 255; the edges of [0, 256) come now and then.
    state->set_buffered_tokens(
        in.ConsumeIntegralInRange<int>(0, 7) == 0
            ? in.PickValueInArray<std::int64_t>({-1, 255, 256, 257, std::int64_t{1} << 62})
            : in.ConsumeIntegralInRange<std::int64_t>(0, 8));
  }
  std::optional<Mamba2State> before;
  if (state) before.emplace(state->clone());
  Tokens x = tokens(in, model.d_model());
  Mamba2State* s = state ? &*state : nullptr;
  Mamba2Report report;
  const bool long_chunk = state && state->buffered_tokens() > 8;
  const int call = reference_rarely(in, long_chunk ? 1 : 3);
  const bool ok = fuzz::accepted([&] {
    if (call == 0) model.forward(x.view, s, &report);
    if (call == 1) model.step(x.view, s, &report);
    if (call == 2) model.forward_reference(x.view, s);
    if (call == 3) model.step_reference(x.view, s);
  });
  if (!ok && state) {
    const std::vector<Piece> now = pieces(*state), then = pieces(*before);
    bool same = state->buffered_tokens() == before->buffered_tokens();
    for (std::size_t i = 0; i < now.size(); ++i)
      same = same && same_floats(now[i].data, then[i].data, now[i].floats);
    fuzz::require(same, "a refused call changed the Mamba2State");
  }
}

void mamba3(FuzzedDataProvider& in) {
  const Mamba3BlockInference& model = *tiny_models().m3;
  std::optional<Mamba3State> state;
  const std::int64_t batch = count(in, -1, 2);
  // Another state has one or two heads: maybe not ours.
  if (!pick_state(in, model, batch, 2, {batch, mamba3_floats_per_row(model.nheads())}, state,
                  [&] { return Mamba3State(batch, in.ConsumeIntegralInRange<std::int64_t>(1, 2)); }))
    return;
  if (state) {
    for (int p = 0; p < Mamba3State::kPieceCount; ++p)
      fill(in, state->pin(p).data(), state->piece_elements(p));
    state->set_buffered_tokens(count(in, -1, 66));
    state->set_pending(in.ConsumeIntegralInRange<int>(0, 7) == 0);
  }
  std::optional<Mamba3State> before;
  if (state) before.emplace(state->clone());
  Tokens x = tokens(in, model.d_model());
  Mamba3State* s = state ? &*state : nullptr;
  Mamba3Reports reports;
  Mamba3Reports* r = in.ConsumeBool() ? &reports : nullptr;
  const int call = reference_rarely(in, 3);
  const bool ok = fuzz::accepted([&] {
    if (call == 0) model.forward(x.view, s, r);
    if (call == 1) model.step(x.view, s, r);
    if (call == 2) model.forward_reference(x.view, s, r);
    if (call == 3) model.step_reference(x.view, s, r);
  });
  if (!ok && state) {
    bool same =
        state->buffered_tokens() == before->buffered_tokens() && state->pending() == before->pending();
    for (int p = 0; p < Mamba3State::kPieceCount; ++p)
      same = same && same_floats(state->piece(p), before->piece(p), state->piece_elements(p));
    fuzz::require(same, "a refused call changed the Mamba3State");
  }
}

// Ids (batch, length) with values mostly in [0, vocab), now and then outside.
std::vector<std::int32_t> ids_of(FuzzedDataProvider& in, std::int64_t batch, std::int64_t length) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch > 0 && length > 0 ? batch * length : 0));
  for (std::int32_t& id : ids)
    id = in.ConsumeIntegralInRange<int>(0, 31) == 0 ? in.ConsumeIntegral<std::int32_t>()
                                                    : in.ConsumeIntegralInRange<std::int32_t>(0, 2);
  return ids;
}

void samba_borrowed(FuzzedDataProvider& in) {
  const SambaInference& model = *tiny_models().samba;
  const auto& attention = ApiAccess::model(model).attention(1).dims();
  const std::int64_t batch = in.ConsumeIntegralInRange<std::int64_t>(-1, 3);
  const std::int64_t length = in.ConsumeIntegralInRange<std::int64_t>(-1, 4);
  std::vector<std::int32_t> ids = ids_of(in, batch, length);
  // Per-layer states, mostly one of the right kind per layer, now and then missing, swapped or extra.
  const std::size_t layers =
      in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegralInRange<std::size_t>(0, 3) : 2;
  std::vector<std::unique_ptr<Mamba3State>> mamba_states;
  // An attention layer: a state borrowing fuzzed buffers (what the binding makes for a caller's), its
  // fields fuzzed as a caller may set them.
  struct Borrowed {
    std::int64_t batch = 0, max_tokens = 0, cached_tokens = 0;
    float* k = nullptr;
    float* v = nullptr;
  };
  std::vector<std::unique_ptr<Borrowed>> caches;
  std::vector<std::vector<float>> buffers;
  std::vector<SambaLayerRef> borrowed(layers);
  std::vector<std::pair<std::size_t, Borrowed*>> attention_layers;
  for (std::size_t i = 0; i < layers; ++i) {
    const int kind =
        in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegralInRange<int>(0, 3) : (i == 0 ? 1 : 2);
    if (kind & 1) {
      const std::int64_t b =
          in.ConsumeBool() ? std::max<std::int64_t>(batch, 1) : in.ConsumeIntegralInRange<std::int64_t>(1, 3);
      mamba_states.push_back(std::make_unique<Mamba3State>(
          ApiAccess::wrap(ApiAccess::model(model).mamba3(0).allocate_state(b))));
      Mamba3State& m = *mamba_states.back();
      for (int p = 0; p < Mamba3State::kPieceCount; ++p) fill(in, m.pin(p).data(), m.piece_elements(p));
      m.set_buffered_tokens(count(in, 0, 64));
      borrowed[i].mamba3 = &m;
    }
    if (kind & 2) {
      auto cache = std::make_unique<Borrowed>();
      cache->batch = in.ConsumeBool() ? batch : count(in, -1, 3);
      cache->max_tokens = count(in, -1, 8);
      cache->cached_tokens = count(in, -2, 8);
      const std::int64_t per_row = attention.n_kv_heads * attention.head_dim;
      std::int64_t floats = 0;
      if (cache->batch > 0 && cache->max_tokens > 0) {
        if (cache->batch > kMaxStateFloats / per_row / cache->max_tokens) return;
        floats = cache->batch * per_row * cache->max_tokens;
      }
      buffers.emplace_back(static_cast<std::size_t>(floats));
      fill(in, buffers.back().data(), floats);
      cache->k = buffers.back().data();
      buffers.emplace_back(static_cast<std::size_t>(floats));
      cache->v = buffers.back().data();
      attention_layers.emplace_back(i, cache.get());
      caches.push_back(std::move(cache));
    }
  }
  std::vector<std::int64_t> cached_before;
  for (const auto& c : caches) cached_before.push_back(c->cached_tokens);
  const std::vector<std::vector<float>> buffers_before = buffers;
  std::vector<Mamba3State> mamba_before;
  for (const auto& m : mamba_states) mamba_before.push_back(m->clone());
  const bool reference = in.ConsumeBool();
  std::vector<std::unique_ptr<TransformerState>> kv_states;
  const bool ok = fuzz::accepted([&] {
    for (const auto& [i, c] : attention_layers) {
      kv_states.push_back(std::make_unique<TransformerState>(
          TransformerState::borrowing(c->batch, attention.n_kv_heads, attention.head_dim, c->max_tokens, 0,
                                      c->k, c->v, c->cached_tokens)));
      borrowed[i].attention = kv_states.back().get();
    }
    model.run_layers(IdsView{ids.data(), batch, length}, borrowed, "fuzz run_layers", reference);
  });
  if (ok) return;
  bool same = buffers.size() == buffers_before.size();
  for (std::size_t i = 0; same && i < buffers.size(); ++i)
    same = fuzz::same_bits(buffers[i], buffers_before[i]);
  for (std::size_t i = 0; i < kv_states.size(); ++i)
    same = same && kv_states[i]->cached_tokens() == cached_before[i];
  for (std::size_t i = 0; i < mamba_states.size(); ++i) {
    same = same && mamba_states[i]->buffered_tokens() == mamba_before[i].buffered_tokens();
    for (int p = 0; p < Mamba3State::kPieceCount; ++p)
      same = same && same_floats(mamba_states[i]->piece(p), mamba_before[i].piece(p),
                                 mamba_states[i]->piece_elements(p));
  }
  fuzz::require(same, "a refused Samba call changed a borrowed layer state");
}

void samba_owned(FuzzedDataProvider& in) {
  const SambaInference& model = *tiny_models().samba;
  std::optional<SambaState> state;
  const std::int64_t batch = count(in, -1, 3), max_tokens = count(in, -1, 6);
  // Layer 0 (Mamba-3) is allocated first: ask when both states are small or that one is already absurd.
  const auto& kv = ApiAccess::model(model).attention(1).dims();
  const bool small =
      worth_asking({batch, kv.n_kv_heads, max_tokens, kv.head_dim}) &&
      worth_asking({batch, mamba3_floats_per_row(ApiAccess::model(model).mamba3(0).dims().heads)});
  if (!small && !absurd({batch, mamba3_floats_per_row(ApiAccess::model(model).mamba3(0).dims().heads)}))
    return;
  if (!fuzz::accepted([&] { state.emplace(model.allocate_state(batch, max_tokens)); })) return;
  if (in.ConsumeBool()) state->mamba3(0)->set_buffered_tokens(count(in, -1, 66));
  if (in.ConsumeBool()) state->attention(1)->set_cached_tokens(count(in, -2, 8));
  const std::int64_t call_batch = in.ConsumeBool() ? batch : in.ConsumeIntegralInRange<std::int64_t>(-1, 3);
  const std::int64_t length = in.ConsumeIntegralInRange<std::int64_t>(-1, 4);
  std::vector<std::int32_t> ids = ids_of(in, call_batch, length);
  const SambaState before = state->clone();
  const IdsView view{ids.data(), call_batch, length};
  const int call = reference_rarely(in, 2);
  const bool ok = fuzz::accepted([&] {
    if (call == 0) model.forward(view, *state);
    if (call == 1) model.step(view, *state);
    if (call == 2) model.forward_reference(view, *state);
  });
  if (ok) return;
  const TransformerState& a = *state->attention(1);
  const TransformerState& b = *before.attention(1);
  bool same = a.cached_tokens() == b.cached_tokens() &&
              same_floats(a.k_cache_copy().data(), b.k_cache_copy().data(), a.cache_floats()) &&
              state->mamba3(0)->buffered_tokens() == before.mamba3(0)->buffered_tokens();
  for (int p = 0; p < Mamba3State::kPieceCount; ++p)
    same = same && same_floats(state->mamba3(0)->piece(p), before.mamba3(0)->piece(p),
                               state->mamba3(0)->piece_elements(p));
  fuzz::require(same, "a refused Samba call changed its SambaState");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  samebits::fuzz::single_threaded();
  tiny_models();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  // samba_owned twice: it takes choices 6 and 7.
  static void (*const cases[])(FuzzedDataProvider&) = {
      transformer_view, transformer_owned, mamba1, mamba2, mamba3, samba_borrowed, samba_owned, samba_owned};
  fuzz::run_one_of(in, cases);
  return 0;
}
