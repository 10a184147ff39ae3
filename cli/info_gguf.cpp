// `samebits info FILE.gguf`: the container, the architecture's hyper-parameters, a tokenizer summary, the
// tensor table with types and a quantization summary, then the integrity verdict (docs/gguf.md §9).
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/gguf.hpp>
#include <string>
#include <vector>

#include "cli.hpp"

namespace samebits::cli {
namespace {

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

// A scalar value as text (strings quoted); an array as "[TYPE x N]".
std::string value_text(const GgufValue& v) {
  std::string out;
  if (v.type == GgufValueType::Array) {
    out.append("[").append(gguf_value_type_name(v.element)).append(" x ").append(std::to_string(v.count()));
    return out.append("]");
  }
  if (v.type == GgufValueType::Bool) return v.uints[0] ? "true" : "false";
  if (!v.uints.empty()) return std::to_string(v.uints[0]);
  if (!v.ints.empty()) return std::to_string(v.ints[0]);
  if (!v.floats.empty()) return number(v.floats[0]);
  return out.append("'").append(v.strings[0]).append("'");
}

std::string value_json(const GgufValue& v) {
  if (v.type == GgufValueType::Array)
    return "{\"array\":" + json_string(gguf_value_type_name(v.element)) +
           ",\"count\":" + std::to_string(v.count()) + "}";
  if (v.type == GgufValueType::Bool) return v.uints[0] ? "true" : "false";
  if (!v.uints.empty()) return std::to_string(v.uints[0]);
  if (!v.ints.empty()) return std::to_string(v.ints[0]);
  if (!v.floats.empty()) return number(v.floats[0]);
  return json_string(v.strings[0]);
}

std::string row_major_shape(const std::vector<std::uint64_t>& ne) {
  std::string text = "(";
  for (std::size_t i = ne.size(); i-- > 0;) text += std::to_string(ne[i]) + (i ? ", " : "");
  return text + (ne.size() == 1 ? ",)" : ")");
}

struct TypeTotals {
  std::uint64_t tensors = 0, elements = 0, bytes = 0;
};

// The token id of `key` and its text, when both exist.
std::string token_text(const GgufFile& f, const char* key) {
  const GgufValue* id = f.find(key);
  if (id == nullptr || id->type != GgufValueType::Uint32) return "none";
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  std::string out = std::to_string(id->uints[0]);
  if (tokens != nullptr && id->uints[0] < tokens->strings.size())
    out += " '" + tokens->strings[id->uints[0]] + "'";
  return out;
}

std::string string_of(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  return v != nullptr && v->type == GgufValueType::String ? v->strings[0] : std::string("(absent)");
}

}  // namespace

int info_gguf(const std::string& path, bool as_json) {
  std::optional<GgufFile> opened;
  std::string refusal;
  try {
    opened.emplace(GgufFile::open(path));
  } catch (const Error& e) {
    refusal = e.what();
  }
  if (!opened) {
    if (as_json) {
      std::printf("{\"file\":%s,\"kind\":\"GGUF file\",\"integrity\":{\"ok\":false,\"error\":%s}}\n",
                  json_string(path).c_str(), json_string(refusal).c_str());
    } else {
      std::printf("file: %s\nkind: GGUF file expected\nintegrity: REFUSED: %s\n", path.c_str(),
                  refusal.c_str());
    }
    return kExitRefused;
  }
  const GgufFile& f = *opened;
  std::string verdict;
  try {
    f.check_finite();
  } catch (const Error& e) {
    verdict = e.what();
  }
  const std::string arch = string_of(f, "general.architecture");
  std::map<std::string, TypeTotals> totals;
  std::uint64_t elements = 0, bytes = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    TypeTotals& row = totals[t.type_name];
    ++row.tensors;
    row.elements += t.elements;
    row.bytes += t.nbytes;
    elements += t.elements;
    bytes += t.nbytes;
  }
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  const GgufValue* merges = f.find("tokenizer.ggml.merges");
  const std::uint64_t vocab = tokens != nullptr ? tokens->strings.size() : 0;
  const double bpw = elements ? 8.0 * static_cast<double>(bytes) / static_cast<double>(elements) : 0.0;
  const std::string prefix = arch + ".";

