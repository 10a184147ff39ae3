// Hugging Face configs to CausalLM plans (docs/models.md §15, §16).
#include "io/hf_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <samebits/errors.hpp>
#include <set>
#include <sstream>

namespace samebits::io {
namespace {

namespace fs = std::filesystem;

const std::string kModels = "samebits.models: ";

const std::vector<std::string>& known_types() {
  static const std::vector<std::string> types{"gemma",   "gemma2", "llama", "mamba", "mamba2",
                                              "mistral", "phi3",   "qwen2", "qwen3", "smollm"};
  return types;
}

std::string quoted(const std::string& text) {
  const bool double_quotes = text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char q = double_quotes ? '"' : '\'';
  std::string out(1, q);
  for (char c : text) {
    if (c == '\\' || c == q) out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + q;
}

// A refusal of one config field (docs/models.md §15.2).
[[noreturn]] void refuse(const std::string& mt, const std::string& field, const std::string& value,
                         const std::string& why) {
  throw_value_error(kModels + "model_type " + quoted(mt) + ": " + field + "=" + value +
                    " is not honored: " + why);
}

// A config read with Python's dict semantics: a key present with null reads as None.
class Fields {
 public:
  Fields(const json::Value& config, std::string mt) : config_(config), mt_(std::move(mt)) {}
  const std::string& mt() const { return mt_; }
  const json::Value* get(const std::string& key) const { return config_.find(std::string_view(key)); }
  bool present(const std::string& key) const {
    const json::Value* v = get(key);
    return v != nullptr && !v->is_null();
  }
  std::string repr(const std::string& key) const {
    const json::Value* v = get(key);
    return v == nullptr ? "None" : python_repr(*v);
  }
  [[noreturn]] void refuse_field(const std::string& key, const std::string& why) const {
    refuse(mt_, key, repr(key), why);
  }

  // An int field (bool refused); a missing or null one takes `fallback` or is refused as required.
  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = std::nullopt) const {
    const json::Value* v = get(key);
    if (v == nullptr || v->is_null()) {
      if (fallback) return *fallback;
      refuse_field(key, "the field is required and the config lacks it");
    }
    if (!v->is_integer() || !v->as_int64()) refuse_field(key, "an integer is required");
    return *v->as_int64();
  }
  // A number (int or float; {"__float__": "Infinity"} included); bool and anything else refused.
  double number(const std::string& key, double fallback) const {
    const json::Value* v = get(key);
    if (v == nullptr) return fallback;
    std::optional<double> d = number_of(*v);
    if (!d) refuse_field(key, "a number is required");
    return *d;
  }
  bool truthy(const std::string& key, bool fallback) const {
    const json::Value* v = get(key);
    return v == nullptr ? fallback : truth(*v);
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const json::Value* v = get(key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_string()) refuse_field(key, "a string is required");
    return json::to_utf8(v->as_string());
  }

  static std::optional<double> number_of(const json::Value& v) {
    if (v.is_float()) return v.as_float();
    if (v.is_integer()) return std::strtod(v.integer_decimal().c_str(), nullptr);
    if (v.is_object() && v.as_object().size() == 1) {  // transformers 5.x: {"__float__": "Infinity"}
      const json::Value* f = v.find(std::string_view("__float__"));
      if (f != nullptr && f->is_string()) {
        const std::string text = json::to_utf8(f->as_string());
        if (text == "Infinity" || text == "inf") return HUGE_VAL;
        if (text == "-Infinity" || text == "-inf") return -HUGE_VAL;
        if (text == "NaN" || text == "nan") return std::nan("");
      }
    }
    return std::nullopt;
  }
  // Python's bool() of a JSON value.
  static bool truth(const json::Value& v) {
    switch (v.type()) {
      case json::Type::Null:
        return false;
      case json::Type::Bool:
        return v.as_bool();
      case json::Type::Integer:
        return v.integer_decimal() != "0";
      case json::Type::Float:
        return v.as_float() != 0.0;
      case json::Type::String:
        return !v.as_string().empty();
      case json::Type::Array:
        return !v.as_array().empty();
      case json::Type::Object:
        return !v.as_object().empty();
    }
    return false;
  }

 private:
  const json::Value& config_;
  std::string mt_;
};

// Sizes are positive and at most 2**31 - 1 (no checkpoint holds more; every product of two stays exact).
void check_size(const Fields& f, const char* key) {
  const json::Value* v = f.get(key);
  if (v == nullptr || !v->is_integer()) return;  // a default
  const std::int64_t n = *v->as_int64();
  if (n < 1) f.refuse_field(key, "a positive integer is required");
  if (n > 2147483647)
    f.refuse_field(key, "an integer up to 2**31 - 1 is required (no checkpoint holds more)");
}

std::string family_of(const std::string& mt) { return mt == "smollm" ? "llama" : mt; }

// The rope fields of either generation: 4.x top-level rope_theta / rope_scaling / partial_rotary_factor,
// 5.x the rope_parameters object (docs/models.md §15.1).
struct RopeSource {
  const json::Value* scaling = nullptr;  // the object naming the scaling (rope_scaling or rope_parameters)
  std::string scaling_field;
};

std::string scaling_type(const json::Value& s) {
  for (const char* key : {"rope_type", "type"}) {
    const json::Value* t = s.find(std::string_view(key));
    if (t != nullptr && t->is_string()) return json::to_utf8(t->as_string());
  }
  return "default";
}

void plan_rope(const Fields& f, HFPlan& plan) {
  const json::Value* params = f.get("rope_parameters");
  const bool params_object = params != nullptr && params->is_object();
  const json::Value* scaling = f.get("rope_scaling");
  const bool samebits = plan.loader == HFLoader::Samebits;
  if (scaling != nullptr && !scaling->is_null()) {
    if (!samebits)
      f.refuse_field("rope_scaling",
                     "rope type 'default' is the only one the interface names a value for; linear, dynamic, "
                     "yarn, longrope and llama3 scaling are refused");
  }
  const std::string top_type = f.string("rope_type", "default");
  if (top_type != "default" && (!samebits || (top_type != "linear" && top_type != "llama3")))
    f.refuse_field("rope_type", "rope type 'default' only");
  // The scaling object: 4.x rope_scaling, else 5.x rope_parameters.
  const json::Value* s = nullptr;
  std::string field;
  if (scaling != nullptr && !scaling->is_null()) {
    s = scaling;
    field = "rope_scaling";
  } else if (params_object) {
    s = params;
    field = "rope_parameters";
  }
  if (s != nullptr) {
    if (!s->is_object()) f.refuse_field(field, "a mapping with a 'rope_type' (or 'type') key is required");
    const std::string type = scaling_type(*s);
    if (type != "default") {
      if (!samebits)
        f.refuse_field(
            field,
            "rope type 'default' is the only one the interface names a value for; linear, dynamic, "
            "yarn, longrope and llama3 scaling are refused");
      if (type != "linear" && type != "llama3")
        f.refuse_field(field,
                       "rope type " + quoted(type) +
                           " is not served: the block spells default, linear and llama3 (dynamic, yarn "
                           "and longrope carry an attention_factor this profile does not spell)");
      auto need = [&](const char* key) -> const json::Value& {
        const json::Value* v = s->find(std::string_view(key));
        if (v == nullptr || v->is_null())
          f.refuse_field(field, "rope_scaling " + quoted(type) + " needs " + quoted(key));
        return *v;
      };
      auto number = [&](const char* key) {
        std::optional<double> d = Fields::number_of(need(key));
        if (!d) f.refuse_field(field, std::string(key) + " must be a number");
        return *d;
      };
      plan.block.rope_scaling = type;
      plan.block.rope_factor = number("factor");
      if (type == "llama3") {
        plan.block.rope_low_freq_factor = number("low_freq_factor");
        plan.block.rope_high_freq_factor = number("high_freq_factor");
        const json::Value& old = need("original_max_position_embeddings");
        if (!old.is_integer() || !old.as_int64())
          f.refuse_field(field, "original_max_position_embeddings must be an integer");
        plan.block.rope_original_max_position_embeddings = *old.as_int64();
      }
    }
  }
  // rope_theta: top level (4.x) or inside rope_parameters (5.x).
  if (f.get("rope_theta") != nullptr || !params_object) {
    plan.block.rope_theta = f.number("rope_theta", 10000.0);
  } else {
    const json::Value* theta = params->find(std::string_view("rope_theta"));
    if (theta != nullptr) {
      std::optional<double> d = Fields::number_of(*theta);
      if (!d) f.refuse_field("rope_parameters", "rope_theta must be a number");
      plan.block.rope_theta = *d;
    }
  }
}

// partial_rotary_factor -> rope_dim (samebits only; upstream rotates the whole head), once head_dim is known.
void plan_partial_rotary(const Fields& f, HFPlan& plan) {
  const json::Value* params = f.get("rope_parameters");
  const bool params_object = params != nullptr && params->is_object();
  if (plan.loader == HFLoader::Samebits) {
    std::optional<double> factor;
    std::string pfield = "partial_rotary_factor";
    if (f.get(pfield) != nullptr && !f.get(pfield)->is_null()) {
      factor = f.number(pfield, 1.0);
    } else if (params_object) {
      const json::Value* p = params->find(std::string_view("partial_rotary_factor"));
      if (p != nullptr && !p->is_null()) {
        factor = Fields::number_of(*p);
        pfield = "rope_parameters";
        if (!factor) f.refuse_field(pfield, "partial_rotary_factor must be a number");
      }
    }
    if (factor) {
      if (!(*factor > 0.0 && *factor <= 1.0)) f.refuse_field(pfield, "a factor in (0, 1] is required");
      const auto rd = static_cast<std::int64_t>(static_cast<double>(plan.block.head_dim) * *factor);
      plan.block.rope_dim = rd == plan.block.head_dim ? 0 : rd;
      if (rd < 2 || rd % 2 != 0)
        f.refuse_field(pfield, "head_dim*partial_rotary_factor = " + std::to_string(rd) +
                                   " rotary columns; the block rotates an even, positive number");
    }
  }
}

void plan_transformer(const Fields& f, HFPlan& plan) {
  const std::string& mt = f.mt();
  const bool samebits = plan.loader == HFLoader::Samebits;
  if (plan.family == "gemma2")
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"})
      if (f.present(key))
        f.refuse_field(key, "gemma2's softcaps and query scale are not in the interface's option matrix");
  if (plan.family == "gemma" || plan.family == "gemma2") {
    const std::string key = f.get("hidden_activation") != nullptr ? "hidden_activation" : "hidden_act";
    f.refuse_field(
        key, "the block's MLP is SwiGLU (silu gate); mlp values beyond 'swiglu' are not in the interface");
  }
  // 1. mixture of experts
  for (const char* key : {"num_local_experts", "num_experts", "num_experts_per_tok", "n_routed_experts"}) {
    const json::Value* v = f.get(key);
    if (v == nullptr || v->is_null()) continue;
    const std::optional<double> d =
        v->is_bool() ? std::optional<double>(v->as_bool() ? 1.0 : 0.0) : Fields::number_of(*v);
    if (!d || (*d != 0.0 && *d != 1.0))
      f.refuse_field(key, "mixture of experts: the block has one dense SwiGLU MLP");
  }
  // 2. rope scaling and theta (partial rotary once head_dim is known)
  plan_rope(f, plan);
  // 3. activation
  const std::string act = f.string("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    f.refuse_field(
        "hidden_act",
        "the block's MLP is SwiGLU (silu gate); mlp values beyond 'swiglu' are not in the interface");
  // 4. sliding-window alternation
  const bool use_window = f.truthy("use_sliding_window", false);
  if (use_window && !samebits)
    refuse(mt, "use_sliding_window", "True",
           "sliding-window-alternating layers (max_window_layers=" + f.repr("max_window_layers") +
               "): the block takes ONE window for every layer");
  const json::Value* layer_types = f.get("layer_types");
  if (layer_types != nullptr && layer_types->is_array() && !samebits) {
    std::set<std::string> kinds;
    for (const json::Value& t : layer_types->as_array()) kinds.insert(python_repr(t));
    if (kinds.size() > 1)
      f.refuse_field("layer_types",
                     "alternating attention kinds: the block takes one window for every layer");
  }
  // 5. integers
  plan.d_model = f.integer("hidden_size");
  plan.block.n_heads = f.integer("num_attention_heads");
  plan.block.n_kv_heads = f.integer("num_key_value_heads", plan.block.n_heads);
  if (plan.block.n_heads < 1) f.refuse_field("num_attention_heads", "a positive number of heads is required");
  plan.block.head_dim = f.integer("head_dim", plan.d_model / plan.block.n_heads);
  plan.intermediate = f.integer("intermediate_size");
  plan.n_layers = f.integer("num_hidden_layers");
  plan.vocab_size = f.integer("vocab_size");
  plan.max_position_embeddings = f.integer("max_position_embeddings", 8192);
  for (const char* key : {"hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                          "intermediate_size", "num_hidden_layers", "vocab_size", "max_position_embeddings"})
    check_size(f, key);
  // 6. head geometry
  const std::int64_t nh = plan.block.n_heads;
  const std::int64_t hd = plan.block.head_dim;
  if (nh * hd != plan.d_model)
    refuse(mt, "head_dim", std::to_string(hd),
           "n_heads*head_dim (" + std::to_string(nh) + "*" + std::to_string(hd) +
               ") must equal hidden_size " + std::to_string(plan.d_model) +
               (samebits ? " (the block's q and o projections are hidden_size wide; docs/models.md §15.2)"
                         : ""));
  if (nh % plan.block.n_kv_heads != 0)
    refuse(mt, "num_key_value_heads", std::to_string(plan.block.n_kv_heads),
           "num_attention_heads " + std::to_string(nh) + " is not a multiple of it");
  if (hd % 2 != 0) refuse(mt, "head_dim", std::to_string(hd), "head_dim must be even (the rotary pairs)");
  plan_partial_rotary(f, plan);
  // 7. floats
  const double eps = f.number("rms_norm_eps", 1e-6);
  plan.norm_eps = eps;
  plan.block.norm_eps = (!samebits && eps == 1e-5) ? 1e-6 : eps;  // docs/models.md §15.3 (eps quirk)
  // 8. sliding_window (read and checked for every family)
  std::int64_t window = 0;
  if (f.present("sliding_window")) {
    const json::Value* v = f.get("sliding_window");
    if (!v->is_integer() || !v->as_int64() || *v->as_int64() < 0)
      f.refuse_field("sliding_window", "an integer width or null");
    window = *v->as_int64();
  }
  // 9. flags
  const bool attention_bias = f.truthy("attention_bias", plan.family == "qwen2");
  const bool mlp_bias = f.truthy("mlp_bias", false);
  plan.tie_embeddings = f.truthy("tie_word_embeddings", false);
  if (f.present("attention_dropout")) {
    const std::optional<double> d = Fields::number_of(*f.get("attention_dropout"));
    if (!d || *d != 0.0)
      f.refuse_field("attention_dropout", "inference has no dropout and the profile refuses a nonzero value");
  }
  if (plan.family == "phi3" && !samebits && f.present("original_max_position_embeddings")) {
    const json::Value* v = f.get("original_max_position_embeddings");
    if (!v->is_integer() || v->as_int64() != plan.max_position_embeddings)
      f.refuse_field("original_max_position_embeddings",
                     "a longrope-extended context; rope_scaling is refused above and so is its extension");
  }
  plan.block.qk_norm = plan.family == "qwen3";
  if (!samebits) {
    plan.block.qkv_bias = attention_bias;
    plan.block.mlp_bias = mlp_bias;
    plan.window = window;
    return;
  }
  // samebits: the biases each family's modeling code creates (docs/models.md §15.1).
  plan.block.qkv_bias = plan.family != "phi3" && attention_bias;
  plan.block.o_bias =
      (plan.family == "llama" || plan.family == "mistral" || plan.family == "qwen3") && attention_bias;
  plan.block.mlp_bias = plan.family == "llama" && mlp_bias;
  // windows: per layer, where the family uses one
  if (layer_types != nullptr && !layer_types->is_null()) {
    if (!layer_types->is_array() ||
        static_cast<std::int64_t>(layer_types->as_array().size()) != plan.n_layers)
      f.refuse_field("layer_types", "one attention kind per layer (num_hidden_layers=" +
                                        std::to_string(plan.n_layers) + ") is required");
    for (const json::Value& t : layer_types->as_array()) {
      if (t.is_string_equal("sliding_attention"))
        plan.layer_type_windows.push_back(window);
      else if (t.is_string_equal("full_attention"))
        plan.layer_type_windows.push_back(0);
      else
        f.refuse_field("layer_types", "each kind must be 'full_attention' or 'sliding_attention'");
    }
  } else if (plan.family == "mistral" || plan.family == "phi3") {
    plan.window = window;
  } else if (use_window && (plan.family == "qwen2" || plan.family == "qwen3")) {
    plan.window = window;
    plan.window_from = std::max<std::int64_t>(f.integer("max_window_layers", 28), 0);
  }
}

// A Mamba field fixed by the block: its value (default = the fixed value) must equal it.
void fixed(const Fields& f, const std::string& key, const json::Value& want, const std::string& why) {
  const json::Value* v = f.get(key);
  if (v == nullptr) return;
  bool same = false;
  if (want.is_bool()) {
    same = (v->is_bool() && v->as_bool() == want.as_bool()) ||
           (v->is_integer() && v->integer_decimal() == (want.as_bool() ? "1" : "0"));
  } else {
    const std::optional<double> d =
        v->is_bool() ? std::optional<double>(v->as_bool() ? 1.0 : 0.0) : Fields::number_of(*v);
    same = d && *d == static_cast<double>(*want.as_int64());
  }
  if (!same) f.refuse_field(key, why);
}

void plan_mamba(const Fields& f, HFPlan& plan) {
  const bool one = plan.family == "mamba";
  plan.kind = one ? HFKind::Mamba1 : HFKind::Mamba2;
  plan.d_model = f.integer("hidden_size");
  plan.n_layers = f.integer("num_hidden_layers");
  plan.vocab_size = f.integer("vocab_size");
  for (const char* key : {"hidden_size", "num_hidden_layers", "vocab_size"}) check_size(f, key);
  const std::string doc =
      one ? "mamba/IDENTICAL_MAMBA_CONTRACT.md section 3)" : "mamba/IDENTICAL_MAMBA2_CONTRACT.md section 3)";
  const std::string block = one ? "Mamba1Block" : "Mamba2Block";
  auto fix_int = [&](const char* key, std::int64_t value) {
    fixed(f, key, json::Value::make_integer(value),
          block + " fixes it at " + std::to_string(value) + " (" + doc);
  };
  auto fix_bool = [&](const char* key, bool value) {
    fixed(f, key, json::Value::make_bool(value),
          block + " fixes it at " + (value ? "True" : "False") + " (" + doc);
  };
  if (one) {
    fix_int("state_size", 16);
    fix_int("conv_kernel", 4);
    fix_int("expand", 2);
    fix_bool("use_bias", false);
    fix_bool("use_conv_bias", true);
    const std::int64_t rank = (plan.d_model + 15) / 16;
    const json::Value* r = f.get("time_step_rank");
    if (r != nullptr && !r->is_string_equal("auto") &&
        !(r->is_integer() && !r->is_bool() && r->as_int64() == rank))
      f.refuse_field("time_step_rank",
                     "Mamba1Block fixes dt_rank at ceil(hidden_size/16) = " + std::to_string(rank));
    if (f.number("layer_norm_epsilon", 1e-5) != 1e-5)
      f.refuse_field("layer_norm_epsilon", "Mamba1Block fixes rms eps at 1e-5 (0x3727C5AC)");
    if (f.string("hidden_act", "silu") != "silu")
      f.refuse_field("hidden_act", "silu only, as the reference asserts");
  } else {
    fix_int("state_size", 128);
    fix_int("head_dim", 64);
    fix_int("expand", 2);
    fix_int("n_groups", 1);
    fix_int("chunk_size", 256);
    fix_int("conv_kernel", 4);
    fix_bool("use_bias", false);
    fix_bool("use_conv_bias", true);
    fix_bool("rms_norm", true);
    // transformers' Mamba2 always gates before its norm, whatever norm_before_gate says (docs/models.md
    // §15.3): only upstream's loader reads the flag.
    if (plan.loader == HFLoader::Mojolearn && f.truthy("norm_before_gate", false))
      f.refuse_field("norm_before_gate", "the gated norm is gate-then-norm (DEVIATION 787)");
    if (plan.d_model % 32 != 0)
      f.refuse_field("hidden_size", "Mamba2Block needs a multiple of 32 (headdim 64, expand 2)");
    const std::int64_t heads = 2 * plan.d_model / 64;
    if (f.present("num_heads") && f.integer("num_heads") != heads)
      f.refuse_field("num_heads", "expand*hidden_size/head_dim = " + std::to_string(heads) +
                                      " heads is fixed by the profile");
    if (f.number("layer_norm_epsilon", 1e-5) != 1e-5)
      f.refuse_field("layer_norm_epsilon", "Mamba2Block fixes rms eps at 1e-5 for both norms");
    plan.dt_lo = 0.0;
    plan.dt_hi = HUGE_VAL;
    const json::Value* limit = f.get("time_step_limit");
    if (limit != nullptr && !limit->is_null()) {
      std::optional<double> lo, hi;
      if (limit->is_array() && limit->as_array().size() == 2) {
        lo = Fields::number_of(limit->as_array()[0]);
        hi = Fields::number_of(limit->as_array()[1]);
      }
      if (!lo || !hi) f.refuse_field("time_step_limit", "a pair (lo, hi)");
      plan.dt_lo = *lo;
      plan.dt_hi = *hi;
    }
  }
  plan.norm_eps = 1e-5;
  plan.tie_embeddings = f.truthy("tie_word_embeddings", true);
}

}  // namespace

HFLoader hf_loader_from_name(const std::string& name) {
  if (name == "samebits") return HFLoader::Samebits;
  if (name == "mojolearn") return HFLoader::Mojolearn;
  throw_value_error("samebits.models.CausalLM.load: loader must be 'samebits' or 'mojolearn', got " +
                    quoted(name));
}

std::string python_repr(const json::Value& v) {
  switch (v.type()) {
    case json::Type::Null:
      return "None";
    case json::Type::Bool:
      return v.as_bool() ? "True" : "False";
    case json::Type::Integer:
      return v.integer_decimal();
    case json::Type::Float: {
      const double d = v.as_float();
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      return json::float_repr(d);
    }
    case json::Type::String:
      return quoted(json::to_utf8(v.as_string()));
    case json::Type::Array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.as_array().size(); ++i)
        out += (i ? ", " : "") + python_repr(v.as_array()[i]);
      return out + "]";
    }
    case json::Type::Object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.as_object()) {
        out += (first ? "" : ", ") + quoted(json::to_utf8(key)) + ": " + python_repr(value);
        first = false;
      }
      return out + "}";
    }
  }
  return "None";
}

