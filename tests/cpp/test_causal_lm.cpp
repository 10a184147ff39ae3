// CausalLM over synthetic Hugging Face checkpoints of every family: the plan of each config (samebits' and
// upstream's loader), the stack against its own blocks, the seed surface's identities (step == forward at
// every position, split prefill, a row alone == the row in a batch, threads and SIMD targets, bf16 / int8 ==
// their materialized float32), greedy generate, and every refusal's wording.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <samebits/causal_lm.hpp>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <samebits/lowbit.hpp>
#include <string>
#include <vector>

#include "io/hf_config.hpp"
#include "models/causal_lm.hpp"
#include "safetensors_support.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::same_bits;
using testing::value_error_of;

struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  bool int32 = false;  // stored as I32 (the values converted)
};
using Tensors = std::map<std::string, Tensor>;

// The writers' layout (docs/models.md §14) with F32 or BF16 payloads (BF16: the value's own bf16 narrowing),
// or I32 for a tensor marked so.
std::string safetensors_bytes(const Tensors& tensors, bool bf16) {
  std::map<std::string, testing::StoredTensor> stored;
  for (const auto& [name, t] : tensors) {
    testing::StoredTensor& out = stored[name];
    out.dtype = t.int32 ? "I32" : bf16 ? "BF16" : "F32";
    out.shape = t.shape;
    if (t.int32) {
      std::vector<std::int32_t> ints(t.values.begin(), t.values.end());
      out.bytes.assign(reinterpret_cast<const char*>(ints.data()), ints.size() * 4);
    } else if (bf16) {
      std::vector<std::uint16_t> bits(t.values.size());
      lowbit::bf16_from_f32_array(t.values.data(), t.values.size(), bits.data());
      out.bytes.assign(reinterpret_cast<const char*>(bits.data()), bits.size() * 2);
    } else {
      out.bytes.assign(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
    }
  }
  return testing::safetensors_bytes(stored);
}

// A scratch directory per test, removed afterwards.
class Scratch : public testing::ScratchDir {
 public:
  Scratch() : ScratchDir("samebits_causal_lm_") {}
  // A checkpoint directory `name` with config.json and model.safetensors.
  std::string model(const std::string& name, const std::string& config, const Tensors& tensors,
                    bool bf16 = false) const {
    const fs::path dir = fs::path(path()) / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json", std::ios::binary) << config;
    std::ofstream(dir / "model.safetensors", std::ios::binary) << safetensors_bytes(tensors, bf16);
    return dir.string();
  }
};

// ------------------------------------------------------------------ synthetic families

struct Family {
  std::string name;
  std::string config;
  Tensors tensors;
};

void put(Tensors& t, const std::string& name, std::vector<std::int64_t> shape, testing::Rng& rng, float scale,
         float offset = 0.0f) {
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  std::vector<float> v = rng.uniform_vector(static_cast<std::size_t>(count), scale);
  for (float& x : v) x += offset;
  t[name] = {std::move(shape), std::move(v)};
}

constexpr std::int64_t kVocab = 64;
constexpr std::int64_t kD = 32;

// A transformer family: 2 layers, d 32, 4 heads of 8, 2 kv heads, intermediate 48.
Family transformer(const std::string& name, const std::string& mt, const std::string& extra, bool tied,
                   bool qkv_bias, bool o_bias, bool mlp_bias, bool qk_norm, std::uint64_t seed) {
  testing::Rng rng(seed);
  Family f{name, "", {}};
  const bool phi3 = mt == "phi3";
  f.config = "{\"model_type\": \"" + mt +
             "\", \"hidden_size\": 32, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
             "\"intermediate_size\": 48, \"num_hidden_layers\": 2, \"vocab_size\": 64, "
             "\"max_position_embeddings\": 64, \"tie_word_embeddings\": " +
             std::string(tied ? "true" : "false") + extra + "}";
  put(f.tensors, "model.embed_tokens.weight", {kVocab, kD}, rng, 1.0f);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    put(f.tensors, p + "input_layernorm.weight", {kD}, rng, 0.2f, 1.0f);
    put(f.tensors, p + "post_attention_layernorm.weight", {kD}, rng, 0.2f, 1.0f);
    if (phi3) {
      put(f.tensors, p + "self_attn.qkv_proj.weight", {32 + 16 + 16, kD}, rng, 0.3f);
      put(f.tensors, p + "mlp.gate_up_proj.weight", {96, kD}, rng, 0.3f);
    } else {
      put(f.tensors, p + "self_attn.q_proj.weight", {32, kD}, rng, 0.3f);
      put(f.tensors, p + "self_attn.k_proj.weight", {16, kD}, rng, 0.3f);
      put(f.tensors, p + "self_attn.v_proj.weight", {16, kD}, rng, 0.3f);
      put(f.tensors, p + "mlp.gate_proj.weight", {48, kD}, rng, 0.3f);
      put(f.tensors, p + "mlp.up_proj.weight", {48, kD}, rng, 0.3f);
    }
    put(f.tensors, p + "self_attn.o_proj.weight", {kD, 32}, rng, 0.3f);
    put(f.tensors, p + "mlp.down_proj.weight", {kD, 48}, rng, 0.3f);
    if (qkv_bias) {
      put(f.tensors, p + "self_attn.q_proj.bias", {32}, rng, 0.1f);
      put(f.tensors, p + "self_attn.k_proj.bias", {16}, rng, 0.1f);
      put(f.tensors, p + "self_attn.v_proj.bias", {16}, rng, 0.1f);
    }
    if (o_bias) put(f.tensors, p + "self_attn.o_proj.bias", {kD}, rng, 0.1f);
    if (mlp_bias) {
      put(f.tensors, p + "mlp.gate_proj.bias", {48}, rng, 0.1f);
      put(f.tensors, p + "mlp.up_proj.bias", {48}, rng, 0.1f);
      put(f.tensors, p + "mlp.down_proj.bias", {kD}, rng, 0.1f);
    }
    if (qk_norm) {
      put(f.tensors, p + "self_attn.q_norm.weight", {8}, rng, 0.2f, 1.0f);
      put(f.tensors, p + "self_attn.k_norm.weight", {8}, rng, 0.2f, 1.0f);
    }
  }
  put(f.tensors, "model.norm.weight", {kD}, rng, 0.2f, 1.0f);
  if (!tied) put(f.tensors, "lm_head.weight", {kVocab, kD}, rng, 0.5f);
  return f;
}

