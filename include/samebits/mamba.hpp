// Mamba1BlockInference and Mamba2BlockInference (docs/api.md §4, §5) with upstream's validation wording,
// and their per-sequence states Mamba1State / Mamba2State.
#pragma once

#include <cstdint>
#include <memory>
#include <samebits/pin.hpp>
#include <samebits/tensor.hpp>
#include <string>
#include <utility>
#include <vector>

namespace samebits {

namespace blocks {
class Mamba1Block;  // the engine blocks and states (opaque here)
class Mamba1State;
class Mamba2Block;
class Mamba2State;
class Mamba2Report;
}  // namespace blocks
struct ApiAccess;  // the engine's way in (src/api/api_access.hpp)

// The fixed widths (docs/blocks.md §1, §2): the causal convolution's window (both blocks), Mamba-1's state
// size, Mamba-2's head width P and state size N.
inline constexpr std::int64_t kMambaConvWidth = 4;
inline constexpr std::int64_t kMamba1StateDim = 16;
inline constexpr std::int64_t kMamba2HeadDim = 64;
inline constexpr std::int64_t kMamba2StateDim = 128;

// Mamba-1's state (docs/blocks.md §1.2): conv_window [B, d_inner, 4] and h [B, d_inner, 16], zero at start.
class Mamba1State {
 public:
  Mamba1State(std::int64_t batch_size, std::int64_t d_inner);
  Mamba1State(Mamba1State&&) noexcept;
  Mamba1State& operator=(Mamba1State&&) noexcept;
  ~Mamba1State();
  // An independent copy; continuing it gives the bits the original would.
  Mamba1State clone() const;

  std::int64_t batch() const;
  std::int64_t d_inner() const;
  // Read-only views of the two arrays (valid while the state lives), and their element counts.
  const float* conv_window() const;
  const float* h() const;
  std::int64_t conv_window_size() const;
  std::int64_t h_size() const;
  // Writable views; every call reads the arrays as they are.
  using Pin = BufferPin;
  Pin pin_conv_window();
  Pin pin_h();
  bool pinned() const;

 private:
  friend struct ApiAccess;
  explicit Mamba1State(std::unique_ptr<blocks::Mamba1State> impl);
  std::unique_ptr<blocks::Mamba1State> impl_;
};

// Mamba-2's state (docs/blocks.md §2.2): conv_window [B, conv_dim, 4], h [B, nheads, 64, 128], and the open
// chunk: buffer_xbc [B, 256, conv_dim], buffer_dtraw [B, 256, nheads] with buffered_tokens rows in use.
class Mamba2State {
 public:
  // d_model a positive multiple of 32.
  Mamba2State(std::int64_t batch_size, std::int64_t d_model);
  Mamba2State(Mamba2State&&) noexcept;
  Mamba2State& operator=(Mamba2State&&) noexcept;
  ~Mamba2State();
  Mamba2State clone() const;

  std::int64_t batch() const;
  std::int64_t d_model() const;
  std::int64_t nheads() const;
  std::int64_t conv_dim() const;
  // Read-only views of the four arrays (valid while the state lives), and their element counts.
  const float* conv_window() const;
  const float* h() const;
  const float* buffer_xbc() const;
  const float* buffer_dtraw() const;
  std::int64_t conv_window_size() const;
  std::int64_t h_size() const;
  std::int64_t buffer_xbc_size() const;
  std::int64_t buffer_dtraw_size() const;
  // The arrays by index: names and shapes.
  enum Buffer : int { kConvWindow, kH, kBufferXbc, kBufferDtraw };
  static const char* buffer_name(Buffer buffer);
  std::vector<std::int64_t> buffer_shape(Buffer buffer) const;
  // A writable view of one array. While any pin is alive every call scans the state; what was written
  // through a pin is scanned by the next call after the last one is gone. Pinning first evaluates the
  // last call's pending report, so an edit cannot reach it.
  using Pin = BufferPin;
  Pin pin(Buffer buffer);
  // Rows of the open chunk in use; any value is stored (evaluating a pending report first), a call refuses
  // one outside [0, 256).
  std::int64_t buffered_tokens() const;
  void set_buffered_tokens(std::int64_t value);
  // Evaluates the last call's pending report now (before the state is edited outside the engine).
  void settle_pending_report();
  // Diagnostics: the next call may skip its non-finite scan; a pin is alive.
  bool trusted() const;
  bool pinned() const;

 private:
  friend struct ApiAccess;
  explicit Mamba2State(std::unique_ptr<blocks::Mamba2State> impl);
  std::unique_ptr<blocks::Mamba2State> impl_;
};

// h_last of a Mamba-2 call, [B, nheads, 64, 128]: computed on first read from the state the call left (a
// decode step that does not close a chunk has no reason to compute it unless someone asks).
class Mamba2Report {
 public:
  Mamba2Report() = default;
  // Whether this holds a call's report.
  bool valid() const { return impl_ != nullptr; }
  std::vector<float> h_last() const;
  bool evaluated() const;