json::Value read_hf_config(const std::string& path) {
  std::error_code error;
  std::string file = path;
  if (fs::is_directory(path, error)) file = (fs::path(path) / "config.json").string();
  if (!fs::is_regular_file(file, error))
    throw_not_found("samebits.models.HFConfig: " + file + " does not exist");
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw_value_error("samebits.models.HFConfig: " + file + " could not be read");
  try {
    return json::parse(text.str(), json::Dialect::Python);
  } catch (const json::ParseError& e) {
    throw_value_error("samebits.models.HFConfig: " + file + " is not JSON: " + e.what());
  }
}

HFPlan plan_for(const json::Value& config, const std::string& path, HFLoader loader) {
  if (!config.is_object()) throw_type_error("samebits.models.HFConfig: the config must be a JSON object");
  const json::Value* type = config.find(std::string_view("model_type"));
  if (type == nullptr || !type->is_string())
    throw_value_error(kModels + "the config at " + quoted(path) + " has no string model_type");
  const std::string mt = json::to_utf8(type->as_string());
  const std::vector<std::string>& known = known_types();
  if (std::find(known.begin(), known.end(), mt) == known.end()) {
    std::string list = "[";
    for (std::size_t i = 0; i < known.size(); ++i) list += (i ? ", " : "") + quoted(known[i]);
    throw_value_error(kModels + "model_type " + quoted(mt) + " is not in the option matrix; known: " + list +
                      "]");
  }
  HFPlan plan;
  plan.model_type = mt;
  plan.family = family_of(mt);
  plan.loader = loader;
  const Fields fields(config, mt);
  if (plan.family == "mamba" || plan.family == "mamba2") {
    plan_mamba(fields, plan);
    plan.embed_name = "backbone.embeddings.weight";
    plan.norm_name = "backbone.norm_f.weight";
  } else {
    plan_transformer(fields, plan);
    plan.embed_name = "model.embed_tokens.weight";
    plan.norm_name = "model.norm.weight";
  }
  if (!plan.tie_embeddings) plan.head_name = "lm_head.weight";
  return plan;
}