  if (as_json) {
    std::string out = "{\"file\":" + json_string(path) +
                      ",\"kind\":\"GGUF file\",\"version\":" + std::to_string(f.version()) +
                      ",\"size_bytes\":" + std::to_string(f.file_bytes()) +
                      ",\"alignment\":" + std::to_string(f.alignment()) +
                      ",\"architecture\":" + json_string(arch) + ",\"hyperparameters\":{";
    bool first = true;
    for (const GgufKeyValue& kv : f.metadata())
      if (kv.key.rfind(prefix, 0) == 0) {
        out += first ? "" : ",";
        out += json_string(kv.key.substr(prefix.size())) + ":" + value_json(kv.value);
        first = false;
      }
    out += "},\"tokenizer\":{\"model\":" + json_string(string_of(f, "tokenizer.ggml.model")) +
           ",\"pre\":" + json_string(string_of(f, "tokenizer.ggml.pre")) +
           ",\"vocab\":" + std::to_string(vocab) +
           ",\"bos\":" + json_string(token_text(f, "tokenizer.ggml.bos_token_id")) +
           ",\"eos\":" + json_string(token_text(f, "tokenizer.ggml.eos_token_id")) + "},\"tensors\":[";
    for (std::size_t i = 0; i < f.tensors().size(); ++i) {
      const GgufTensorInfo& t = f.tensors()[i];
      std::string ne;
      for (std::size_t d = 0; d < t.ne.size(); ++d) ne.append(d ? "," : "").append(std::to_string(t.ne[d]));
      out += i ? ",{" : "{";
      out += "\"name\":" + json_string(t.name) + ",\"ne\":[" + ne + "],\"type\":" + json_string(t.type_name) +
             ",\"bytes\":" + std::to_string(t.nbytes) + "}";
    }
    out += "],\"quantization\":{";
    first = true;
    for (const auto& [type, row] : totals) {
      out += first ? "" : ",";
      out += json_string(type) + ":{\"tensors\":" + std::to_string(row.tensors) +
             ",\"elements\":" + std::to_string(row.elements) + ",\"bytes\":" + std::to_string(row.bytes) +
             "}";
      first = false;
    }
    out += "},\"parameters\":" + std::to_string(elements) + ",\"tensor_bytes\":" + std::to_string(bytes) +
           ",\"integrity\":" +
           (verdict.empty() ? std::string("{\"ok\":true}")
                            : "{\"ok\":false,\"error\":" + json_string(verdict) + "}") +
           "}";
    std::printf("%s\n", out.c_str());
    return verdict.empty() ? kExitOk : kExitRefused;
  }

  std::printf("file: %s\n", path.c_str());
  std::printf("kind: GGUF v%u model file\n", f.version());
  std::printf("size: %llu bytes, alignment %llu, data section at byte %llu\n",
              static_cast<unsigned long long>(f.file_bytes()), static_cast<unsigned long long>(f.alignment()),
              static_cast<unsigned long long>(f.data_offset()));
  std::printf("architecture: %s", arch.c_str());
  if (f.find("general.name") != nullptr) std::printf(" (%s)", string_of(f, "general.name").c_str());
  std::printf("\nhyper-parameters:\n");
  for (const GgufKeyValue& kv : f.metadata())
    if (kv.key.rfind(prefix, 0) == 0)
      std::printf("  %-40s %s\n", kv.key.substr(prefix.size()).c_str(), value_text(kv.value).c_str());
  std::printf("tokenizer: model %s, pre %s, vocab %llu, merges %llu, bos %s, eos %s, chat template %s\n",
              string_of(f, "tokenizer.ggml.model").c_str(), string_of(f, "tokenizer.ggml.pre").c_str(),
              static_cast<unsigned long long>(vocab),
              static_cast<unsigned long long>(merges != nullptr ? merges->strings.size() : 0),
              token_text(f, "tokenizer.ggml.bos_token_id").c_str(),
              token_text(f, "tokenizer.ggml.eos_token_id").c_str(),
              f.find("tokenizer.chat_template") != nullptr ? "yes" : "no");
  std::printf("tensors: %zu\n", f.tensors().size());
  int width = 0;
  for (const GgufTensorInfo& t : f.tensors()) width = std::max(width, static_cast<int>(t.name.size()));
  for (const GgufTensorInfo& t : f.tensors())
    std::printf("  %-*s %-14s %-5s %10llu bytes\n", width, t.name.c_str(), row_major_shape(t.ne).c_str(),
                t.type_name.c_str(), static_cast<unsigned long long>(t.nbytes));
  std::printf("quantization:\n");
  for (const auto& [type, row] : totals)
    std::printf("  %-5s %4llu tensors %12llu elements %12llu bytes (%.4g bits per weight)\n", type.c_str(),
                static_cast<unsigned long long>(row.tensors), static_cast<unsigned long long>(row.elements),
                static_cast<unsigned long long>(row.bytes),
                8.0 * static_cast<double>(row.bytes) / static_cast<double>(row.elements));
  std::printf("  total %4zu tensors %12llu elements %12llu bytes (%.4g bits per weight)\n",
              f.tensors().size(), static_cast<unsigned long long>(elements),
              static_cast<unsigned long long>(bytes), bpw);
  if (!verdict.empty()) {
    std::printf("integrity: REFUSED: %s\n", verdict.c_str());
    return kExitRefused;
  }
  std::printf("integrity: OK (every container check passed; every value and scale finite)\n");
  return kExitOk;
}

}  // namespace samebits::cli
