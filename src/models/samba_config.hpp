// SambaConfig (docs/formats.md §1): the stack's shape, its validation, the fixed block constants and the
// tensor registry whose order the checkpoints and the optimizer depend on.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "blocks/common/tensor_spec.hpp"
#include "blocks/mamba3/scalar.hpp"
#include "blocks/mamba3/state.hpp"
#include "blocks/transformer/state.hpp"

namespace samebits::models {

using blocks::TensorSpec;

// ------------------------------------------------------------------ fixed per-block constants (1.4)

// Mamba-3 (SISO, fp32 profile): not configurable, they are part of the arithmetic. The block's own
// constants (blocks/mamba3/), under the names of the format.
inline constexpr std::int64_t kMamba3HeadDim = blocks::mamba3::kHeadDim;           // P
inline constexpr std::int64_t kMamba3Expand = 2;                                   // d_inner = 2 * d_model
inline constexpr std::int64_t kMamba3StateSize = blocks::mamba3::kStateDim;        // N (d_state)
inline constexpr std::int64_t kMamba3Groups = 1;                                   // ngroups
inline constexpr std::int64_t kMamba3RopeAngles = blocks::mamba3::kAngles;         // R (rope fraction 0.5)
inline constexpr std::int64_t kMamba3Chunk = blocks::mamba3::kChunk;               // Q
inline constexpr std::int64_t kMamba3ModelMultiple = blocks::mamba3::kDModelStep;  // 32
static_assert(kMamba3ModelMultiple == kMamba3HeadDim / kMamba3Expand);
inline constexpr float kMamba3NormEps = blocks::mamba3::kNormEps;  // block norm and the B/C norms
inline constexpr float kMamba3AFloor = blocks::mamba3::kAFloor;
inline constexpr std::string_view kMamba3Profile = "mojolearn.identical.mamba3.siso.fp32.v1";

// Attention inside a Samba stack: full causal (window 0), default RoPE, no biases.
inline constexpr std::uint32_t kAttentionNormEpsBits = 0x358637BD;    // 1e-6f
inline constexpr std::uint32_t kAttentionRopeThetaBits = 0x461C4000;  // 10000.0f
static_assert(std::bit_cast<std::uint32_t>(blocks::kTransformerNormEps) == kAttentionNormEpsBits);
static_assert(std::bit_cast<std::uint32_t>(blocks::kRopeTheta) == kAttentionRopeThetaBits);
inline constexpr std::int64_t kAttentionWindow = 0;
// Absolute positions stay below this.
inline constexpr std::int64_t kAttentionMaxPositions = blocks::kMaxPositions;
inline constexpr std::string_view kAttentionProfile = "mojolearn.identical.transformer.fp32.v1";

// ------------------------------------------------------------------------------ layer kinds

enum class SambaLayerKind { Mamba3, Attention };

inline constexpr std::string_view kMamba3KindName = "mamba3";
inline constexpr std::string_view kAttentionKindName = "attention";
std::string_view samba_layer_kind_name(SambaLayerKind kind);

// Each block's tensor names in its `_W_NAMES` order (docs/formats.md §1.5); both kinds have nine.
inline constexpr std::size_t kSambaBlockTensorCount = 9;
inline constexpr std::array<const char*, kSambaBlockTensorCount> kMamba3TensorNames = {
    "block_norm.weight", "in_proj.weight", "dt_bias", "B_norm.weight",
    "C_norm.weight",     "B_bias",         "C_bias",  "D",
    "out_proj.weight"};
inline constexpr std::array<const char*, kSambaBlockTensorCount> kAttentionTensorNames = {
    "input_layernorm.weight", "post_attention_layernorm.weight",
    "q_proj.weight",          "k_proj.weight",
    "v_proj.weight",          "o_proj.weight",
    "gate_proj.weight",       "up_proj.weight",
    "down_proj.weight"};

// The validator's bound on the total parameter count N (an int32 index).
inline constexpr std::int64_t kSambaMaxParameters = 2147483647;

// ------------------------------------------------------------------------------ the registry

struct SambaRegistryEntry {
  std::string name;  // "embed.weight", "layers.{i}.{block name}", "norm_f.weight", "lm_head.weight"
  std::vector<std::int64_t> shape;  // may hold a non-positive dimension for a config no checkpoint admits
  std::int64_t size = 0;            // product of shape
  std::int64_t offset = 0;          // element offset in the flat float32 vector (running prefix sum)
};

struct SambaRegistry {
  std::vector<SambaRegistryEntry> entries;  // stack order (docs/formats.md §1.6)
  std::int64_t total = 0;                   // N, the sum of every size
  // False when some dimension, size, offset or the total did not fit 64 bits and was saturated; the
  // checkpoint validator refuses such configs by the int32 bound long before that matters.
  bool exact = true;

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t index_of(std::string_view name) const;
};

// ------------------------------------------------------------------------------ the config

// The constructor's arguments after Python's int()/str()/bool()/float() (the Python class does those
// conversions; a JSON reader maps its values onto these types). norm_eps and dropout are still doubles
// here: the config rounds them to float32.
struct SambaConfigArgs {
  std::int64_t vocab = 0;
  std::int64_t d_model = 0;
  std::vector<std::string> layers;
  std::optional<std::int64_t> n_heads;
  std::optional<std::int64_t> n_kv_heads;
  std::optional<std::int64_t> head_dim;
  std::optional<std::int64_t> intermediate;
  bool tie_embeddings = true;
  double norm_eps = 1e-5;
  double dropout = 0.0;

