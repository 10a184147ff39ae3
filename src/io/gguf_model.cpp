// GGUF model files to CausalLM plans and tensors (docs/gguf.md §10-§11).
#include "io/gguf_model.hpp"

#include <algorithm>
#include <samebits/errors.hpp>
#include <utility>

#include "io/gguf_keys.hpp"

namespace samebits::io {
namespace {

// The per-layer tensors: GGUF suffix and Hugging Face suffix (phi3's fused ffn_up is mapped apart).
struct LayerName {
  const char* gguf;
  const char* hf;
};
constexpr LayerName kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},      {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},      {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},          {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},          {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_qkv.weight", "self_attn.qkv_proj.weight"},  {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},           {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate.bias", "mlp.gate_proj.bias"},           {"ffn_up.bias", "mlp.up_proj.bias"},
    {"ffn_down.bias", "mlp.down_proj.bias"},
};

// Tensors some GGUF files carry that samebits does not run, each with the reason.
std::string refused_tensor_reason(const std::string& name) {
  if (name == "rope_freqs.weight") return "llama3-style RoPE frequency factors are not supported";
  if (name == "rope_factors_long.weight" || name == "rope_factors_short.weight")
    return "longrope scaling is not supported";
  if (name == "output.bias") return "a head bias is not supported";
  return "";
}

// The Hugging Face name of a GGUF tensor, or "" when the name is not one of the table.
std::string hf_name_of(const std::string& arch, const std::string& name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (name.compare(0, 4, "blk.") != 0) return "";
  std::size_t end = 4;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  if (end == 4 || end - 4 > 9 || end >= name.size() || name[end] != '.' || (end - 4 > 1 && name[4] == '0'))
    return "";
  const std::string layer = name.substr(4, end - 4);
  const std::string suffix = name.substr(end + 1);
  if (arch == "phi3" && suffix == "ffn_up.weight")
    return "model.layers." + layer + ".mlp.gate_up_proj.weight";
  for (const LayerName& n : kLayerNames)
    if (suffix == n.gguf) return "model.layers." + layer + "." + n.hf;
  return "";
}

// The GGUF name of a Hugging Face checkpoint name (the inverse of hf_name_of), for messages.
std::string gguf_name_of(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  const std::size_t dot = hf.find('.', prefix.size());
  if (hf.compare(0, prefix.size(), prefix) != 0 || dot == std::string::npos) return hf;
  const std::string suffix = hf.substr(dot + 1);
  const std::string blk = "blk." + hf.substr(prefix.size(), dot - prefix.size()) + ".";
  if (suffix == "mlp.gate_up_proj.weight") return blk + "ffn_up.weight";
  for (const LayerName& n : kLayerNames)
    if (suffix == n.hf) return blk + n.gguf;
  return hf;
}

// A required or defaulted size key, positive and below 2^31.
std::int64_t size_key(const GgufFile& file, const std::string& key, std::optional<std::int64_t> fallback) {
  const std::optional<std::uint64_t> v = gguf_uint(file, key);
  if (!v) {
    if (fallback) return *fallback;
    throw_value_error(gguf_where(file) + "key '" + key + "' is required and absent");
  }
  if (*v < 1 || *v > 2147483647)
    throw_value_error(gguf_where(file) + "key '" + key + "' = " + std::to_string(*v) +
                      "; a size from 1 to 2**31 - 1 is required");
  return static_cast<std::int64_t>(*v);
}

[[noreturn]] void refuse_key(const GgufFile& file, const std::string& key, const std::string& value,
                             const std::string& why) {
  throw_value_error(gguf_where(file) + "key '" + key + "' = " + value + ": " + why);
}

// RoPE scaling keys: absent, 'none', or 'linear' with no factor (or 0 or 1) is plain RoPE; anything else is
// refused (docs/gguf.md §10.2).
void check_rope_scaling(const GgufFile& file, const std::string& a) {
  const std::optional<std::string> type = gguf_string(file, a + ".rope.scaling.type");
  std::optional<double> factor = gguf_float(file, a + ".rope.scaling.factor");
  if (!factor) factor = gguf_float(file, a + ".rope.scale_linear");
  const bool plain_factor = !factor || *factor == 0.0 || *factor == 1.0;
  if (type && *type != "none" && *type != "linear")
    refuse_key(file, a + ".rope.scaling.type", "'" + *type + "'", "RoPE scaling is not supported");
  if (!plain_factor)
    refuse_key(file, a + ".rope.scaling.factor", std::to_string(*factor), "RoPE scaling is not supported");
}