 private:
  friend struct ApiAccess;
  std::shared_ptr<blocks::Mamba2Report> impl_;
};

class Mamba1BlockInference {
 public:
  // The ten named weights (docs/blocks.md §1.1); key set, norm rank and shapes refused with upstream wording.
  explicit Mamba1BlockInference(const NamedTensors& weights, std::string weight_format = "float32");

  // The constructor's checks one by one, so a caller can interleave its own (dtype) refusals in upstream's
  // order: the names, the key set, block_norm.weight (returns d_model), then each other weight's shape.
  static std::vector<std::string> weight_names();
  static void check_keys(const std::vector<std::string>& given);
  static std::int64_t check_norm_weight(const std::vector<std::int64_t>& shape);
  static void check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                           std::int64_t d_model);
  // x's rank, width, step length and positivity, in upstream's order, messages starting "samebits <what>".
  void check_tokens(const std::vector<std::int64_t>& shape, bool step, const std::string& what) const;

  Mamba1State allocate_state(std::int64_t batch_size) const;
  // x (B, L, d_model). state == nullptr runs from a zero state and discards it; otherwise the state is
  // read and updated in place.
  std::vector<float> forward(const TensorView& x, Mamba1State* state = nullptr) const;
  // One token per batch row: x (B, 1, d_model) or (B, d_model); the state is required.
  std::vector<float> step(const TensorView& x, Mamba1State* state) const;
  // The same entry points through the scalar twin (tests and cross-checks).
  std::vector<float> forward_reference(const TensorView& x, Mamba1State* state = nullptr) const;
  std::vector<float> step_reference(const TensorView& x, Mamba1State* state) const;
  // Always NotImplementedError: inference is forward only.
  [[noreturn]] void backward() const;

  std::int64_t d_model() const;
  std::int64_t d_inner() const;
  std::int64_t dt_rank() const;
  // The ten weights' names and shapes in upstream order, and a copy of one, bit for bit.
  std::vector<TensorInfo> weight_table() const;
  std::vector<float> weight(std::size_t index) const;
  const std::string& weight_format() const { return weight_format_; }

 private:
  friend struct ApiAccess;
  std::vector<float> call(const TensorView& x, Mamba1State* state, bool step, bool reference) const;

  std::shared_ptr<const blocks::Mamba1Block> block_;
  std::string weight_format_;
};

class Mamba2BlockInference {
 public:
  // The nine named weights (docs/blocks.md §2.1) and dt_limit (lo, hi), converted to float32 here.
  Mamba2BlockInference(const NamedTensors& weights, double dt_lo = 0.0, double dt_hi = 1.0 / 0.0,
                       std::string weight_format = "float32");

  static std::vector<std::string> weight_names();
  static void check_keys(const std::vector<std::string>& given);
  static std::int64_t check_norm_weight(const std::vector<std::int64_t>& shape);  // returns d_model
  static void check_weight(const std::string& name, const std::vector<std::int64_t>& shape,
                           std::int64_t d_model);
  void check_tokens(const std::vector<std::int64_t>& shape, bool step, const std::string& what) const;

  Mamba2State allocate_state(std::int64_t batch_size) const;
  // As Mamba1BlockInference; additionally the call's report (h_last) goes to `report` when it is not null.
  // Pass the previous call's report as `superseded` when it will be dropped unread, so it is not evaluated.
  std::vector<float> forward(const TensorView& x, Mamba2State* state = nullptr,
                             Mamba2Report* report = nullptr, const Mamba2Report* superseded = nullptr) const;
  std::vector<float> step(const TensorView& x, Mamba2State* state, Mamba2Report* report = nullptr,
                          const Mamba2Report* superseded = nullptr) const;
  // The scalar twin; h_last (when not null) receives the call's final state directly.
  std::vector<float> forward_reference(const TensorView& x, Mamba2State* state = nullptr,
                                       std::vector<float>* h_last = nullptr) const;
  std::vector<float> step_reference(const TensorView& x, Mamba2State* state,
                                    std::vector<float>* h_last = nullptr) const;
  [[noreturn]] void backward() const;

  std::int64_t d_model() const;
  std::int64_t d_inner() const;
  std::int64_t nheads() const;
  std::int64_t conv_dim() const;
  // dt_limit as the block uses it (float32).
  std::pair<float, float> dt_limit() const;
  std::vector<TensorInfo> weight_table() const;
  std::vector<float> weight(std::size_t index) const;
  const std::string& weight_format() const { return weight_format_; }

 private:
  friend struct ApiAccess;
  std::vector<float> call(const TensorView& x, Mamba2State* state, bool step, bool reference,
                          Mamba2Report* report, std::vector<float>* h_last,
                          const Mamba2Report* superseded) const;

  std::shared_ptr<const blocks::Mamba2Block> block_;
  std::string weight_format_;
};

}  // namespace samebits
