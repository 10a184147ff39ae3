// SambaConfig: normalization, validation in upstream's order, block shapes and the stack registry.
#include "models/samba_config.hpp"

#include <cmath>
#include <limits>
#include <samebits/errors.hpp>
#include <utility>

#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"

namespace samebits::models {
namespace {

constexpr std::string_view kPrefix = "samebits.SambaConfig: ";

[[noreturn]] void refuse(std::string_view sentence) {
  throw_value_error(std::string(kPrefix) + std::string(sentence));
}

using Wide = __int128;

constexpr Wide kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr Wide kInt64Min = std::numeric_limits<std::int64_t>::min();

// Python ints never overflow; these sizes are exact until they leave 64 bits, then saturate and say so.
std::int64_t saturate(Wide value, bool& exact) {
  if (value > kInt64Max) {
    exact = false;
    return std::numeric_limits<std::int64_t>::max();
  }
  if (value < kInt64Min) {
    exact = false;
    return std::numeric_limits<std::int64_t>::min();
  }
  return static_cast<std::int64_t>(value);
}

// Python's // (floor division); the divisor is nonzero.
std::int64_t floor_divide(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::optional<SambaLayerKind> kind_of(std::string_view name) {
  if (name == kMamba3KindName) return SambaLayerKind::Mamba3;
  if (name == kAttentionKindName) return SambaLayerKind::Attention;
  return std::nullopt;
}

std::string kinds_tuple_repr() {
  std::string text(1, '(');  // appended piecewise: GCC 12 warns (falsely) on "(" + std::string
  text += python_str_repr(kMamba3KindName);
  text += ", ";
  text += python_str_repr(kAttentionKindName);
  text += ')';
  return text;
}

// The blocks' own tables with the dimensions as wide integers, so one saturation pass covers every entry.
using WideSpec = blocks::BasicTensorSpec<Wide>;

std::vector<WideSpec> wide_block_shapes(const SambaConfigArgs& f, SambaLayerKind kind) {
  const Wide dm = f.d_model;
  if (kind == SambaLayerKind::Mamba3) {
    return blocks::mamba3_tensor_table<Wide>(dm);  // d_model >= 1, so the head count's truncation is floor
  }
  if (!f.n_heads || !f.head_dim || !f.n_kv_heads || !f.intermediate) {
    throw_type_error(std::string(kPrefix) +
                     "an attention block's shapes need n_heads, n_kv_heads, head_dim and intermediate");
  }
  const Wide qw = Wide{*f.n_heads} * *f.head_dim;
  const Wide kw = Wide{*f.n_kv_heads} * *f.head_dim;
  return blocks::transformer_tensor_table<Wide>(dm, qw, kw, Wide{*f.intermediate});
}

std::vector<TensorSpec> narrow(const std::vector<WideSpec>& wide) {
  std::vector<TensorSpec> out;
  bool exact = true;
  for (const WideSpec& spec : wide) {
    TensorSpec narrowed(spec.name, {});
    for (Wide d : spec.shape) narrowed.shape.push_back(saturate(d, exact));
    out.push_back(std::move(narrowed));
  }
  return out;
}

bool is_python_printable_above_ascii(char32_t c) {
  // C1 controls, NO-BREAK SPACE and SOFT HYPHEN are the non-printable Latin-1 code points; further
  // Unicode categories (other spaces, format characters) are treated as printable here, which only
  // changes how an exotic layer name is quoted in a message.
  return !(c < 0xA1 || c == 0xAD);
}

}  // namespace

std::string_view samba_layer_kind_name(SambaLayerKind kind) {
  return kind == SambaLayerKind::Mamba3 ? kMamba3KindName : kAttentionKindName;
}

std::size_t SambaRegistry::index_of(std::string_view name) const {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].name == name) return i;
  }
  return npos;
}

double round_to_float32(double value, std::string_view field) {
  // The midpoint between FLT_MAX and 2^128 rounds (to even) up to infinity: 2^128 - 2^103.
  constexpr double kOverflowAt = 340282356779733661637539395458142568448.0;
  if (std::isfinite(value) && std::fabs(value) >= kOverflowAt) {
    refuse(std::string(field) + " does not fit float32 (float too large to pack with f format)");
  }
  return static_cast<double>(static_cast<float>(value));
}