HFPlan plan_of(const GgufFile& file, const std::string& arch) {
  const std::string a = arch + ".";
  HFPlan plan;
  plan.model_type = arch;
  plan.family = arch;
  plan.loader = HFLoader::Samebits;
  plan.kind = HFKind::Transformer;
  plan.d_model = size_key(file, a + "embedding_length", std::nullopt);
  plan.n_layers = size_key(file, a + "block_count", std::nullopt);
  plan.intermediate = size_key(file, a + "feed_forward_length", std::nullopt);
  plan.max_position_embeddings = size_key(file, a + "context_length", std::nullopt);
  HFBlockOptions& b = plan.block;
  b.n_heads = size_key(file, a + "attention.head_count", std::nullopt);
  b.n_kv_heads = size_key(file, a + "attention.head_count_kv", b.n_heads);
  b.head_dim = size_key(file, a + "attention.key_length", plan.d_model / b.n_heads);
  const std::int64_t value_length = size_key(file, a + "attention.value_length", b.head_dim);
  if (value_length != b.head_dim)
    refuse_key(file, a + "attention.value_length", std::to_string(value_length),
               "the block's value heads are key_length " + std::to_string(b.head_dim) + " wide");
  for (const char* key : {"expert_count", "expert_used_count"}) {
    const std::optional<std::uint64_t> experts = gguf_uint(file, a + key);
    if (experts && *experts > 0)
      refuse_key(file, a + key, std::to_string(*experts), "mixture of experts is not supported");
  }
  if (b.n_heads * b.head_dim != plan.d_model)
    refuse_key(file, a + "attention.key_length", std::to_string(b.head_dim),
               "head_count*key_length (" + std::to_string(b.n_heads) + "*" + std::to_string(b.head_dim) +
                   ") must equal embedding_length " + std::to_string(plan.d_model) +
                   " (the block's q and o projections are d_model wide)");
  if (b.n_heads % b.n_kv_heads != 0)
    refuse_key(file, a + "attention.head_count_kv", std::to_string(b.n_kv_heads),
               "head_count " + std::to_string(b.n_heads) + " is not a multiple of it");
  if (b.head_dim % 2 != 0)
    refuse_key(file, a + "attention.key_length", std::to_string(b.head_dim), "the head width must be even");
  const std::int64_t rope_dim = size_key(file, a + "rope.dimension_count", b.head_dim);
  if (rope_dim != b.head_dim) {
    if (arch == "llama")
      refuse_key(file, a + "rope.dimension_count", std::to_string(rope_dim),
                 "a llama model rotates its whole head (" + std::to_string(b.head_dim) + ")");
    if (rope_dim > b.head_dim || rope_dim % 2 != 0)
      refuse_key(file, a + "rope.dimension_count", std::to_string(rope_dim),
                 "an even count up to the head width " + std::to_string(b.head_dim) + " is required");
    b.rope_dim = rope_dim;
  }
  b.rope_theta = gguf_float(file, a + "rope.freq_base").value_or(10000.0);
  if (!(b.rope_theta > 0.0) || b.rope_theta > 1e30)
    refuse_key(file, a + "rope.freq_base", std::to_string(b.rope_theta),
               "a positive finite base is required");
  check_rope_scaling(file, arch);
  const std::optional<double> eps = gguf_float(file, a + "attention.layer_norm_rms_epsilon");
  if (!eps)
    throw_value_error(gguf_where(file) + "key '" + a +
                      "attention.layer_norm_rms_epsilon' is required and absent");
  if (!(*eps > 0.0) || *eps > 1.0)
    refuse_key(file, a + "attention.layer_norm_rms_epsilon", std::to_string(*eps),
               "a value in (0, 1] is required");
  plan.norm_eps = *eps;
  b.norm_eps = *eps;
  // Phi-3's window is honoured, as the config.json path does (docs/gguf.md §10.2).
  if (arch == "phi3") {
    const std::optional<std::uint64_t> window = gguf_uint(file, a + "attention.sliding_window");
    if (window && *window > 2147483647)
      refuse_key(file, a + "attention.sliding_window", std::to_string(*window), "too large");
    plan.window = static_cast<std::int64_t>(window.value_or(0));
  }
  // Options the tensors themselves show (layer 0 decides; every layer must then hold the same set).
  auto has = [&](const char* suffix) { return file.find_tensor(std::string("blk.0.") + suffix) != nullptr; };
  b.qkv_bias = arch != "phi3" && has("attn_q.bias");
  b.o_bias = (arch == "llama" || arch == "qwen3") && has("attn_output.bias");
  b.mlp_bias = arch == "llama" && has("ffn_gate.bias");
  b.qk_norm = arch == "qwen3";
  const GgufTensor* embed = file.find_tensor("token_embd.weight");
  if (embed == nullptr) throw_value_error(gguf_where(file) + "holds no tensor 'token_embd.weight'");
  if (embed->ne.size() != 2 || static_cast<std::int64_t>(embed->ne[0]) != plan.d_model)
    throw_value_error(gguf_where(file) + "tensor 'token_embd.weight' is not (embedding_length " +
                      std::to_string(plan.d_model) + ", n_vocab)");
  plan.vocab_size = static_cast<std::int64_t>(embed->ne[1]);
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens != nullptr && tokens->type == GgufValueType::Array &&
      static_cast<std::int64_t>(tokens->count()) != plan.vocab_size)
    throw_value_error(gguf_where(file) + "tokenizer.ggml.tokens holds " + std::to_string(tokens->count()) +
                      " tokens but token_embd.weight " + std::to_string(plan.vocab_size) + " rows");
  plan.tie_embeddings = file.find_tensor("output.weight") == nullptr;
  plan.embed_name = "model.embed_tokens.weight";
  plan.norm_name = "model.norm.weight";
  if (!plan.tie_embeddings) plan.head_name = "lm_head.weight";
  return plan;
}

}  // namespace