Family mamba(const std::string& mt, const std::string& extra, std::uint64_t seed) {
  testing::Rng rng(seed);
  Family f{mt, "", {}};
  f.config = "{\"model_type\": \"" + mt +
             "\", \"hidden_size\": 32, \"num_hidden_layers\": 2, "
             "\"vocab_size\": 64" +
             extra + "}";
  put(f.tensors, "backbone.embeddings.weight", {kVocab, kD}, rng, 1.0f);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "backbone.layers." + std::to_string(i) + ".";
    const std::string m = p + "mixer.";
    put(f.tensors, p + "norm.weight", {kD}, rng, 0.2f, 1.0f);
    if (mt == "mamba") {
      put(f.tensors, m + "in_proj.weight", {128, kD}, rng, 0.2f);
      put(f.tensors, m + "conv1d.weight", {64, 1, 4}, rng, 0.3f);
      put(f.tensors, m + "conv1d.bias", {64}, rng, 0.1f);
      put(f.tensors, m + "x_proj.weight", {34, 64}, rng, 0.2f);
      put(f.tensors, m + "dt_proj.weight", {64, 2}, rng, 0.3f);
      put(f.tensors, m + "dt_proj.bias", {64}, rng, 0.5f, -2.0f);
      put(f.tensors, m + "A_log", {64, 16}, rng, 0.5f, 0.5f);
      put(f.tensors, m + "D", {64}, rng, 0.5f, 1.0f);
      put(f.tensors, m + "out_proj.weight", {kD, 64}, rng, 0.2f);
    } else {
      put(f.tensors, m + "in_proj.weight", {385, kD}, rng, 0.2f);
      put(f.tensors, m + "conv1d.weight", {320, 1, 4}, rng, 0.3f);
      put(f.tensors, m + "conv1d.bias", {320}, rng, 0.1f);
      put(f.tensors, m + "dt_bias", {1}, rng, 0.5f, -1.0f);
      put(f.tensors, m + "A_log", {1}, rng, 0.5f, 0.5f);
      put(f.tensors, m + "D", {1}, rng, 0.5f, 1.0f);
      put(f.tensors, m + "norm.weight", {64}, rng, 0.2f, 1.0f);
      put(f.tensors, m + "out_proj.weight", {kD, 64}, rng, 0.2f);
    }
  }
  put(f.tensors, "backbone.norm_f.weight", {kD}, rng, 0.2f, 1.0f);
  return f;
}

std::vector<Family> families() {
  std::vector<Family> out;
  out.push_back(
      transformer("llama_tied", "llama", ", \"rms_norm_eps\": 1e-05", true, false, false, false, false, 1));
  out.push_back(
      transformer("llama_untied_biases", "llama",
                  ", \"rms_norm_eps\": 1e-06, \"attention_bias\": true, \"mlp_bias\": true, "
                  "\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": "
                  "8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                  "\"original_max_position_embeddings\": 16}",
                  false, true, true, true, false, 2));
  out.push_back(
      transformer("smollm", "smollm", ", \"rms_norm_eps\": 1e-05", true, false, false, false, false, 3));
  out.push_back(transformer("mistral_window", "mistral", ", \"sliding_window\": 3, \"rms_norm_eps\": 1e-05",
                            false, false, false, false, false, 4));
  out.push_back(
      transformer("qwen2_biases", "qwen2",
                  ", \"rms_norm_eps\": 1e-06, \"sliding_window\": 4, \"use_sliding_window\": false, "
                  "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}",
                  false, true, false, false, false, 5));
  out.push_back(transformer("qwen3_qk_norm", "qwen3", ", \"head_dim\": 8, \"rms_norm_eps\": 1e-06", true,
                            false, false, false, true, 6));
  out.push_back(transformer("phi3_fused", "phi3",
                            ", \"rms_norm_eps\": 1e-05, \"partial_rotary_factor\": 0.5, "
                            "\"original_max_position_embeddings\": 32, \"sliding_window\": 5",
                            false, false, false, false, false, 7));
  out.push_back(mamba("mamba", ", \"layer_norm_epsilon\": 1e-05, \"time_step_rank\": \"auto\"", 8));
  out.push_back(
      mamba("mamba2",
            ", \"num_heads\": 1, \"norm_before_gate\": true, \"time_step_limit\": [0.0, {\"__float__\": "
            "\"Infinity\"}], \"tie_word_embeddings\": false",
            9));
  out.back().tensors["lm_head.weight"] = {{kVocab, kD}, testing::Rng(10).uniform_vector(kVocab * kD, 0.5f)};
  return out;
}

std::vector<std::int32_t> ids_of(std::int64_t batch, std::int64_t length, std::uint64_t seed) {
  testing::Rng rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * length));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.next() % kVocab);
  return ids;
}

// ------------------------------------------------------------------ the stack against its blocks

// The stack composed by hand from the model's own block handles and the same numerics, in double-checked
// float32: embedding row copy, blocks' stateless forward, rmsnorm and the head product in float64 (the
// logits then agree within float32 rounding of the norm and product).
std::vector<double> by_hand(const CausalLM& model, const Family& f, const std::vector<std::int32_t>& ids,
                            std::int64_t batch, std::int64_t length) {
  const auto params = model.parameters();
  auto find = [&](const std::string& name) -> const NamedTensorCopy& {
    for (const auto& p : params)
      if (p.name == name) return p;
    ADD_FAILURE() << "no parameter " << name;
    return params.front();
  };
  const bool transformer = model.kind() == "transformer";
  const NamedTensorCopy& embed =
      find(transformer ? "model.embed_tokens.weight" : "backbone.embeddings.weight");
  const NamedTensorCopy& norm = find(transformer ? "model.norm.weight" : "backbone.norm_f.weight");
  const NamedTensorCopy& head = model.tie_embeddings() ? embed : find("lm_head.weight");
  (void)f;
  std::vector<float> x(static_cast<std::size_t>(batch * length * kD));
  for (std::size_t t = 0; t < ids.size(); ++t)
    std::copy(embed.values.begin() + ids[t] * kD, embed.values.begin() + (ids[t] + 1) * kD,
              x.begin() + t * kD);
  for (std::int64_t i = 0; i < model.n_layers(); ++i) {
    const TensorView view{x.data(), {batch, length, kD}};
    if (const auto* t = model.transformer_block(i))
      x = t->forward(view);
    else if (const auto* m1 = model.mamba1_block(i))
      x = m1->forward(view);
    else
      x = model.mamba2_block(i)->forward(view);
  }
  std::vector<double> logits(static_cast<std::size_t>(batch * length * kVocab));
  const double eps = static_cast<float>(model.norm_eps());
  for (std::int64_t r = 0; r < batch * length; ++r) {
    double ss = 0;
    for (std::int64_t p = 0; p < kD; ++p) ss += double(x[r * kD + p]) * x[r * kD + p];
    const double rstd = 1.0 / std::sqrt(ss / kD + eps);
    for (std::int64_t v = 0; v < kVocab; ++v) {
      double acc = 0;
      for (std::int64_t p = 0; p < kD; ++p)
        acc += x[r * kD + p] * rstd * norm.values[p] * head.values[v * kD + p];
      logits[r * kVocab + v] = acc;
    }
  }
  return logits;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double lo = want[0], hi = want[0], err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    lo = std::min(lo, want[i]);
    hi = std::max(hi, want[i]);
    err = std::max(err, std::abs(double(got[i]) - want[i]));
  }
  return err / (hi - lo);
}