std::vector<HFTensorRef> HFPlan::layer_weights(std::int64_t i) const {
  std::vector<HFTensorRef> out;
  if (kind != HFKind::Transformer) {
    const std::string base = "backbone.layers." + std::to_string(i) + ".";
    const std::string mixer = base + "mixer.";
    if (kind == HFKind::Mamba1) {
      out.push_back({"norm.weight", base + "norm.weight"});
      for (const char* key : {"in_proj.weight", "conv1d.weight", "conv1d.bias", "x_proj.weight",
                              "dt_proj.weight", "dt_proj.bias", "A_log", "D", "out_proj.weight"})
        out.push_back({key, mixer + key});
    } else {
      out.push_back({"block_norm.weight", base + "norm.weight"});
      for (const char* key : {"in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias", "A_log", "D",
                              "norm.weight", "out_proj.weight"})
        out.push_back({key, mixer + key});
    }
    return out;
  }
  const std::string base = "model.layers." + std::to_string(i) + ".";
  const std::string attn = base + "self_attn.";
  const std::string mlp = base + "mlp.";
  const std::int64_t qw = block.n_heads * block.head_dim;
  const std::int64_t kw = block.n_kv_heads * block.head_dim;
  out.push_back({"input_layernorm.weight", base + "input_layernorm.weight"});
  out.push_back({"post_attention_layernorm.weight", base + "post_attention_layernorm.weight"});
  if (family == "phi3") {
    const std::string qkv = attn + "qkv_proj.weight";
    out.push_back({"q_proj.weight", qkv, 0, qw});
    out.push_back({"k_proj.weight", qkv, qw, qw + kw});
    out.push_back({"v_proj.weight", qkv, qw + kw, qw + 2 * kw});
    out.push_back({"o_proj.weight", attn + "o_proj.weight"});
    const std::string gate_up = mlp + "gate_up_proj.weight";
    out.push_back({"gate_proj.weight", gate_up, 0, intermediate});
    out.push_back({"up_proj.weight", gate_up, intermediate, 2 * intermediate});
    out.push_back({"down_proj.weight", mlp + "down_proj.weight"});
  } else {
    for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
      out.push_back({std::string(p) + ".weight", attn + p + ".weight"});
    for (const char* p : {"gate_proj", "up_proj", "down_proj"})
      out.push_back({std::string(p) + ".weight", mlp + p + ".weight"});
  }
  if (block.qkv_bias && family != "phi3")
    for (const char* p : {"q_proj", "k_proj", "v_proj"})
      out.push_back({std::string(p) + ".bias", attn + p + ".bias"});
  if (block.o_bias) out.push_back({"o_proj.bias", attn + "o_proj.bias"});
  if (block.mlp_bias && loader == HFLoader::Samebits)  // upstream maps none (docs/models.md §15.3)
    for (const char* p : {"up_proj", "down_proj", "gate_proj"})
      out.push_back({std::string(p) + ".bias", mlp + p + ".bias"});
  if (block.qk_norm)
    for (const char* p : {"q_norm", "k_norm"})
      out.push_back({std::string(p) + ".weight", attn + p + ".weight"});
  return out;
}