std::vector<std::int64_t> rope_row_order(std::int64_t heads, std::int64_t head_rows) {
  const std::int64_t half = head_rows / 2;
  std::vector<std::int64_t> order(static_cast<std::size_t>(heads * head_rows));
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t j = 0; j < head_rows; ++j)
      order[static_cast<std::size_t>(h * head_rows + j)] = h * head_rows + 2 * (j % half) + j / half;
  return order;
}

void unpermute_rope_rows(std::vector<float>& values, std::int64_t heads, std::int64_t head_rows,
                         std::int64_t cols) {
  const std::vector<std::int64_t> order = rope_row_order(1, head_rows);
  std::vector<float> head(static_cast<std::size_t>(head_rows * cols));
  for (std::int64_t h = 0; h < heads; ++h) {
    float* base = values.data() + h * head_rows * cols;
    std::copy(base, base + head_rows * cols, head.begin());
    for (std::int64_t j = 0; j < head_rows; ++j) {
      const std::int64_t stored = order[static_cast<std::size_t>(j)];
      std::copy(head.begin() + stored * cols, head.begin() + (stored + 1) * cols, base + j * cols);
    }
  }
}

GgufModel::GgufModel(const std::string& path) : file_(path) { map_tensors(); }

GgufModel::GgufModel(std::string name, std::string bytes) : file_(std::move(name), std::move(bytes)) {
  map_tensors();
}