class CausalLMFamilies : public ::testing::TestWithParam<int> {};

TEST_P(CausalLMFamilies, StackEqualsItsBlocksAndEveryIdentityHolds) {
  const Family f = families()[static_cast<std::size_t>(GetParam())];
  Scratch scratch;
  const CausalLM model = CausalLM::load(scratch.model(f.name, f.config, f.tensors));
  const std::int64_t B = 2, L = 7;
  const std::vector<std::int32_t> ids = ids_of(B, L, 11);
  const std::vector<float> whole = model.forward({ids.data(), B, L});
  ASSERT_EQ(whole.size(), static_cast<std::size_t>(B * L * kVocab));
  EXPECT_LT(relative_error(whole, by_hand(model, f, ids, B, L)), 1e-5) << f.name;
  testing::for_each_target_and_threads([&](const std::string& where) {
    // stateless == carried from zero
    CausalLMState state = model.allocate_state(B, L);
    EXPECT_TRUE(same_bits(model.forward({ids.data(), B, L}, state), whole)) << f.name << " " << where;
    EXPECT_EQ(state.positions(), L);
    // step at every position == forward's rows
    CausalLMState stepped = model.allocate_state(B, L);
    for (std::int64_t t = 0; t < L; ++t) {
      const std::vector<std::int32_t> col{ids[t], ids[L + t]};
      const std::vector<float> row = model.step({col.data(), B, 1}, stepped);
      for (std::int64_t b = 0; b < B; ++b)
        EXPECT_TRUE(same_bits(std::vector<float>(row.begin() + b * kVocab, row.begin() + (b + 1) * kVocab),
                              std::vector<float>(whole.begin() + (b * L + t) * kVocab,
                                                 whole.begin() + (b * L + t + 1) * kVocab)))
            << f.name << " " << where << " position " << t;
    }
    // split prefill 3 + 4
    CausalLMState split = model.allocate_state(B, L);
    std::vector<std::int32_t> a, c;
    for (std::int64_t b = 0; b < B; ++b) {
      a.insert(a.end(), ids.begin() + b * L, ids.begin() + b * L + 3);
      c.insert(c.end(), ids.begin() + b * L + 3, ids.begin() + (b + 1) * L);
    }
    const std::vector<float> first = model.forward({a.data(), B, 3}, split);
    const std::vector<float> second = model.forward({c.data(), B, 4}, split);
    for (std::int64_t b = 0; b < B; ++b) {
      EXPECT_TRUE(
          same_bits(std::vector<float>(first.begin() + b * 3 * kVocab, first.begin() + (b + 1) * 3 * kVocab),
                    std::vector<float>(whole.begin() + b * L * kVocab, whole.begin() + (b * L + 3) * kVocab)))
          << f.name << " " << where;
      EXPECT_TRUE(same_bits(
          std::vector<float>(second.begin() + b * 4 * kVocab, second.begin() + (b + 1) * 4 * kVocab),
          std::vector<float>(whole.begin() + (b * L + 3) * kVocab, whole.begin() + (b + 1) * L * kVocab)))
          << f.name << " " << where;
    }
    // a row alone == the row in the batch
    const std::vector<float> alone = model.forward({ids.data() + L, 1, L});
    EXPECT_TRUE(same_bits(alone, std::vector<float>(whole.begin() + L * kVocab, whole.end())))
        << f.name << " " << where;
  });
  // a clone continues as the original
  CausalLMState s = model.allocate_state(1, L);
  model.forward({ids.data(), 1, 3}, s);
  CausalLMState copy = s.clone();
  EXPECT_TRUE(
      same_bits(model.forward({ids.data() + 3, 1, 4}, s), model.forward({ids.data() + 3, 1, 4}, copy)));
  // reset gives a zero state again
  model.reset_state(s);
  EXPECT_EQ(s.positions(), 0);
  EXPECT_TRUE(same_bits(model.forward({ids.data(), 1, L}, s),
                        std::vector<float>(whole.begin(), whole.begin() + L * kVocab)));
}

TEST_P(CausalLMFamilies, LowBitFormatsEqualTheirMaterializedFloat32) {
  const Family f = families()[static_cast<std::size_t>(GetParam())];
  Scratch scratch;
  const std::int64_t B = 2, L = 5;
  const std::vector<std::int32_t> ids = ids_of(B, L, 12);
  for (bool bf16_storage : {false, true}) {
    const std::string dir =
        scratch.model(f.name + (bf16_storage ? "_bf16" : "_f32"), f.config, f.tensors, bf16_storage);
    for (const char* format : {"bfloat16", "int8"}) {
      const CausalLM packed = CausalLM::load(dir, format);
      EXPECT_EQ(packed.weight_format(), format);
      // The same checkpoint rewritten in float32 with the packed model's materialized weights.
      Tensors rewritten;
      const CausalLM plain = CausalLM::load(dir);
      for (const NamedTensorCopy& p : plain.parameters()) rewritten[p.name] = {p.shape, p.values};
      for (const auto& [name, t] : f.tensors)
        if (rewritten.count(name) == 0) rewritten[name] = t;  // optional tensors, as stored
      if (bf16_storage)                                       // optional tensors as the BF16 file holds them
        for (auto& [name, t] : rewritten)
          for (float& v : t.values) v = lowbit::f32_from_bf16(lowbit::bf16_from_f32(v));
      for (const NamedTensorCopy& p : packed.parameters()) rewritten[p.name] = {p.shape, p.values};
      const CausalLM materialized = CausalLM::load(
          scratch.model(f.name + "_" + format + (bf16_storage ? "_m16" : "_m32"), f.config, rewritten));
      EXPECT_TRUE(same_bits(packed.forward({ids.data(), B, L}), materialized.forward({ids.data(), B, L})))
          << f.name << " " << format << " bf16 storage " << bf16_storage;
    }
  }
}

