// Mamba3BlockInference (docs/api.md §6) with upstream's validation wording, and its per-sequence
// Mamba3State.
#pragma once

#include <cstdint>
#include <memory>
#include <samebits/mamba3_reports.hpp>
#include <samebits/pin.hpp>
#include <samebits/tensor.hpp>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

namespace blocks {
class Mamba3Block;  // the engine block and state (opaque here)
class Mamba3State;
}  // namespace blocks
struct ApiAccess;  // the engine's way in (src/api/api_access.hpp)

// The block's fixed widths (docs/blocks.md §3): state size N, head width P, rotated angle pairs R.
inline constexpr std::int64_t kMamba3StateDim = 128;
inline constexpr std::int64_t kMamba3HeadDim = 64;
inline constexpr std::int64_t kMamba3Angles = 32;

// Mamba-3's state (docs/blocks.md §3.2): ten pieces in the native argument order (theta, h, buffer_qrot,
// buffer_krot, buffer_v, buffer_dt, buffer_sig, buffer_adt, pending_k, pending_v), buffered_tokens and the
// pending flag of an upstream Input_States continuation.
class Mamba3State {
 public:
  Mamba3State(std::int64_t batch_size, std::int64_t heads);
  Mamba3State(Mamba3State&&) noexcept;
  Mamba3State& operator=(Mamba3State&&) noexcept;
  ~Mamba3State();
  // An independent copy; continuing it gives the bits the original would.
  Mamba3State clone() const;

  std::int64_t batch() const;
  std::int64_t heads() const;
  // The pieces by index: names, shapes, element counts and read-only views.
  static constexpr int kPieceCount = 10;
  static const char* piece_name(int piece);
  std::vector<std::int64_t> piece_shape(int piece) const;
  std::int64_t piece_elements(int piece) const;
  const float* piece(int piece) const;
  // A writable view of one piece. While any pin is alive every call scans the state; what was written
  // through a pin is scanned by the next call after the last one is gone.
  using Pin = BufferPin;
  Pin pin(int piece);

  // Valid rows of the open-chunk buffer (0 before the first token, in [1, 64] after a call); any value is
  // stored, a call refuses one outside [0, 64] before touching the state.
  std::int64_t buffered_tokens() const;
  void set_buffered_tokens(std::int64_t value);
  // Whether theta / h / pending_k / pending_v are an upstream Input_States continuation the next call
  // consumes.
  bool pending() const;
  void set_pending(bool value);
  // Copies the four pieces' bits (B*H*32, B*H*64*128, B*H*128, B*H*64 floats) and sets pending.
  void set_input_states(const float* theta, const float* h, const float* k, const float* v);

  // Diagnostics: the next call may skip its non-finite scan; a pin is alive.
  bool trusted() const;
  bool pinned() const;

 private:
  friend struct ApiAccess;
  explicit Mamba3State(std::unique_ptr<blocks::Mamba3State> impl);
  std::unique_ptr<blocks::Mamba3State> impl_;
};

class Mamba3BlockInference {
 public:
  // The nine named weights (docs/blocks.md §3.1), in any order: key set, the norm's rank, d_model (a multiple
  // of 32) and every shape are refused with upstream's wording ("samebits Mamba3Block: …"). The values
  // are copied. weight_format records how the weights were given ("float32", "bfloat16", "int8").
  explicit Mamba3BlockInference(const NamedTensors& weights, std::string weight_format = "float32");

  // The constructor's checks one by one, so a caller can interleave its own (dtype) refusals in upstream's
  // order: the key set, then per tensor (block_norm.weight first, returning d_model) the shape.
  static std::vector<std::string> weight_names();
  static void check_keys(const std::vector<std::string>& given);
  static std::int64_t check_norm_weight(const std::vector<std::int64_t>& shape);
  static void check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                           std::int64_t d_model);
  // x's rank, width and (for a step) length, in upstream's order. A step admits (B, d_model).
  void check_tokens(const std::vector<std::int64_t>& shape, bool step) const;

  // A zero state for batch_size rows ("batch_size must be positive" otherwise).
  Mamba3State allocate_state(std::int64_t batch_size) const;

  // y (B, L, d_model) for x (B, L, d_model). state == nullptr runs from a zero state and discards it;
  // otherwise the state is read and updated in place. reports (optional) receives the four reports.
  std::vector<float> forward(const TensorView& x, Mamba3State* state = nullptr,
                             Mamba3Reports* reports = nullptr) const;
  // One token per batch row: x (B, 1, d_model) or (B, d_model); the state is required.
  std::vector<float> step(const TensorView& x, Mamba3State* state, Mamba3Reports* reports = nullptr) const;
  // The same entry points through the scalar twin (tests and cross-checks).
  std::vector<float> forward_reference(const TensorView& x, Mamba3State* state = nullptr,
                                       Mamba3Reports* reports = nullptr) const;
  std::vector<float> step_reference(const TensorView& x, Mamba3State* state,
                                    Mamba3Reports* reports = nullptr) const;
  // The four reports of the call that left `state` as it is (valid while the state has not changed since).
  Mamba3Reports reports_of(const Mamba3State& state) const;
  // Always NotImplementedError: inference is forward only.
  [[noreturn]] void backward() const;

  std::int64_t d_model() const;
  std::int64_t d_inner() const;
  std::int64_t nheads() const;
  std::int64_t d_in_proj() const;
  // The nine weights' names and shapes in upstream order, and a copy of one, bit for bit.
  std::vector<TensorInfo> weight_table() const;
  std::vector<float> weight(std::size_t index) const;
  const std::string& weight_format() const { return weight_format_; }

 private:
  friend struct ApiAccess;
  std::vector<float> call(const TensorView& x, Mamba3State* state, Mamba3Reports* reports, bool step,
                          bool reference) const;

  std::shared_ptr<const blocks::Mamba3Block> block_;
  std::string weight_format_;
};

}  // namespace samebits