std::string python_str_repr(std::string_view utf8) {
  // Decode leniently: a byte that does not start a valid sequence is shown as \xNN, which is what
  // Python shows for the surrogate-escaped byte.
  std::u32string points;
  for (std::size_t i = 0; i < utf8.size();) {
    unsigned char lead = static_cast<unsigned char>(utf8[i]);
    int extra = lead < 0x80 ? 0 : (lead >> 5) == 6 ? 1 : (lead >> 4) == 14 ? 2 : (lead >> 3) == 30 ? 3 : -1;
    char32_t c = extra == 0 ? lead : extra == 1 ? (lead & 0x1F) : extra == 2 ? (lead & 0x0F) : (lead & 0x07);
    bool ok = extra >= 0 && i + static_cast<std::size_t>(extra) < utf8.size();
    for (int k = 1; ok && k <= extra; ++k) {
      unsigned char next = static_cast<unsigned char>(utf8[i + static_cast<std::size_t>(k)]);
      ok = (next & 0xC0) == 0x80;
      c = (c << 6) | (next & 0x3F);
    }
    if (!ok) {
      points.push_back(lead);
      i += 1;
    } else {
      points.push_back(c);
      i += static_cast<std::size_t>(extra) + 1;
    }
  }
  bool has_single = points.find(U'\'') != std::u32string::npos;
  bool has_double = points.find(U'"') != std::u32string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(1, quote);
  auto hex_escape = [&](char32_t c, char kind, int digits) {
    out.push_back('\\');
    out.push_back(kind);
    for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out.push_back(kHex[(c >> shift) & 0xF]);
  };
  for (char32_t c : points) {
    if (c == U'\\' || c == static_cast<char32_t>(quote)) {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == U'\t') {
      out += "\\t";
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      hex_escape(c, 'x', 2);
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (!is_python_printable_above_ascii(c)) {
      hex_escape(c, 'x', 2);
    } else {
      // Printable: kept as UTF-8.
      if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      } else if (c < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      } else {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      }
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  out.push_back(quote);
  return out;
}

SambaConfig::SambaConfig(const SambaConfigArgs& args) : fields_(args) {
  // Normalization: upstream rounds both floats before any rule runs.
  fields_.norm_eps = round_to_float32(args.norm_eps, "norm_eps");
  fields_.dropout = round_to_float32(args.dropout, "dropout");

  // 1. sizes and a non-empty stack
  if (fields_.vocab < 2 || fields_.d_model < 1 || fields_.layers.empty()) {
    refuse("vocab >= 2, d_model >= 1 and at least one layer are required");
  }
  // 2. every kind known
  for (const std::string& name : fields_.layers) {
    std::optional<SambaLayerKind> kind = kind_of(name);
    if (!kind) refuse("layer kind " + python_str_repr(name) + "; the kinds are " + kinds_tuple_repr());
    kinds_.push_back(*kind);
  }
  // 3. Mamba-3 head geometry
  if (has_kind(SambaLayerKind::Mamba3) && fields_.d_model % kMamba3ModelMultiple != 0) {
    refuse("a mamba3 layer needs d_model to be a multiple of 32 (Mamba3Block)");
  }
  // 4. attention fields; the defaults are filled only when an attention layer exists
  if (has_kind(SambaLayerKind::Attention)) {
    if (!fields_.n_heads || !fields_.intermediate)
      refuse("an attention layer needs n_heads and intermediate");
    if (!fields_.head_dim) {
      // n_heads == 0 is a ZeroDivisionError upstream; no head_dim can make 0 heads span d_model, so it
      // is refused with the rule it breaks.
      if (*fields_.n_heads == 0) refuse("d_model must equal n_heads * head_dim");
      fields_.head_dim = floor_divide(fields_.d_model, *fields_.n_heads);
    }
    if (!fields_.n_kv_heads) fields_.n_kv_heads = fields_.n_heads;
    if (Wide{*fields_.n_heads} * *fields_.head_dim != fields_.d_model)
      refuse("d_model must equal n_heads * head_dim");
  }
  // 5. dropout (NaN fails)
  if (!(fields_.dropout >= 0.0 && fields_.dropout < 1.0)) refuse("dropout must be in [0, 1)");
  // 6. final-norm eps (NaN fails)
  if (!(fields_.norm_eps >= 0.0)) refuse("norm_eps must be >= 0");
}

bool SambaConfig::has_kind(SambaLayerKind kind) const {
  for (SambaLayerKind k : kinds_) {
    if (k == kind) return true;
  }
  return false;
}

std::vector<TensorSpec> SambaConfig::block_shapes(SambaLayerKind kind) const {
  return narrow(wide_block_shapes(fields_, kind));
}

std::vector<TensorSpec> SambaConfig::block_shapes(std::string_view kind) const {
  return block_shapes(kind == kMamba3KindName ? SambaLayerKind::Mamba3 : SambaLayerKind::Attention);
}

std::int64_t SambaConfig::tensor_count() const {
  return 2 + (fields_.tie_embeddings ? 0 : 1) +
         static_cast<std::int64_t>(kSambaBlockTensorCount * fields_.layers.size());
}

SambaRegistry SambaConfig::registry() const {
  SambaRegistry registry;
  Wide offset = 0;
  auto add = [&](std::string name, const std::vector<Wide>& shape) {
    SambaRegistryEntry entry;
    entry.name = std::move(name);
    Wide size = 1;
    for (Wide d : shape) {
      entry.shape.push_back(saturate(d, registry.exact));
      // Keep the product bounded so it cannot wrap; only its sign and whether it fits 64 bits matter then.
      size *= d;
      if (size > kInt64Max) size = kInt64Max + 1;
      if (size < kInt64Min) size = kInt64Min - 1;
    }
    entry.size = saturate(size, registry.exact);
    entry.offset = saturate(offset, registry.exact);
    offset += size;
    if (offset > kInt64Max) offset = kInt64Max + 1;
    registry.entries.push_back(std::move(entry));
  };
  const Wide vocab = fields_.vocab, dm = fields_.d_model;
  add("embed.weight", {vocab, dm});
  for (std::size_t i = 0; i < kinds_.size(); ++i) {
    for (const WideSpec& spec : wide_block_shapes(fields_, kinds_[i])) {
      add("layers." + std::to_string(i) + "." + spec.name, spec.shape);
    }
  }
  add("norm_f.weight", {dm});
  if (!fields_.tie_embeddings) add("lm_head.weight", {vocab, dm});
  registry.total = saturate(offset, registry.exact);
  return registry;
}

}  // namespace samebits::models