TEST_P(CausalLMFamilies, GenerateIsTheGreedyLoop) {
  const Family f = families()[static_cast<std::size_t>(GetParam())];
  Scratch scratch;
  const CausalLM model = CausalLM::load(scratch.model(f.name, f.config, f.tensors));
  const std::int64_t B = 2, L = 3, n = 5;
  const std::vector<std::int32_t> ids = ids_of(B, L, 13);
  const std::vector<std::int32_t> out = model.generate({ids.data(), B, L}, n);
  ASSERT_EQ(out.size(), static_cast<std::size_t>(B * (L + n)));
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<std::int32_t> seq(ids.begin() + b * L, ids.begin() + (b + 1) * L);
    for (std::int64_t k = 0; k < n; ++k) {
      const std::vector<float> logits = model.forward({seq.data(), 1, static_cast<std::int64_t>(seq.size())});
      seq.push_back(models::greedy_argmax(logits.data() + (seq.size() - 1) * kVocab, kVocab));
    }
    EXPECT_EQ(std::vector<std::int32_t>(out.begin() + b * (L + n), out.begin() + (b + 1) * (L + n)), seq)
        << f.name;
  }
  EXPECT_EQ(model.generate({ids.data(), B, L}, 0), ids);
}

INSTANTIATE_TEST_SUITE_P(Families, CausalLMFamilies, ::testing::Range(0, 9));

// ------------------------------------------------------------------ plans

io::HFPlan plan_of(const std::string& text, io::HFLoader loader = io::HFLoader::Samebits) {
  return io::plan_for(json::parse(text, json::Dialect::Python), "cfg/config.json", loader);
}

const std::string kLlama =
    "{\"model_type\": \"llama\", \"hidden_size\": 32, \"num_attention_heads\": 4, \"num_key_value_heads\": "
    "2, "
    "\"intermediate_size\": 48, \"num_hidden_layers\": 2, \"vocab_size\": 64";

TEST(CausalLMPlan, SamebitsReadsTheConfigAsItDefinesTheModel) {
  io::HFPlan p = plan_of(kLlama + ", \"rms_norm_eps\": 1e-05, \"attention_bias\": true, \"mlp_bias\": true}");
  EXPECT_EQ(p.block.norm_eps, 1e-5);
  EXPECT_EQ(p.norm_eps, 1e-5);
  EXPECT_TRUE(p.block.qkv_bias && p.block.o_bias && p.block.mlp_bias);
  EXPECT_EQ(p.layer_weights(0).size(), 9u + 3 + 1 + 3);
  EXPECT_EQ(p.max_position_embeddings, 8192);
  // sliding_window only where the family uses it
  const io::HFPlan plain = plan_of(kLlama + ", \"sliding_window\": 4}");
  EXPECT_EQ(plain.window_of(0) + plain.window_of(1), 0);
  std::string q = kLlama + ", \"sliding_window\": 4, \"use_sliding_window\": true, \"max_window_layers\": 1}";
  q.replace(q.find("llama"), 5, "qwen2");
  EXPECT_EQ(plan_of(q).window_of(0), 0);
  EXPECT_EQ(plan_of(q).window_of(1), 4);
  std::string lt =
      kLlama + ", \"sliding_window\": 4, \"layer_types\": [\"sliding_attention\", \"full_attention\"]}";
  EXPECT_EQ(plan_of(lt).window_of(0), 4);
  EXPECT_EQ(plan_of(lt).window_of(1), 0);
  // 5.x rope_parameters with linear scaling and partial rotary; theta inside
  io::HFPlan r = plan_of(kLlama +
                         ", \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0, "
                         "\"rope_theta\": 50000.0, \"partial_rotary_factor\": 0.5}}");
  EXPECT_EQ(r.block.rope_scaling, "linear");
  EXPECT_EQ(r.block.rope_factor, 2.0);
  EXPECT_EQ(r.block.rope_theta, 50000.0);
  EXPECT_EQ(r.block.rope_dim, 4);
  // phi3's original_max_position_embeddings is ignored without rope scaling
  std::string phi =
      kLlama + ", \"original_max_position_embeddings\": 4096, \"max_position_embeddings\": 128}";
  phi.replace(phi.find("llama"), 5, "phi3");
  EXPECT_NO_THROW(plan_of(phi));
  EXPECT_EQ(plan_of(phi).layer_weights(0)[2].row_end, 32);
}