void GgufModel::map_tensors() {
  const std::string where = gguf_where(file_);
  const std::optional<std::string> arch = gguf_string(file_, "general.architecture");
  if (!arch) throw_value_error(where + "key 'general.architecture' is required and absent");
  if (*arch == "mamba" || *arch == "mamba2")
    throw_value_error(
        where + "architecture '" + *arch +
        "' is refused by name: its ssm_a tensors hold A = -exp(A_log) already evaluated by the "
        "converter, which samebits' Mamba blocks cannot reproduce bit for bit (docs/gguf.md §10.1)");
  if (*arch != "llama" && *arch != "qwen2" && *arch != "qwen3" && *arch != "phi3")
    throw_value_error(where + "architecture '" + *arch +
                      "' is not supported; samebits runs 'llama', 'qwen2', 'qwen3' and 'phi3'");
  plan_ = plan_of(file_, *arch);
  for (const GgufTensor& t : file_.tensors()) {
    const std::string why = refused_tensor_reason(t.name);
    if (!why.empty()) throw_value_error(where + "tensor '" + t.name + "': " + why);
    const std::string hf = hf_name_of(*arch, t.name);
    if (hf.empty() || !plan_.is_planned(hf))
      throw_value_error(where + "tensor '" + t.name + "' is not one that architecture '" + *arch +
                        "' with these hyper-parameters uses");
    by_name_[hf] = &t;
  }
  const std::int64_t planned = plan_.planned_count();
  if (static_cast<std::int64_t>(by_name_.size()) != planned) {
    const std::vector<std::string> missing =
        plan_.first_planned(5, [&](const std::string& name) { return !contains(name); });
    std::string list;
    for (const std::string& name : missing) list += (list.empty() ? "'" : ", '") + gguf_name_of(name) + "'";
    throw_value_error(
        where + "lacks " + std::to_string(planned - static_cast<std::int64_t>(by_name_.size())) + " of the " +
        std::to_string(planned) + " tensors architecture '" + *arch + "' needs; first missing: " + list);
  }
}

std::vector<std::string> GgufModel::names() const {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : by_name_) out.push_back(name);
  return out;
}

const std::string& GgufModel::gguf_name(const std::string& name) const { return by_name_.at(name)->name; }

std::int64_t GgufModel::permuted_heads(const std::string& name, std::int64_t rows) const {
  if (plan_.family != "llama") return 0;
  const bool q = name.find(".self_attn.q_proj.") != std::string::npos;
  const bool k = name.find(".self_attn.k_proj.") != std::string::npos;
  if (!q && !k) return 0;
  const std::int64_t heads = q ? plan_.block.n_heads : plan_.block.n_kv_heads;
  const std::int64_t d = plan_.block.head_dim;
  if (rows != heads * d || d % 2 != 0)
    throw_value_error(gguf_where(file_) + "tensor '" + gguf_name(name) + "' has " + std::to_string(rows) +
                      " rows, not " + std::to_string(heads) + " heads of " + std::to_string(d));
  return heads;
}

std::vector<float> GgufModel::read(const std::string& name, std::vector<std::int64_t>& shape) const {
  const GgufTensor& t = *by_name_.at(name);
  std::vector<float> values = file_.dequantize(t.name);
  shape.assign(t.ne.rbegin(), t.ne.rend());
  const std::int64_t heads = permuted_heads(name, shape[0]);
  // The converter's per-head row order (docs/gguf.md §11), undone on the exact rows.
  if (heads > 0) unpermute_rope_rows(values, heads, shape[0] / heads, shape.size() == 2 ? shape[1] : 1);
  return values;
}

gemm::GgmlPart GgufModel::packed_part(const std::string& name, std::int64_t row_begin, std::int64_t row_end,
                                      std::int64_t& cols) const {
  const GgufTensor& t = *by_name_.at(name);
  if (t.ne.size() != 2)
    throw_value_error(gguf_where(file_) + "tensor '" + t.name + "' is not a matrix (" +
                      std::to_string(t.ne.size()) + " dimensions)");
  cols = static_cast<std::int64_t>(t.ne[0]);
  const std::int64_t rows = static_cast<std::int64_t>(t.ne[1]);
  if (row_end == 0) row_end = rows;
  if (row_begin < 0 || row_end > rows || row_begin >= row_end)
    throw_value_error(gguf_where(file_) + "tensor '" + t.name + "' has " + std::to_string(rows) +
                      " rows, too few for the row slice [" + std::to_string(row_begin) + ", " +
                      std::to_string(row_end) + ")");
  file_.check_finite(t);  // names the block, as dequantize does
  const std::uint64_t row_bytes = t.nbytes / t.ne[1];
  gemm::GgmlPart part;
  part.name = t.name;
  part.type = t.type;
  part.bytes = file_.tensor_bytes(t) + static_cast<std::uint64_t>(row_begin) * row_bytes;
  part.rows = row_end - row_begin;
  const std::int64_t heads = permuted_heads(name, rows);
  if (heads > 0) part.row_order = rope_row_order(heads, rows / heads);
  return part;
}

}  // namespace samebits::io
