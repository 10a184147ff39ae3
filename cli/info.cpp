// `samebits info CHECKPOINT`: what a checkpoint or model directory holds and whether every integrity check
// passed.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <samebits/file_kind.hpp>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "chat.hpp"
#include "cli.hpp"
#include "language_model.hpp"

namespace samebits::cli {
namespace {

// ['mamba3', 'attention'], as Python prints a list of names.
std::string name_list_text(const std::vector<std::string>& names) {
  std::string text = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += ", ";
    text += "'" + names[i] + "'";
  }
  return text + "]";
}

void print_tensor_row(const std::string& name, const std::vector<std::int64_t>& shape, const float* data,
                      std::int64_t count, int name_width) {
  float lo = count ? data[0] : 0.0f, hi = lo;
  for (std::int64_t i = 1; i < count; ++i) {
    lo = data[i] < lo ? data[i] : lo;
    hi = data[i] > hi ? data[i] : hi;
  }
  std::printf("  %-*s %-12s <f4 %9lld  min %-+14.7g max %-+14.7g\n", name_width, name.c_str(),
              shape_repr(shape).c_str(), static_cast<long long>(count), lo, hi);
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

std::string shape_json(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string tensor_json(const std::string& name, const std::vector<std::int64_t>& shape, const float* data,
                        std::int64_t count) {
  float lo = count ? data[0] : 0.0f, hi = lo;
  for (std::int64_t i = 1; i < count; ++i) {
    lo = data[i] < lo ? data[i] : lo;
    hi = data[i] > hi ? data[i] : hi;
  }
  return "{\"name\":" + json_string(name) + ",\"shape\":" + shape_json(shape) +
         ",\"dtype\":\"<f4\",\"elements\":" + std::to_string(count) + ",\"min\":" + number(lo) +
         ",\"max\":" + number(hi) + "}";
}

// `info --json`: one object on stdout; "integrity" is {"ok": true, "sha256": ...} or {"ok": false, "error":
// ...}.
int info_json(const std::string& path, FileKind kind) {
  std::string out = "{\"file\":" + json_string(path) + ",\"kind\":" +
                    json_string(describe_file_kind(kind).substr(describe_file_kind(kind).find(' ') + 1));
  int status = kExitOk;
  if (kind == FileKind::MlpCheckpoint) {
    try {
      const MlpCheckpoint ckpt = read_mlp_checkpoint(path);
      out += ",\"schema\":" + json_string(std::string(kMlpFileSchema)) +
             ",\"size_bytes\":" + std::to_string(ckpt.file_bytes) + ",\"architecture\":[8,16,3]" +
             ",\"numeric_mode\":" + json_string(ckpt.numeric_mode) +
             ",\"arithmetic_profile\":" + json_string(ckpt.arithmetic_profile) +
             ",\"optimizer_step\":" + std::to_string(ckpt.optimizer_step) +
             ",\"weight_format\":\"float32\",\"parameters\":195,\"tensors\":[" +
             tensor_json("weight1", {16, 8}, ckpt.weight1.data(), 128) + "," +
             tensor_json("bias1", {16}, ckpt.bias1.data(), 16) + "," +
             tensor_json("weight2", {3, 16}, ckpt.weight2.data(), 48) + "," +
             tensor_json("bias2", {3}, ckpt.bias2.data(), 3) +
             "],\"integrity\":{\"ok\":true,\"sha256\":" + json_string(ckpt.payload_sha256) + "}";
    } catch (const Error& e) {
      out += ",\"integrity\":{\"ok\":false,\"error\":" + json_string(e.what()) + "}";
      status = kExitRefused;
    }
  } else {
    try {
      const SambaCheckpointContents ckpt = read_samba_checkpoint(path);
      const auto& info = ckpt.info;
      const auto& c = ckpt.config;
      std::string layers = "[";
      for (std::size_t i = 0; i < c.layers().size(); ++i) {
        if (i) layers += ",";
        layers += json_string(c.layers()[i]);
      }
      const auto optional = [](const auto& v) { return v ? std::to_string(*v) : std::string("null"); };
      out += ",\"schema\":" + json_string(info.schema) +
             ",\"size_bytes\":" + std::to_string(info.file_bytes) +
             ",\"config\":{\"vocab\":" + std::to_string(c.vocab()) +
             ",\"d_model\":" + std::to_string(c.d_model()) + ",\"layers\":" + layers +
             "],\"n_heads\":" + optional(c.n_heads()) + ",\"n_kv_heads\":" + optional(c.n_kv_heads()) +
             ",\"head_dim\":" + optional(c.head_dim()) + ",\"intermediate\":" + optional(c.intermediate()) +
             ",\"tie_embeddings\":" + (c.tie_embeddings() ? "true" : "false") +
             ",\"norm_eps\":" + number(c.norm_eps()) + "}" +
             ",\"numeric_mode\":" + json_string(info.numeric_mode) +
             ",\"numeric_profile\":" + json_string(info.numeric_profile) +
             ",\"weight_format\":\"float32\",\"parameters\":" + std::to_string(info.parameter_count) +
             ",\"tensors\":[";
      for (std::size_t i = 0; i < ckpt.registry.size(); ++i) {
        const auto& e = ckpt.registry[i];
        if (i) out += ",";
        out += tensor_json(e.name, e.shape, ckpt.parameters.data() + e.offset, e.size);
      }
      out += "],\"integrity\":{\"ok\":true,\"sha256\":" + json_string(info.integrity_sha256) + "}";
    } catch (const Error& e) {
      out += ",\"integrity\":{\"ok\":false,\"error\":" + json_string(e.what()) + "}";
      status = kExitRefused;
    }
  }
  std::printf("%s}\n", out.c_str());
  return status;
}

int info_mlp(const std::string& path) {
  MlpCheckpoint ckpt;
  try {
    ckpt = read_mlp_checkpoint(path);
  } catch (const Error& e) {
    std::printf("kind: SmallMLPTrainer checkpoint (%s) expected\n", kMlpFileSchema.data());
    std::printf("integrity: REFUSED: %s\n", e.what());
    return 1;
  }
  std::printf("kind: SmallMLPTrainer checkpoint (%s, state %s)\n", kMlpFileSchema.data(),
              kMlpStateSchema.data());
  std::printf("size: %llu bytes\n", static_cast<unsigned long long>(ckpt.file_bytes));
  std::printf("architecture: [8, 16, 3] (ReLU hidden layer)\n");
  std::printf("numeric mode: %s\n", ckpt.numeric_mode.c_str());
  std::printf("arithmetic profile: %s\n", ckpt.arithmetic_profile.c_str());
  std::printf("config: AdamW lr %.9g beta1 %.9g beta2 %.9g eps %.9g weight_decay %.9g, step %lld\n",
              ckpt.config.lr, ckpt.config.beta1, ckpt.config.beta2, ckpt.config.eps, ckpt.config.weight_decay,
              static_cast<long long>(ckpt.optimizer_step));
  std::printf("data_schedule: %s\n", ckpt.data_schedule_canonical.c_str());
  std::printf("weight format: float32\n");
  std::printf("tensors:\n");
  print_tensor_row("weight1", {16, 8}, ckpt.weight1.data(), 128, 8);
  print_tensor_row("bias1", {16}, ckpt.bias1.data(), 16, 8);
  print_tensor_row("weight2", {3, 16}, ckpt.weight2.data(), 48, 8);
  print_tensor_row("bias2", {3}, ckpt.bias2.data(), 3, 8);
  std::printf("integrity: OK (payload sha256 %s verified; payload fully validated)\n",
              ckpt.payload_sha256.c_str());
  return 0;
}

int info_samba(const std::string& path) {
  SambaCheckpointContents ckpt = [&] {
    try {
      return read_samba_checkpoint(path);
    } catch (const Error& e) {
      std::printf("kind: SambaStack checkpoint (streamed v2 archive or legacy JSON) expected\n");
      std::printf("integrity: REFUSED: %s\n", e.what());
      throw;
    }
  }();
  const auto& info = ckpt.info;
  const auto& config = ckpt.config;
  const bool stream = info.format == SambaCheckpointFormat::StreamV2;
  std::printf("kind: SambaStack checkpoint, %s (%s)\n", stream ? "streamed v2 archive" : "legacy JSON",
              info.schema.c_str());
  std::printf("size: %llu bytes%s\n", static_cast<unsigned long long>(info.file_bytes),
              stream ? (", header " + std::to_string(info.header_bytes) + " bytes").c_str() : "");
  std::printf("config: vocab %lld, d_model %lld, layers %s", static_cast<long long>(config.vocab()),
              static_cast<long long>(config.d_model()), name_list_text(config.layers()).c_str());
  if (config.n_heads())
    std::printf(", n_heads %lld, n_kv_heads %lld, head_dim %lld, intermediate %lld",
                static_cast<long long>(*config.n_heads()), static_cast<long long>(*config.n_kv_heads()),
                static_cast<long long>(*config.head_dim()), static_cast<long long>(*config.intermediate()));
  std::printf(", %s head, norm_eps %.9g\n", config.tie_embeddings() ? "tied" : "untied", config.norm_eps());
  std::printf("parameters: %lld in %lld tensors\n", static_cast<long long>(info.parameter_count),
              static_cast<long long>(info.tensor_count));
  std::printf("numeric mode: %s, numeric profile: %s\n", info.numeric_mode.c_str(),
              info.numeric_profile.c_str());
  if (!info.step_json.empty())
    std::printf("training: step %s, optimizer %s\n", info.step_json.c_str(), info.optimizer_json.c_str());
  std::printf("weight format: float32\n");
  std::printf("registry:\n");
  int width = 0;
  for (const auto& e : ckpt.registry) width = std::max<int>(width, static_cast<int>(e.name.size()));
  for (const auto& e : ckpt.registry)
    print_tensor_row(e.name, e.shape, ckpt.parameters.data() + e.offset, e.size, width);
  std::printf("integrity: OK (%s sha256 %s verified; every array digest, size and value checked)\n",
              stream ? "header" : "payload", info.integrity_sha256.c_str());
  return 0;
}

// A Hugging Face model directory: the CausalLM it loads to, its tensors, and its tokenizer and chat
// template when it has them (docs/cli.md §8). A directory the loader refuses is reported and exits 1.
int info_model_directory(const std::string& path, bool as_json) {
  std::optional<LanguageModel> model;
  std::string tokenizer_line = "none (no tokenizer.json)", template_family;
  try {
    model.emplace(LanguageModel::open(path, "info", false));
  } catch (const Error& e) {
    if (as_json)
      std::printf(
          "{\"file\":%s,\"kind\":\"Hugging Face model directory\",\"integrity\":{\"ok\":false,"
          "\"error\":%s}}\n",
          json_string(path).c_str(), json_string(e.what()).c_str());
    else
      std::printf("file: %s\nkind: Hugging Face model directory\nintegrity: REFUSED: %s\n", path.c_str(),
                  e.what());
    return kExitRefused;
  }
  if (std::filesystem::exists(std::filesystem::path(path) / "tokenizer.json")) {
    try {
      const Tokenizer tokenizer = Tokenizer::from_pretrained(path);
      tokenizer_line = tokenizer.describe();
      template_family = tokenizer.chat_template() ? "" : "none";
      if (template_family.empty()) {
        try {
          template_family = chat_setup(&tokenizer, path).format.family() + " (rendered natively)";
        } catch (const Error& e) {
          template_family = std::string("present, not rendered natively: ") + e.what();
        }
      }
    } catch (const Error& e) {
      tokenizer_line = std::string("REFUSED: ") + e.what();
    }
  }
  const CausalLM& lm = *model->causal_lm();
  const std::vector<NamedTensorCopy> tensors = lm.parameters();
  std::int64_t count = 0;
  for (const NamedTensorCopy& t : tensors) count += static_cast<std::int64_t>(t.values.size());
  const std::string positions = lm.max_positions() ? std::to_string(*lm.max_positions()) : "none";
  if (as_json) {
    std::string out =
        "{\"file\":" + json_string(path) + ",\"kind\":\"Hugging Face model directory\"" +
        ",\"model_type\":" + json_string(lm.model_type()) + ",\"stack\":" + json_string(lm.kind()) +
        ",\"config\":{\"vocab\":" + std::to_string(lm.vocab_size()) +
        ",\"d_model\":" + std::to_string(lm.d_model()) + ",\"layers\":" + std::to_string(lm.n_layers()) +
        ",\"tie_embeddings\":" + (lm.tie_embeddings() ? "true" : "false") +
        ",\"norm_eps\":" + number(lm.norm_eps()) +
        ",\"max_positions\":" + (lm.max_positions() ? positions : "null") + "}" +
        ",\"weight_format\":" + json_string(lm.weight_format()) + ",\"parameters\":" + std::to_string(count) +
        ",\"tensors\":[";
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (i) out += ',';
      out += tensor_json(tensors[i].name, tensors[i].shape, tensors[i].values.data(),
                         static_cast<std::int64_t>(tensors[i].values.size()));
    }
    out += "],\"unused_names\":[";
    for (std::size_t i = 0; i < lm.unused_names().size(); ++i) {
      if (i) out += ',';
      out += json_string(lm.unused_names()[i]);
    }
    out += "],\"tokenizer\":" + json_string(tokenizer_line) +
           ",\"chat_template\":" + (template_family.empty() ? "null" : json_string(template_family)) +
           ",\"integrity\":{\"ok\":true}}";
    std::printf("%s\n", out.c_str());
    return kExitOk;
  }
  std::printf("file: %s\n", path.c_str());
  std::printf("kind: Hugging Face model directory, %s\n", lm.repr().c_str());
  std::printf(
      "config: vocab %lld, d_model %lld, layers %lld, %s head, final norm_eps %.9g, max positions %s\n",
      static_cast<long long>(lm.vocab_size()), static_cast<long long>(lm.d_model()),
      static_cast<long long>(lm.n_layers()), lm.tie_embeddings() ? "tied" : "untied", lm.norm_eps(),
      positions.c_str());
  std::printf("parameters: %lld in %lld tensors\n", static_cast<long long>(count),
              static_cast<long long>(tensors.size()));
  std::printf("weight format: %s\n", lm.weight_format().c_str());
  std::printf("unused checkpoint tensors: %s\n",
              lm.unused_names().empty() ? "none" : name_list_text(lm.unused_names()).c_str());
  std::printf("tokenizer: %s\n", tokenizer_line.c_str());
  if (!template_family.empty()) std::printf("chat template: %s\n", template_family.c_str());
  std::printf("tensors:\n");
  int width = 0;
  for (const auto& t : tensors) width = std::max<int>(width, static_cast<int>(t.name.size()));
  for (const auto& t : tensors)
    print_tensor_row(t.name, t.shape, t.values.data(), static_cast<std::int64_t>(t.values.size()), width);
  std::printf("integrity: OK (config planned, every tensor read, shapes and finiteness checked)\n");
  return kExitOk;
}

}  // namespace

int info_gguf(const std::string& path, bool as_json);  // cli/info_gguf.cpp

const CommandSpec& info_spec() {
  static const CommandSpec spec{
      "info",
      "CHECKPOINT [--json]",
      "format, config, tensor table and integrity verdict of a checkpoint\n"
      "A Samba checkpoint (v2 archive or legacy JSON), an MLP checkpoint, a GGUF file or a Hugging Face\n"
      "model directory. Every integrity check runs; the verdict line says OK or REFUSED with the reason\n"
      "(exit 1).",
      {{"--json", "", "", "", "print one JSON object instead of text"}},
      "samebits info assets/default-model/samba-kjv.ckpt --json"};
  return spec;
}

int command_info(const Args& args) {
  const std::string& path = args.single("CHECKPOINT");
  if (is_model_directory(path)) return info_model_directory(path, args.flag("--json"));
  // An unreadable path or a file of another kind is refused before any output.
  const FileKind kind = require_file_kind(
      path, "info", {FileKind::SambaArchive, FileKind::SambaJson, FileKind::MlpCheckpoint, FileKind::Gguf},
      "a Samba or MLP checkpoint or a GGUF file", "checkpoint");
  if (kind == FileKind::Gguf) return info_gguf(path, args.flag("--json"));
  if (args.flag("--json")) return info_json(path, kind);
  std::printf("file: %s\n", path.c_str());
  if (kind == FileKind::MlpCheckpoint) return info_mlp(path);
  try {
    return info_samba(path);
  } catch (const Error&) {
    return 1;  // the refusal is already printed as the verdict
  }
}

}  // namespace samebits::cli