std::int64_t HFPlan::window_of(std::int64_t layer) const {
  if (!layer_type_windows.empty()) return layer_type_windows[static_cast<std::size_t>(layer)];
  return layer >= window_from ? window : 0;
}

namespace {
// Layer 0's distinct checkpoint names with the "<prefix>0." stripped (every layer has the same ones).
std::set<std::string> layer_suffixes(const HFPlan& plan, const std::string& prefix) {
  std::set<std::string> out;
  for (const HFTensorRef& ref : plan.layer_weights(0)) out.insert(ref.name.substr(prefix.size() + 2));
  return out;
}
}  // namespace

std::int64_t HFPlan::planned_count() const {
  const std::string prefix = kind == HFKind::Transformer ? "model.layers." : "backbone.layers.";
  const auto per_layer = static_cast<std::int64_t>(layer_suffixes(*this, prefix).size());
  return 2 + (head_name.empty() ? 0 : 1) + per_layer * n_layers;
}

bool HFPlan::is_planned(const std::string& name) const {
  if (name == embed_name || name == norm_name || (!head_name.empty() && name == head_name)) return true;
  const std::string prefix = kind == HFKind::Transformer ? "model.layers." : "backbone.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  std::size_t at = prefix.size();
  std::size_t end = at;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  const std::size_t digits = end - at;
  if (digits == 0 || digits > 18 || end >= name.size() || name[end] != '.' || (digits > 1 && name[at] == '0'))
    return false;
  const std::int64_t layer = std::stoll(name.substr(at, digits));
  return layer < n_layers && layer_suffixes(*this, prefix).count(name.substr(end + 1)) != 0;
}

}  // namespace samebits::io