  friend bool operator==(const SambaConfigArgs&, const SambaConfigArgs&) = default;
};

// Immutable, validated stack shape. Every refusal is samebits::Error (kind Value) with upstream's
// sentence under the "samebits.SambaConfig: " prefix, checked in upstream's order (docs/formats.md §1.2).
class SambaConfig {
 public:
  explicit SambaConfig(const SambaConfigArgs& args);

  std::int64_t vocab() const { return fields_.vocab; }
  std::int64_t d_model() const { return fields_.d_model; }
  const std::vector<std::string>& layers() const { return fields_.layers; }
  const std::vector<SambaLayerKind>& layer_kinds() const { return kinds_; }
  // Absent for a Mamba-only config that did not give them; always present when an attention layer exists.
  std::optional<std::int64_t> n_heads() const { return fields_.n_heads; }
  std::optional<std::int64_t> n_kv_heads() const { return fields_.n_kv_heads; }
  std::optional<std::int64_t> head_dim() const { return fields_.head_dim; }
  std::optional<std::int64_t> intermediate() const { return fields_.intermediate; }
  bool tie_embeddings() const { return fields_.tie_embeddings; }
  double norm_eps() const { return fields_.norm_eps; }  // a float32 value held as a double
  double dropout() const { return fields_.dropout; }    // likewise
  float norm_eps_f32() const { return static_cast<float>(fields_.norm_eps); }  // exact

  bool has_kind(SambaLayerKind kind) const;
  // The normalized fields: what to_dict emits (and what rebuilds an equal config).
  const SambaConfigArgs& fields() const { return fields_; }

  // (name, shape) of one block kind in its `_W_NAMES` order. Like upstream, every kind but "mamba3"
  // reads as attention; an attention block of a config without n_heads/head_dim/n_kv_heads/intermediate
  // is a TypeError (upstream multiplies None).
  std::vector<TensorSpec> block_shapes(SambaLayerKind kind) const;
  std::vector<TensorSpec> block_shapes(std::string_view kind) const;
  // Tensor count T = 2 + (tied ? 0 : 1) + 9 * len(layers).
  std::int64_t tensor_count() const;
  SambaRegistry registry() const;

  friend bool operator==(const SambaConfig& a, const SambaConfig& b) { return a.fields_ == b.fields_; }

 private:
  SambaConfigArgs fields_;
  std::vector<SambaLayerKind> kinds_;
};

// Python's repr() of a str, for messages that quote a value with %r.
std::string python_str_repr(std::string_view utf8);

// The float32 nearest to `value` (ties to even) as a double, like mojolearn's _round_f32. NaN and the
// infinities pass through; a finite value that rounds past the float32 range is refused (Python's
// struct raises OverflowError there), naming `field`.
double round_to_float32(double value, std::string_view field);

}  // namespace samebits::models