TEST(CausalLMPlan, UpstreamLoaderQuirks) {
  const auto M = io::HFLoader::Mojolearn;
  io::HFPlan p =
      plan_of(kLlama + ", \"rms_norm_eps\": 1e-05, \"attention_bias\": true, \"sliding_window\": 4}", M);
  EXPECT_EQ(p.block.norm_eps, 1e-6);  // the eps quirk
  EXPECT_EQ(p.norm_eps, 1e-5);
  EXPECT_TRUE(p.block.qkv_bias);
  EXPECT_FALSE(p.block.o_bias);
  EXPECT_EQ(p.window_of(0), 4);
  EXPECT_EQ(p.window_of(1), 4);
  EXPECT_EQ(plan_of(kLlama + ", \"rms_norm_eps\": 1e-06}", M).block.norm_eps, 1e-6);
  EXPECT_EQ(plan_of(kLlama + ", \"rms_norm_eps\": 2e-05}", M).block.norm_eps, 2e-5);
  EXPECT_EQ(
      value_error_of(
          [&] { plan_of(kLlama + ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}", M); }),
      "samebits.models: model_type 'llama': rope_scaling={'type': 'linear', 'factor': 2.0} is not honored: "
      "rope type 'default' is the only one the interface names a value for; linear, dynamic, yarn, "
      "longrope and llama3 scaling are refused");
  EXPECT_EQ(
      value_error_of(
          [&] { plan_of(kLlama + ", \"use_sliding_window\": true, \"max_window_layers\": 3}", M); }),
      "samebits.models: model_type 'llama': use_sliding_window=True is not honored: "
      "sliding-window-alternating layers (max_window_layers=3): the block takes ONE window for every layer");
  EXPECT_EQ(value_error_of([&] {
              plan_of(kLlama + ", \"layer_types\": [\"sliding_attention\", \"full_attention\"]}", M);
            }),
            "samebits.models: model_type 'llama': layer_types=['sliding_attention', 'full_attention'] is not "
            "honored: alternating attention kinds: the block takes one window for every layer");
  std::string phi =
      kLlama + ", \"original_max_position_embeddings\": 4096, \"max_position_embeddings\": 128}";
  phi.replace(phi.find("llama"), 5, "phi3");
  EXPECT_EQ(value_error_of([&] { plan_of(phi, M); }),
            "samebits.models: model_type 'phi3': original_max_position_embeddings=4096 is not honored: a "
            "longrope-extended context; rope_scaling is refused above and so is its extension");
  EXPECT_EQ(
      value_error_of([&] {
        plan_of(
            "{\"model_type\": \"mamba2\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"vocab_size\": "
            "8, \"norm_before_gate\": true}",
            M);
      }),
      "samebits.models: model_type 'mamba2': norm_before_gate=True is not honored: the gated norm is "
      "gate-then-norm (DEVIATION 787)");
}

TEST(CausalLMPlan, RefusalsInUpstreamWording) {
  auto refusal = [](const std::string& text) { return value_error_of([&] { plan_of(text); }); };
  const std::string pre = "samebits.models: model_type 'llama': ";
  EXPECT_EQ(error_of([] { plan_of("[1]"); }, ErrorKind::Type),
            "samebits.models.HFConfig: the config must be a JSON object");
  EXPECT_EQ(refusal("{\"model_type\": 3}"),
            "samebits.models: the config at 'cfg/config.json' has no string model_type");
  EXPECT_EQ(refusal("{\"model_type\": \"mixtral\"}"),
            "samebits.models: model_type 'mixtral' is not in the option matrix; known: ['gemma', 'gemma2', "
            "'llama', 'mamba', 'mamba2', 'mistral', 'phi3', 'qwen2', 'qwen3', 'smollm']");
  EXPECT_EQ(
      refusal(kLlama + ", \"num_local_experts\": 8}"),
      pre + "num_local_experts=8 is not honored: mixture of experts: the block has one dense SwiGLU MLP");
  EXPECT_EQ(refusal(kLlama + ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}"),
            pre +
                "rope_scaling={'rope_type': 'yarn', 'factor': 4.0} is not honored: rope type 'yarn' is not "
                "served: the block spells default, linear and llama3 (dynamic, yarn and longrope carry an "
                "attention_factor this profile does not spell)");
  EXPECT_EQ(refusal(kLlama + ", \"rope_type\": \"dynamic\"}"),
            pre + "rope_type='dynamic' is not honored: rope type 'default' only");
  EXPECT_EQ(refusal(kLlama + ", \"hidden_act\": \"gelu\"}"),
            pre +
                "hidden_act='gelu' is not honored: the block's MLP is SwiGLU (silu gate); mlp values beyond "
                "'swiglu' are not in the interface");
  EXPECT_EQ(refusal("{\"model_type\": \"llama\", \"num_attention_heads\": 4}"),
            pre + "hidden_size=None is not honored: the field is required and the config lacks it");
  EXPECT_EQ(refusal("{\"model_type\": \"llama\", \"hidden_size\": true}"),
            pre + "hidden_size=True is not honored: an integer is required");
  EXPECT_EQ(
      refusal(kLlama + ", \"head_dim\": 16}"),
      pre +
          "head_dim=16 is not honored: n_heads*head_dim (4*16) must equal hidden_size 32 (the block's q "
          "and o projections are hidden_size wide; docs/models.md §15.2)");
  std::string kv = kLlama + "}";
  kv.replace(kv.find("\"num_key_value_heads\": 2"), 24, "\"num_key_value_heads\": 3");
  EXPECT_EQ(refusal(kv),
            pre + "num_key_value_heads=3 is not honored: num_attention_heads 4 is not a multiple of it");
  EXPECT_EQ(refusal(kLlama + ", \"rms_norm_eps\": \"small\"}"),
            pre + "rms_norm_eps='small' is not honored: a number is required");
  EXPECT_EQ(refusal(kLlama + ", \"sliding_window\": true}"),
            pre + "sliding_window=True is not honored: an integer width or null");
  EXPECT_EQ(refusal(kLlama + ", \"max_position_embeddings\": 0}"),
            pre + "max_position_embeddings=0 is not honored: a positive integer is required");
  EXPECT_EQ(
      refusal(kLlama + ", \"vocab_size\": 2147483648}"),
      pre +
          "vocab_size=2147483648 is not honored: an integer up to 2**31 - 1 is required (no checkpoint holds "
          "more)");
  EXPECT_EQ(refusal(kLlama + ", \"attention_dropout\": 0.1}"),
            pre +
                "attention_dropout=0.1 is not honored: inference has no dropout and the profile refuses a "
                "nonzero value");
  EXPECT_EQ(
      refusal(kLlama + ", \"partial_rotary_factor\": 0.2}"),
      pre +
          "partial_rotary_factor=0.2 is not honored: head_dim*partial_rotary_factor = 1 rotary columns; "
          "the block rotates an even, positive number");
  const std::string mamba =
      "{\"model_type\": \"mamba\", \"hidden_size\": 32, \"num_hidden_layers\": 1, "
      "\"vocab_size\": 8";
  EXPECT_EQ(refusal(mamba + ", \"state_size\": 8}"),
            "samebits.models: model_type 'mamba': state_size=8 is not honored: Mamba1Block fixes it at 16 "
            "(mamba/IDENTICAL_MAMBA_CONTRACT.md section 3)");
  EXPECT_EQ(
      refusal(mamba + ", \"time_step_rank\": 3}"),
      "samebits.models: model_type 'mamba': time_step_rank=3 is not honored: Mamba1Block fixes dt_rank at "
      "ceil(hidden_size/16) = 2");
  EXPECT_EQ(
      refusal(mamba + ", \"layer_norm_epsilon\": 1e-06}"),
      "samebits.models: model_type 'mamba': layer_norm_epsilon=1e-06 is not honored: Mamba1Block fixes rms "
      "eps at 1e-5 (0x3727C5AC)");
  const std::string m2 =
      "{\"model_type\": \"mamba2\", \"hidden_size\": 48, \"num_hidden_layers\": 1, "
      "\"vocab_size\": 8";
  EXPECT_EQ(
      refusal(m2 + "}"),
      "samebits.models: model_type 'mamba2': hidden_size=48 is not honored: Mamba2Block needs a multiple of "
      "32 (headdim 64, expand 2)");
  EXPECT_EQ(
      refusal("{\"model_type\": \"mamba2\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": "
              "8, \"num_heads\": 128}"),
      "samebits.models: model_type 'mamba2': num_heads=128 is not honored: expand*hidden_size/head_dim = 2 "
      "heads is fixed by the profile");
  EXPECT_EQ(
      refusal("{\"model_type\": \"mamba2\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": "
              "8, \"time_step_limit\": [0.0]}"),
      "samebits.models: model_type 'mamba2': time_step_limit=[0.0] is not honored: a pair (lo, hi)");
}

TEST(CausalLMPlan, MoreRefusals) {
  auto refusal = [](const std::string& text) { return value_error_of([&] { plan_of(text); }); };
  EXPECT_EQ(refusal("{\"model_type\": \"gemma\", \"hidden_act\": \"gelu_pytorch_tanh\"}"),
            "samebits.models: model_type 'gemma': hidden_act='gelu_pytorch_tanh' is not honored: the block's "
            "MLP is "
            "SwiGLU (silu gate); mlp values beyond 'swiglu' are not in the interface");
  EXPECT_EQ(
      refusal("{\"model_type\": \"gemma2\", \"final_logit_softcapping\": 30.0}"),
      "samebits.models: model_type 'gemma2': final_logit_softcapping=30.0 is not honored: gemma2's softcaps "
      "and query scale are not in the interface's option matrix");
  EXPECT_EQ(
      refusal(kLlama + ", \"rope_scaling\": {\"type\": \"linear\"}}"),
      "samebits.models: model_type 'llama': rope_scaling={'type': 'linear'} is not honored: rope_scaling "
      "'linear' needs 'factor'");
  EXPECT_EQ(refusal(kLlama + ", \"layer_types\": [\"full_attention\"]}"),
            "samebits.models: model_type 'llama': layer_types=['full_attention'] is not honored: one "
            "attention kind "
            "per layer (num_hidden_layers=2) is required");
  const std::string mamba =
      "{\"model_type\": \"mamba\", \"hidden_size\": 32, \"num_hidden_layers\": 1, \"vocab_size\": 8";
  EXPECT_EQ(
      refusal(mamba + ", \"use_bias\": true}"),
      "samebits.models: model_type 'mamba': use_bias=True is not honored: Mamba1Block fixes it at False "
      "(mamba/IDENTICAL_MAMBA_CONTRACT.md section 3)");
  EXPECT_EQ(
      refusal(mamba + ", \"hidden_act\": \"gelu\"}"),
      "samebits.models: model_type 'mamba': hidden_act='gelu' is not honored: silu only, as the reference "
      "asserts");
  const std::string m2 =
      "{\"model_type\": \"mamba2\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"vocab_size\": 8";
  EXPECT_EQ(refusal(m2 + ", \"use_conv_bias\": false}"),
            "samebits.models: model_type 'mamba2': use_conv_bias=False is not honored: Mamba2Block fixes it "
            "at True "
            "(mamba/IDENTICAL_MAMBA2_CONTRACT.md section 3)");
  EXPECT_EQ(
      refusal(m2 + ", \"layer_norm_epsilon\": 1e-06}"),
      "samebits.models: model_type 'mamba2': layer_norm_epsilon=1e-06 is not honored: Mamba2Block fixes rms "
      "eps at 1e-5 for both norms");
  const io::HFPlan limit = plan_of(m2 + ", \"time_step_limit\": [0.001, 0.1]}");
  EXPECT_EQ(limit.dt_lo, 0.001);
  EXPECT_EQ(limit.dt_hi, 0.1);
  EXPECT_TRUE(plan_of(m2 + "}").tie_embeddings);
  EXPECT_TRUE(std::isinf(plan_of(m2 + "}").dt_hi));
}

TEST(CausalLMPlan, ConfigFiles) {
  Scratch scratch;
  EXPECT_EQ(error_of([&] { io::read_hf_config(scratch.path()); }, ErrorKind::NotFound),
            "samebits.models.HFConfig: " + scratch.path() + "/config.json does not exist");
  const std::string dir = scratch.model("bad", "{\"model_type\": ", {});
  const std::string message = value_error_of([&] { io::read_hf_config(dir); });
  EXPECT_EQ(message.rfind("samebits.models.HFConfig: " + dir + "/config.json is not JSON: ", 0), 0u)
      << message;
  const std::string nan = scratch.model("nan", "{\"model_type\": \"mamba2\", \"x\": NaN}", {});
  EXPECT_TRUE(io::read_hf_config(nan).is_object());
}

// ------------------------------------------------------------------ load and call refusals

TEST(CausalLMRefusals, LoadInOrder) {
  Scratch scratch;
  Family f = families()[1];
  const std::string dir = scratch.model("m", f.config, f.tensors);
  EXPECT_EQ(
      value_error_of([&] { CausalLM::load(dir, "fp8"); }),
      "samebits.models.CausalLM.load: weight_format must be one of ('float32', 'bfloat16', 'int8'), got "
      "'fp8'");
  EXPECT_EQ(value_error_of([&] { CausalLM::load(dir, "float32", std::nullopt, "hf"); }),
            "samebits.models.CausalLM.load: loader must be 'samebits' or 'mojolearn', got 'hf'");
  EXPECT_EQ(error_of([&] { CausalLM::load(dir + "/nope"); }, ErrorKind::NotFound),
            "samebits.models.CausalLM.load: " + dir + "/nope is not a directory");
  EXPECT_EQ(value_error_of([&] { CausalLM::load(dir, "float32", 0); }),
            "samebits.models.CausalLM: max_positions must be positive, got 0");
  EXPECT_EQ(value_error_of([&] { CausalLM::load(dir, "float32", 65); }),
            "samebits.models: model_type 'llama': max_positions=65 exceeds the config's "
            "max_position_embeddings=64");
  Tensors missing = f.tensors;
  missing.erase("model.norm.weight");
  missing.erase("model.layers.0.self_attn.o_proj.bias");
  EXPECT_EQ(
      value_error_of([&] { CausalLM::load(scratch.model("missing", f.config, missing)); }),
      "samebits.models: model_type 'llama': the checkpoint lacks 2 of the 35 tensors the plan names; first "
      "missing: ['model.layers.0.self_attn.o_proj.bias', 'model.norm.weight']");
  // a layer count no checkpoint could hold is counted, not listed
  std::string huge = f.config;
  huge.replace(huge.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 2147483647");
  EXPECT_EQ(value_error_of([&] { CausalLM::load(scratch.model("huge", huge, f.tensors)); }),
            "samebits.models: model_type 'llama': the checkpoint lacks 34359738320 of the 34359738355 "
            "tensors the plan names; first missing: ['model.layers.2.input_layernorm.weight', "
            "'model.layers.2.post_attention_layernorm.weight', 'model.layers.2.self_attn.q_proj.weight', "
            "'model.layers.2.self_attn.k_proj.weight', 'model.layers.2.self_attn.v_proj.weight']");
  EXPECT_EQ(value_error_of([&] { CausalLM::load(dir, "float32", 9000); }),
            "samebits.models: model_type 'llama': max_positions=9000 exceeds the transformer block's "
            "absolute-position ceiling 8192 (DEVIATION 812)");
  Tensors norm = f.tensors;
  norm["model.norm.weight"] = {{kD + 1}, std::vector<float>(kD + 1, 1.0f)};
  EXPECT_EQ(value_error_of([&] { CausalLM::load(scratch.model("norm", f.config, norm)); }),
            "samebits.models: model_type 'llama': hidden_size=32 but model.norm.weight has shape (33,)");
  Tensors head = f.tensors;
  head["lm_head.weight"] = {{kVocab, kD - 1}, std::vector<float>(kVocab * (kD - 1), 1.0f)};
  EXPECT_EQ(
      value_error_of([&] { CausalLM::load(scratch.model("head", f.config, head)); }),
      "samebits.models: model_type 'llama': vocab_size=64 and hidden_size=32 but lm_head.weight has shape "
      "(64, 31)");
  Tensors ints = f.tensors;
  ints["model.layers.0.mlp.up_proj.weight"].int32 = true;
  EXPECT_EQ(
      error_of([&] { CausalLM::load(scratch.model("ints", f.config, ints)); }, ErrorKind::Type),
      "samebits.models.CausalLM: tensor 'model.layers.0.mlp.up_proj.weight' is an integer tensor (I32); a "
      "weight must be F32, F16 or BF16");
  Tensors extra = f.tensors;
  extra["model.rotary_emb.inv_freq"] = {{4}, {1, 2, 3, 4}};
  EXPECT_EQ(CausalLM::load(scratch.model("extra", f.config, extra)).unused_names(),
            std::vector<std::string>{"model.rotary_emb.inv_freq"});
  Tensors wide = f.tensors;
  wide["model.embed_tokens.weight"] = {{65, kD}, std::vector<float>(65 * kD, 0.5f)};
  EXPECT_EQ(
      value_error_of([&] { CausalLM::load(scratch.model("wide", f.config, wide)); }),
      "samebits.models: model_type 'llama': vocab_size=64 and hidden_size=32 but model.embed_tokens.weight "
      "has shape (65, 32)");
  Tensors nan = f.tensors;
  nan["model.norm.weight"].values[3] = NAN;
  EXPECT_EQ(value_error_of([&] { CausalLM::load(scratch.model("nan", f.config, nan)); }),
            "samebits.models.CausalLM: model.norm.weight is not finite");
  Family phi = families()[6];
  phi.tensors["model.layers.1.self_attn.qkv_proj.weight"] = {{60, kD}, std::vector<float>(60 * kD, 0.1f)};
  EXPECT_EQ(
      value_error_of([&] { CausalLM::load(scratch.model("phi", phi.config, phi.tensors)); }),
      "samebits.models: model_type 'phi3': model.layers.1.self_attn.qkv_proj.weight has shape (60, 32), too "
      "small for the row slice [48, 64) that carries v_proj.weight");
  // upstream's loader maps no MLP bias: the block refuses the option without its tensor
  EXPECT_EQ(
      value_error_of([&] { CausalLM::load(dir, "float32", std::nullopt, "mojolearn"); }),
      "samebits.models: model_type 'llama': rope_scaling={'rope_type': 'llama3', 'factor': 8.0, "
      "'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 16} is not "
      "honored: rope type 'default' is the only one the interface names a value for; linear, dynamic, yarn, "
      "longrope and llama3 scaling are refused");
}

TEST(CausalLMRefusals, CallsAndStates) {
  Scratch scratch;
  const Family f = families()[0];
  const std::string dir = scratch.model("m", f.config, f.tensors);
  const CausalLM model = CausalLM::load(dir, "float32", 8);
  const CausalLM other = CausalLM::load(dir, "float32", 8);
  EXPECT_EQ(
      model.repr(),
      "CausalLM(model_type='llama', layers=2, d_model=32, vocab=64, weight_format='float32', device='cpu')");
  const std::vector<std::int32_t> ids = ids_of(2, 4, 3);
  std::vector<std::int32_t> bad = ids;
  bad[5] = 64;
  EXPECT_EQ(value_error_of([&] {
              model.forward({bad.data(), 2, 4});
            }),
            "samebits CausalLM.forward: ids must be in [0, 64)");
  EXPECT_EQ(value_error_of([&] {
              model.forward({ids.data(), 0, 4});
            }),
            "samebits CausalLM.forward: B and L must be positive, got (0, 4)");
  EXPECT_EQ(value_error_of([&] { model.allocate_state(0, 4); }),
            "samebits CausalLM.allocate_state: batch_size and max_tokens must be positive");
  EXPECT_EQ(value_error_of([&] { model.allocate_state(1, 9); }),
            "samebits CausalLM.allocate_state: max_tokens=9 exceeds max_positions=8");
  CausalLMState theirs = other.allocate_state(2, 8);
  EXPECT_EQ(value_error_of([&] {
              model.forward({ids.data(), 2, 4}, theirs);
            }),
            "samebits CausalLM.forward: state belongs to another model; allocate a state on this model");
  EXPECT_EQ(value_error_of([&] { model.reset_state(theirs); }),
            "samebits CausalLM.reset_state: state belongs to another model");
  CausalLMState three = model.allocate_state(3, 8);
  EXPECT_EQ(
      value_error_of([&] {
        model.forward({ids.data(), 2, 4}, three);
      }),
      "samebits CausalLM.forward: the state holds 3 rows and 2 layers, the call has B = 2 and the model 2 "
      "layers");
  CausalLMState s = model.allocate_state(2, 6);
  model.forward({ids.data(), 2, 4}, s);
  EXPECT_EQ(value_error_of([&] {
              model.forward({ids.data(), 2, 4}, s);
            }),
            "samebits CausalLM.forward: the state was allocated for 6 tokens and holds 4; 4 more do not fit");
  CausalLMState full = model.allocate_state(2, 8);
  model.forward({ids.data(), 2, 4}, full);
  model.forward({ids.data(), 2, 4}, full);
  EXPECT_EQ(value_error_of([&] {
              model.step({ids.data(), 2, 1}, full);
            }),
            "samebits CausalLM.step: 8 + 1 positions exceed max_positions=8 (the transformer block's "
            "absolute-position ceiling is 8192, DEVIATION 812)");
  EXPECT_EQ(full.positions(), 8);
  EXPECT_EQ(value_error_of([&] {
              model.step({ids.data(), 2, 2}, s);
            }),
            "samebits CausalLM.step: ids must be (B,) or (B, 1) for a step, got shape (2, 2)");
  EXPECT_EQ(value_error_of([&] {
              model.generate({ids.data(), 2, 4}, -1);
            }),
            "samebits CausalLM.generate: max_new_tokens must be >= 0, got -1");
  EXPECT_EQ(value_error_of([&] {
              model.generate({ids.data(), 2, 4}, 5);
            }),
            "samebits CausalLM.generate: 4 prompt + 5 new tokens exceed max_positions=8");
}

// step_many checks every layer's states before any layer runs (docs/api.md §18): a state that a later layer
// refuses leaves the earlier layers' caches as they were, still in the engine's layout and trusted (a layer
// that ran and was rolled back would have ended their trust), and the refusal is a lone step's, word for
// word.
TEST(CausalLMStepMany, EveryLayerIsCheckedBeforeAnyLayerRuns) {
  Scratch scratch;
  const Family f = families()[0];  // two Transformer layers
  const CausalLM model = CausalLM::load(scratch.model("m", f.config, f.tensors));
  std::vector<CausalLMState> states;
  for (std::int64_t n : {2, 3}) {
    states.push_back(model.allocate_state(1, 8));
    const std::vector<std::int32_t> prompt = ids_of(1, n, static_cast<std::uint64_t>(n));
    model.forward({prompt.data(), 1, n}, states.back());
  }
  {
    TransformerState::Pin k = states[1].transformer(1)->pin_k_cache();
    k.data()[0] = std::nanf("");
  }
  CausalLMState alone = states[1].clone();
  const std::vector<float> alone_keys = alone.transformer(0)->keys();
  const std::vector<std::int32_t> next{5, 7};
  const std::string lone = value_error_of([&] { model.step({next.data() + 1, 1, 1}, alone); });
  EXPECT_NE(lone.find("samebits TransformerBlock.step: "), std::string::npos) << lone;
  // The lone step ran layer 0 before layer 1 refused: the roll-back leaves layer 0 as it was.
  EXPECT_EQ(alone.transformer(0)->cached_tokens(), 3);
  EXPECT_EQ(alone.transformer(0)->keys(), alone_keys);
  const std::vector<float> keys = states[0].transformer(0)->keys();
  EXPECT_TRUE(states[0].transformer(0)->trusted());
  EXPECT_EQ(value_error_of([&] { model.step_many(next, {&states[0], &states[1]}); }), lone);
  for (std::int64_t layer : {0, 1}) {
    EXPECT_EQ(states[0].transformer(layer)->cached_tokens(), 2);
    EXPECT_TRUE(states[0].transformer(layer)->trusted()) << layer;
    EXPECT_TRUE(states[0].transformer(layer)->spread()) << layer;
  }
  EXPECT_EQ(states[0].transformer(0)->keys(), keys);
  EXPECT_EQ(states[0].positions(), 2);
  EXPECT_EQ(states[1].positions(), 3);
}

// The Mamba stacks the same way: a non-finite carried array in a later layer of one state refuses the call
// (in the block's words) before any layer runs, and every state ends as it was.
TEST(CausalLMStepMany, MambaLayersAreCheckedBeforeAnyLayerRuns) {
  const std::vector<Family> all = families();
  for (const std::size_t index : {std::size_t{7}, std::size_t{8}}) {  // mamba, mamba2
    const Family& f = all[index];
    Scratch scratch;
    const CausalLM model = CausalLM::load(scratch.model(f.name, f.config, f.tensors));
    std::vector<CausalLMState> states;
    for (std::int64_t n : {2, 3}) {
      states.push_back(model.allocate_state(1, 8));
      const std::vector<std::int32_t> prompt = ids_of(1, n, static_cast<std::uint64_t>(n));
      model.forward({prompt.data(), 1, n}, states.back());
    }
    if (Mamba1State* poisoned = states[1].mamba1(1)) {
      poisoned->pin_h().data()[0] = std::nanf("");
    } else {
      states[1].mamba2(1)->pin(Mamba2State::kH).data()[0] = std::nanf("");
    }
    auto contents = [&](const CausalLMState& s) {
      std::vector<float> all_h;
      for (std::int64_t layer : {0, 1}) {
        const float* h = s.mamba1(layer) ? s.mamba1(layer)->h() : s.mamba2(layer)->h();
        const std::int64_t size = s.mamba1(layer) ? s.mamba1(layer)->h_size() : s.mamba2(layer)->h_size();
        all_h.insert(all_h.end(), h, h + size);
      }
      return std::make_pair(s.positions(), all_h);
    };
    const auto before0 = contents(states[0]);
    const auto before1 = contents(states[1]);
    const std::vector<std::int32_t> next{5, 7};
    const std::string refusal = value_error_of([&] { model.step_many(next, {&states[0], &states[1]}); });
    const std::string entry = index == 7 ? "mamba1_decode_step: " : "mamba2_decode_step: ";
    EXPECT_EQ(refusal.rfind(entry + "NaN in h at flat index 0", 0), 0u) << refusal;
    EXPECT_EQ(contents(states[0]), before0) << f.name;
    const auto after1 = contents(states[1]);  // holds the NaN: compared by its bytes
    EXPECT_EQ(after1.first, before1.first);
    EXPECT_EQ(std::memcmp(after1.second.data(), before1.second.data(), before1.second.size() * sizeof(float)),
              0)
        << f.name;
  }
}

TEST(CausalLMGreedy, ArgmaxTiesNaNAndTheFirstIndex) {
  const float nan = NAN;
  const std::vector<float> ties{1, 3, 3, 2};
  EXPECT_EQ(models::greedy_argmax(ties.data(), 4), 1);
  const std::vector<float> later_nan{1, nan, 0.5f, 2};
  EXPECT_EQ(models::greedy_argmax(later_nan.data(), 4), 3);
  const std::vector<float> first_nan{nan, 5, 6};
  EXPECT_EQ(models::greedy_argmax(first_nan.data(), 3), 0);
  const std::vector<float> zeros{-0.0f, 0.0f};
  EXPECT_EQ(models::greedy_argmax(zeros.data(), 2), 0);
}

TEST(CausalLMSharded, AnIndexedDirectoryLoadsAsTheSingleFile) {
  Scratch scratch;
  const Family f = families()[3];
  const std::string dir = scratch.model("single", f.config, f.tensors);
  const fs::path sharded = fs::path(scratch.path()) / "sharded";
  fs::create_directories(sharded);
  std::ofstream(sharded / "config.json") << f.config;
  Tensors a, b;
  std::string map = "{\"weight_map\": {";
  bool first = true;
  for (const auto& [name, t] : f.tensors) {
    const bool second = name.find("layers.1") != std::string::npos || name == "lm_head.weight";
    (second ? b : a)[name] = t;
    map += std::string(first ? "" : ", ") + "\"" + name + "\": \"" + (second ? "b" : "a") + ".safetensors\"";
    first = false;
  }
  std::ofstream(sharded / "model.safetensors.index.json") << map + "}}";
  std::ofstream(sharded / "a.safetensors", std::ios::binary) << safetensors_bytes(a, false);
  std::ofstream(sharded / "b.safetensors", std::ios::binary) << safetensors_bytes(b, false);
  const std::vector<std::int32_t> ids = ids_of(1, 6, 4);
  EXPECT_TRUE(same_bits(CausalLM::load(dir).forward({ids.data(), 1, 6}),
                        CausalLM::load(sharded.string()).forward({ids.data(), 1, 6})));
}

}  // namespace
}  // namespace samebits
