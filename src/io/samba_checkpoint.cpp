// Samba checkpoint readers: the streamed v2 archive (docs/formats.md §3.2-§3.9) and the legacy JSON file
// (3.11), both finished by SambaInference.from_checkpoint's own checks (3.10), in upstream's order.
#include "io/samba_checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/tensor.hpp>
#include <utility>

#include "io/sha256.hpp"
#include "numerics/fp.hpp"

namespace samebits::io {
namespace {

// The archive's arrays are raw little-endian words, copied into memory as they are.
static_assert(std::endian::native == std::endian::little, "the Samba readers assume a little-endian host");

using json::Value;
using models::SambaConfig;
using models::SambaConfigArgs;
using models::SambaRegistry;

const std::string kStream = "Samba checkpoint ";             // _samba_checkpoint.load/_validate
const std::string kStack = "samebits.SambaStack: ";          // the legacy container reader
const std::string kInference = "samebits.SambaInference: ";  // from_checkpoint and the constructor
const std::string kConfig = "samebits.SambaConfig: ";

[[noreturn]] void refuse(const std::string& message) { throw_value_error(message); }

struct ArraySpec {
  std::string_view name;
  std::string_view dtype;
};
constexpr std::array<ArraySpec, 4> kArrays = {
    {{"parameters", "<f4"}, {"exp_avg", "<f4"}, {"exp_avg_sq", "<f4"}, {"buf_initialized", "<i4"}}};

// --------------------------------------------------------------------------------------- files

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_checkpoint(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file)
    refuse(kInference + "checkpoint cannot be opened: '" + path + "' (" + std::strerror(errno) + ")");
  return file;
}

// Reads until `size` bytes arrived or the file ended; a read error is a refusal, not a short read.
std::size_t read_up_to(std::FILE* file, void* target, std::size_t size, const std::string& path) {
  std::size_t total = 0;
  auto* bytes = static_cast<unsigned char*>(target);
  while (total < size) {
    std::size_t got = std::fread(bytes + total, 1, size - total, file);
    if (got == 0) break;
    total += got;
  }
  if (std::ferror(file))
    refuse(kInference + "checkpoint cannot be read: '" + path + "' (" + std::strerror(errno) + ")");
  return total;
}

std::uint64_t size_of(std::FILE* file, const std::string& path) {
  struct stat status {};
  if (fstat(fileno(file), &status) != 0) {
    refuse(kInference + "checkpoint cannot be read: '" + path + "' (" + std::strerror(errno) + ")");
  }
  return static_cast<std::uint64_t>(status.st_size);
}

// ------------------------------------------------------------------------------ small JSON helpers

std::string json_type_name(const Value& value) {
  // Python's name of each json::Type, in the enum's order (Null, Bool, Integer, Float, String, Array,
  // Object).
  static constexpr const char* kNames[] = {"None", "bool", "int", "float", "str", "list", "dict"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(json::Type::Object) + 1);
  return kNames[static_cast<std::size_t>(value.type())];
}

// Strict integer equality: Python's == would also take 3.0 or true for 3 (Open point 8.4).
bool is_integer_equal(const Value* value, std::int64_t expected) {
  return value != nullptr && value->is_integer() && value->as_int64() == expected;
}

bool is_integer_list(const Value* value, const std::vector<std::int64_t>& expected) {
  if (value == nullptr || !value->is_array() || value->as_array().size() != expected.size()) return false;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (!is_integer_equal(&value->as_array()[i], expected[i])) return false;
  }
  return true;
}

std::string canonical_or_empty(const Value* value) {
  return value == nullptr ? "" : json::canonical_json(*value);
}

std::string text_or_canonical(const Value* value) {
  if (value == nullptr) return "";
  if (value->is_string()) return json::to_utf8(value->as_string());
  return json::canonical_json(*value);
}

// ----------------------------------------------------------------------------------- config

std::int64_t config_integer(const Value& value, std::string_view key) {
  if (!value.is_integer())
    refuse(kConfig + std::string(key) + " must be an integer, not " + json_type_name(value));
  std::optional<std::int64_t> number = value.as_int64();
  if (!number)
    refuse(kConfig + std::string(key) + " = " + value.integer_decimal() + " does not fit a 64-bit integer");
  return *number;
}

std::optional<std::int64_t> config_optional_integer(const Value& value, std::string_view key) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_integer()) {
    refuse(kConfig + std::string(key) + " must be an integer or null, not " + json_type_name(value));
  }
  return config_integer(value, key);
}

double config_number(const Value& value, std::string_view key) {
  if (value.is_float()) return value.as_float();
  if (value.is_integer()) {
    // Python's float(int): correctly rounded, OverflowError past the double range.
    const std::string& decimal = value.integer_decimal();
    double number = 0.0;
    auto [end, error] = std::from_chars(decimal.data(), decimal.data() + decimal.size(), number);
    if (error != std::errc()) refuse(kConfig + std::string(key) + " is too large to convert to float");
    return number;
  }
  refuse(kConfig + std::string(key) + " must be a number, not " + json_type_name(value));
}

// ------------------------------------------------------------------------ numeric profile (8.6)

// _numeric_profile.check_saved(state, "fp32_v1", ...): the wording of SambaStack.load_state_dict.
void check_numeric_profile(const Value& state, std::string& profile_out) {
  const std::string what = "samebits.SambaInference state";
  const std::string registered = "fp32_v1, fixed15_v1";
  const Value* saved = state.find("numeric_profile");
  if (saved == nullptr || saved->is_null()) {
    profile_out = std::string(kSambaNumericProfile);
    return;
  }
  if (!saved->is_string()) {
    refuse("samebits: " + what + " numeric_profile must be a profile name (a str), got " +
           json_type_name(*saved));
  }
  const std::string name = json::to_utf8(saved->as_string());
  const std::string shown = models::python_str_repr(name);
  std::string key = name;
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!key.empty() && is_space(key.back())) key.pop_back();
  key.erase(key.begin(), std::find_if_not(key.begin(), key.end(), is_space));
  if (key == kSambaNumericProfile) {
    profile_out = key;
    return;
  }
  if (key == "fixed15_v1") {
    refuse("samebits: " + what +
           " was written under numeric profile 'fixed15_v1' and this object computes under " +
           "'fp32_v1'; a run keeps one arithmetic, so build the object with numeric_profile='fixed15_v1'");
  }
  if (key == "int8_v1" || key == "fixed15_int8_attention_v1") {
    const std::string reason =
        key == "int8_v1" ? "int8 codes on both operands of every product cost far more than the 1 percent "
                           "perplexity bar in mojolearn's measurement"
                         : "mojolearn dropped it before its whole configuration was measured";
    refuse("samebits: " + what + " numeric_profile=" + shown + " is not offered: " + reason +
           ". Registered: " + registered);
  }
  refuse("samebits: " + what + " numeric_profile=" + shown +
         " is not a registered numeric profile; registered: " + registered);
}

// -------------------------------------------------------------- SambaInference.from_checkpoint (3.10)

// What the inference checks admitted: the config, its registry and where each tensor sits in the file's
// flat parameter array (the legacy path trusts the file's offsets; every v2 file is in registry layout).
struct Admitted {
  SambaConfig config;
  SambaRegistry registry;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;  // (start, count) per registry entry
  bool canonical_layout = false;                             // spans are the registry's own offsets
};

// The first checks both readers make on a state: its schema and profile (refused as `mismatch` when
// either is wrong), then its config (with the config's own refusals).
SambaConfig state_config(const Value& state, const std::string& mismatch) {
  if (!state.is_object() || !state.find("schema") ||
      !state.find("schema")->is_string_equal(kSambaStateSchema) || !state.find("profile") ||
      !state.find("profile")->is_string_equal(kSambaStackProfile)) {
    refuse(mismatch);
  }
  const Value* config_value = state.find("config");
  return samba_config_from_json(config_value ? *config_value : Value());
}

// The inference checks on a verified container's state, for a flat parameter array of `available`
// floats: everything but the finiteness of the values, which the callers check per tensor.
Admitted admit_inference(const Value& state, std::int64_t available, SambaCheckpointInfo& info) {
  // 2. schema and profile, 3. config
  SambaConfig config = state_config(state, kInference + "checkpoint schema/profile mismatch");
  // 4. the file's (name, shape) list against the config's
  SambaRegistry registry = config.registry();
  const std::string differs = kInference + "checkpoint registry differs from its config's";
  const Value* entries = state.find("registry");
  if (entries == nullptr || !entries->is_array() || entries->as_array().size() != registry.entries.size()) {
    refuse(differs);
  }
  for (std::size_t i = 0; i < registry.entries.size(); ++i) {
    const Value& entry = entries->as_array()[i];
    const Value* name = entry.find("name");
    if (name == nullptr || !name->is_string_equal(registry.entries[i].name) ||
        !is_integer_list(entry.find("shape"), registry.entries[i].shape)) {
      refuse(differs);
    }
  }
  // Not run by upstream's SambaInference; SambaStack's wording (Open point 8.6).
  check_numeric_profile(state, info.numeric_profile);
  // 5. slice by the file's offsets and sizes (the legacy path trusts them), as Python slices a flat view
  bool canonical_layout = available == registry.total;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;  // (start, count) in the flat array
  for (std::size_t i = 0; i < registry.entries.size(); ++i) {
    const Value& entry = entries->as_array()[i];
    const Value* offset_value = entry.find("offset");
    const Value* size_value = entry.find("size");
    std::optional<std::int64_t> offset =
        offset_value && offset_value->is_integer() ? offset_value->as_int64() : std::nullopt;
    std::optional<std::int64_t> size =
        size_value && size_value->is_integer() ? size_value->as_int64() : std::nullopt;
    // Stricter than Python's slice: a negative or non-integer bound is refused, never wrapped.
    if (!offset || !size || *offset < 0 || *size < 0) refuse(differs);
    const std::int64_t start = std::min(*offset, available);
    const std::int64_t stop = *size > available - start ? available : start + *size;
    const std::int64_t count = stop - start;
    const models::SambaRegistryEntry& want = registry.entries[i];
    if (count != want.size) {
      refuse("samebits: " + std::to_string(count * 4) + " bytes do not fill shape " + shape_repr(want.shape) +
             " of <f4 (" + std::to_string(want.size * 4) + " bytes)");
    }
    canonical_layout = canonical_layout && start == want.offset;
    spans.emplace_back(start, count);
  }
  return Admitted{std::move(config), std::move(registry), std::move(spans), canonical_layout};
}

// The constructor's check: every weight finite, named by the first tensor (in registry order) that is not.
void refuse_non_finite(const models::SambaRegistryEntry& entry, const float* values) {
  if (!std::all_of(values, values + entry.size, [](float v) { return fp::is_finite(v); })) {
    refuse(kInference + entry.name + " is not finite");
  }
}

// The metadata a CLI shows, read from the state and dropped by inference.
void record_metadata(const Value& state, const SambaRegistry& registry, SambaCheckpointInfo& info) {
  info.numeric_mode = text_or_canonical(state.find("numeric_mode"));
  info.step_json = canonical_or_empty(state.find("t"));
  info.optimizer_json = canonical_or_empty(state.find("optimizer"));
  const Value* schedule = state.find("schedule");
  info.schedule_json = schedule == nullptr ? "null" : json::canonical_json(*schedule);
  info.rng_json = canonical_or_empty(state.find("rng"));
  info.parameter_count = registry.total;
  info.tensor_count = static_cast<std::int64_t>(registry.entries.size());
}

void release(std::vector<float>& buffer) { std::vector<float>().swap(buffer); }

// SambaInference.from_checkpoint's own checks (3.10) on a verified container's state and its flat
// parameter array; the weights come back repacked into the registry layout (a no-op for every file
// mojolearn writes).
SambaCheckpoint finish_flat(const Value& state, std::vector<float> flat, SambaCheckpointInfo info) {
  Admitted admitted = admit_inference(state, static_cast<std::int64_t>(flat.size()), info);
  const SambaRegistry& registry = admitted.registry;
  std::vector<float> parameters;
  if (admitted.canonical_layout) {
    parameters = std::move(flat);
  } else {
    parameters.resize(static_cast<std::size_t>(registry.total));
    for (std::size_t i = 0; i < admitted.spans.size(); ++i) {
      std::copy_n(flat.begin() + admitted.spans[i].first, admitted.spans[i].second,
                  parameters.begin() + registry.entries[i].offset);
    }
    release(flat);
  }
  for (const models::SambaRegistryEntry& entry : registry.entries)
    refuse_non_finite(entry, parameters.data() + entry.offset);
  record_metadata(state, registry, info);
  return SambaCheckpoint{std::move(admitted.config), std::move(admitted.registry), std::move(parameters),
                         std::move(info)};
}

// The same checks, the weights cut into one buffer per registry tensor (the flat array is released).
SambaCheckpointTensors finish_split(const Value& state, std::vector<float> flat, SambaCheckpointInfo info) {
  Admitted admitted = admit_inference(state, static_cast<std::int64_t>(flat.size()), info);
  std::vector<std::vector<float>> tensors;
  tensors.reserve(admitted.spans.size());
  for (const auto& [start, count] : admitted.spans)
    tensors.emplace_back(flat.begin() + start, flat.begin() + start + count);
  release(flat);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    refuse_non_finite(admitted.registry.entries[i], tensors[i].data());
  record_metadata(state, admitted.registry, info);
  return SambaCheckpointTensors{std::move(admitted.config), std::move(admitted.registry), std::move(tensors),
                                std::move(info)};
}

// The same checks on weights already read into per-tensor buffers in registry layout (the v2 archive,
// whose registry was proven equal to the config's before any weight was read).
SambaCheckpointTensors finish_split(const Value& state, std::vector<std::vector<float>> tensors,
                                    SambaCheckpointInfo info) {
  std::int64_t available = 0;
  for (const std::vector<float>& tensor : tensors) available += static_cast<std::int64_t>(tensor.size());
  Admitted admitted = admit_inference(state, available, info);
  if (!admitted.canonical_layout || tensors.size() != admitted.registry.entries.size())
    throw_runtime_error("Samba checkpoint: per-tensor buffers outside the registry layout");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    refuse_non_finite(admitted.registry.entries[i], tensors[i].data());
  record_metadata(state, admitted.registry, info);
  return SambaCheckpointTensors{std::move(admitted.config), std::move(admitted.registry), std::move(tensors),
                                std::move(info)};
}

// ------------------------------------------------------------------- streamed v2 archive (3.9)

struct StreamLayout {
  std::int64_t parameters = 0;  // N
  std::int64_t tensors = 0;     // T
  SambaRegistry registry;       // the config's, equal to the file's (offsets included)
};

bool is_lower_hex_digest(const Value* value) {
  if (value == nullptr || !value->is_string() || value->as_string().size() != 64) return false;
  return std::all_of(value->as_string().begin(), value->as_string().end(),
                     [](char32_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool registry_entry_equals(const Value& entry, const models::SambaRegistryEntry& want) {
  return entry.has_exactly_keys({"name", "offset", "shape", "size"}) &&
         entry.find("name")->is_string_equal(want.name) &&
         is_integer_equal(entry.find("offset"), want.offset) &&
         is_integer_list(entry.find("shape"), want.shape) && is_integer_equal(entry.find("size"), want.size);
}

// _validate(state, arrays), 7a-7h. Lengths come from the admitted registry, never from a descriptor.
StreamLayout validate_stream_state(const Value& state, const Value& arrays) {
  // a. schema and profile, b. config (its own refusals)
  SambaConfig config = state_config(state, kStream + "state schema mismatch");
  // c. registry length
  const Value* registry_value = state.find("registry");
  if (registry_value == nullptr || !registry_value->is_array() ||
      static_cast<std::int64_t>(registry_value->as_array().size()) != config.tensor_count()) {
    refuse(kStream + "registry length mismatch");
  }
  // d. every derived tensor non-empty
  SambaRegistry expected = config.registry();
  for (const models::SambaRegistryEntry& entry : expected.entries) {
    if (entry.size < 1) refuse(kStream + "registry has an empty tensor");
  }
  // e. int32 bound and the exact list
  bool equal = expected.total <= models::kSambaMaxParameters;
  for (std::size_t i = 0; equal && i < expected.entries.size(); ++i) {
    equal = registry_entry_equals(registry_value->as_array()[i], expected.entries[i]);
  }
  if (!equal) refuse(kStream + "registry mismatch or index overflow");
  // f. optimizer step, kind, RNG, mode and schedule containers
  const Value* t = state.find("t");
  const Value* optimizer = state.find("optimizer");
  const Value* rng = state.find("rng");
  const Value* mode = state.find("numeric_mode");
  const Value* schedule = state.find("schedule");
  bool metadata_ok = t != nullptr && t->is_integer() && t->integer_decimal().front() != '-' &&
                     optimizer != nullptr && optimizer->is_object() && optimizer->find("kind") != nullptr &&
                     optimizer->find("kind")->is_string_equal("adamw") && rng != nullptr &&
                     rng->is_object() && mode != nullptr &&
                     (mode->is_string_equal("identical") || mode->is_string_equal("fast") ||
                      mode->is_string_equal("deterministic")) &&
                     (schedule == nullptr || schedule->is_null() || schedule->is_object());
  if (!metadata_ok) refuse(kStream + "state metadata mismatch");
  // g. four descriptors
  if (!arrays.is_array() || arrays.as_array().size() != kArrays.size())
    refuse(kStream + "array registry mismatch");
  // h. each descriptor exactly as the registry implies
  const std::int64_t n = expected.total;
  const std::int64_t tensors = static_cast<std::int64_t>(expected.entries.size());
  for (std::size_t i = 0; i < kArrays.size(); ++i) {
    const Value& entry = arrays.as_array()[i];
    const std::int64_t count = kArrays[i].name == "buf_initialized" ? tensors : n;
    bool ok = entry.has_exactly_keys({"name", "dtype", "shape", "nbytes", "sha256"}) &&
              entry.find("name")->is_string_equal(kArrays[i].name) &&
              entry.find("dtype")->is_string_equal(kArrays[i].dtype) &&
              is_integer_list(entry.find("shape"), {count}) &&
              is_integer_equal(entry.find("nbytes"), 4 * count) && is_lower_hex_digest(entry.find("sha256"));
    if (!ok) refuse(kStream + "array descriptor mismatch");
  }
  return {n, tensors, std::move(expected)};
}

}  // namespace

// ------------------------------------------------------------------------------ public: config

json::Value samba_config_to_json(const models::SambaConfig& config) {
  const SambaConfigArgs& f = config.fields();
  auto optional_integer = [](const std::optional<std::int64_t>& v) {
    return v ? Value::make_integer(*v) : Value();
  };
  Value::Array layers;
  for (const std::string& kind : f.layers) layers.push_back(Value::make_string(json::from_ascii(kind)));
  Value::Object members;
  members.emplace_back(U"vocab", Value::make_integer(f.vocab));
  members.emplace_back(U"d_model", Value::make_integer(f.d_model));
  members.emplace_back(U"layers", Value::make_array(std::move(layers)));
  members.emplace_back(U"n_heads", optional_integer(f.n_heads));
  members.emplace_back(U"n_kv_heads", optional_integer(f.n_kv_heads));
  members.emplace_back(U"head_dim", optional_integer(f.head_dim));
  members.emplace_back(U"intermediate", optional_integer(f.intermediate));
  members.emplace_back(U"tie_embeddings", Value::make_bool(f.tie_embeddings));
  members.emplace_back(U"norm_eps", Value::make_float(f.norm_eps));
  members.emplace_back(U"dropout", Value::make_float(f.dropout));
  return Value::make_object(std::move(members));
}

models::SambaConfig samba_config_from_json(const json::Value& dict) {
  static constexpr std::array<std::string_view, 10> kKeys = {
      "vocab",    "d_model",      "layers",         "n_heads",  "n_kv_heads",
      "head_dim", "intermediate", "tie_embeddings", "norm_eps", "dropout"};
  if (!dict.is_object())
    refuse(kConfig + "from_dict takes a dict with the ten config keys, not " + json_type_name(dict));
  // Upstream reads every key (KeyError on the first missing one) before the constructor runs.
  for (std::string_view key : kKeys) {
    if (dict.find(key) == nullptr)
      refuse(kConfig + "from_dict is missing the key " + models::python_str_repr(key));
  }
  SambaConfigArgs args;
  args.vocab = config_integer(*dict.find("vocab"), "vocab");
  args.d_model = config_integer(*dict.find("d_model"), "d_model");
  const Value& layers = *dict.find("layers");
  if (!layers.is_array())
    refuse(kConfig + "layers must be a list of layer kinds, not " + json_type_name(layers));
  for (const Value& kind : layers.as_array()) {
    if (!kind.is_string())
      refuse(kConfig + "layers must be a list of layer kinds, not of " + json_type_name(kind));
    args.layers.push_back(json::to_utf8(kind.as_string()));
  }
  args.n_heads = config_optional_integer(*dict.find("n_heads"), "n_heads");
  args.n_kv_heads = config_optional_integer(*dict.find("n_kv_heads"), "n_kv_heads");
  args.head_dim = config_optional_integer(*dict.find("head_dim"), "head_dim");
  args.intermediate = config_optional_integer(*dict.find("intermediate"), "intermediate");
  const Value& tie = *dict.find("tie_embeddings");
  if (!tie.is_bool()) refuse(kConfig + "tie_embeddings must be true or false, not " + json_type_name(tie));
  args.tie_embeddings = tie.as_bool();
  args.norm_eps = config_number(*dict.find("norm_eps"), "norm_eps");
  args.dropout = config_number(*dict.find("dropout"), "dropout");
  return SambaConfig(args);
}

// ------------------------------------------------------------------------------ public: readers

std::span<const float> SambaCheckpoint::weight(std::size_t index) const {
  const models::SambaRegistryEntry& entry = registry.entries.at(index);
  return {parameters.data() + entry.offset, static_cast<std::size_t>(entry.size)};
}

std::span<const float> SambaCheckpoint::weight(std::string_view name) const {
  std::size_t index = registry.index_of(name);
  if (index == SambaRegistry::npos)
    refuse(kInference + "the checkpoint has no weight named '" + std::string(name) + "'");
  return weight(index);
}

namespace {

// Where the parameters array goes: spans covering all N floats in file order, asked for only after the
// file size matched the verified header (so N is bounded by the file's real size).
using ParameterTargets = std::function<std::vector<std::span<float>>(const SambaRegistry&)>;

// The streamed v2 archive's container checks (3.9) in upstream's order. The parameters array is read
// and hashed straight into `targets`; the moments are hashed a chunk at a time and dropped. Returns the
// parsed envelope (whose "state" the inference checks read next).
Value read_stream(const std::string& path, const ParameterTargets& targets, SambaCheckpointInfo& info) {
  File file = open_checkpoint(path);
  // 1. magic
  std::array<char, 17> magic{};
  if (read_up_to(file.get(), magic.data(), magic.size(), path) != magic.size() ||
      std::string_view(magic.data(), magic.size()) != kSambaStreamMagic) {
    refuse(kStream + "stream magic mismatch");
  }
  // 2. header length present
  std::array<unsigned char, 8> length_bytes{};
  if (read_up_to(file.get(), length_bytes.data(), length_bytes.size(), path) != length_bytes.size()) {
    refuse(kStream + "truncated header length");
  }
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | length_bytes[static_cast<std::size_t>(i)];
  // 3. bounded before anything is allocated from it
  if (length < 1 || length > kSambaHeaderLimit) refuse(kStream + "header length exceeds limit");
  // 4. header bytes and their digest
  std::string header(static_cast<std::size_t>(length), '\0');
  std::size_t header_got = read_up_to(file.get(), header.data(), header.size(), path);
  Sha256Digest stored{};
  std::size_t digest_got = read_up_to(file.get(), stored.data(), stored.size(), path);
  if (header_got != header.size() || digest_got != stored.size() || sha256(header) != stored) {
    refuse(kStream + "header integrity mismatch");
  }
  // 5. JSON: strict (duplicate keys and NaN literals refused), named like the byte-LM sibling's refusal
  Value envelope;
  try {
    envelope = json::parse(header);
  } catch (const json::ParseError&) {
    refuse(kStream + "header is not valid JSON");
  }
  // mojolearn writes the header canonically; another spelling of the same value is refused (stricter).
  if (json::canonical_json(envelope) != header) refuse(kStream + "header integrity mismatch");
  // 6. envelope
  if (!envelope.has_exactly_keys({"schema", "state", "arrays"}) ||
      !envelope.find("schema")->is_string_equal(kSambaStreamSchema)) {
    refuse(kStream + "stream schema mismatch");
  }
  const Value& state = *envelope.find("state");
  const Value& arrays = *envelope.find("arrays");
  // 7. state and descriptors
  StreamLayout layout = validate_stream_state(state, arrays);
  // 8. exact size, before any array byte is read or allocated
  const std::uint64_t n = static_cast<std::uint64_t>(layout.parameters);
  const std::uint64_t t = static_cast<std::uint64_t>(layout.tensors);
  const std::uint64_t expected_size = kSambaStreamMagic.size() + 8 + length + 32 + 4 * (3 * n + t);
  const std::uint64_t file_bytes = size_of(file.get(), path);
  if (file_bytes != expected_size) refuse(kStream + "truncated or trailing array data");
  // 9. each array streamed through its digest; only the parameters are kept
  info.format = SambaCheckpointFormat::StreamV2;
  info.schema = std::string(kSambaStreamSchema);
  info.file_bytes = file_bytes;
  info.header_bytes = length;
  info.integrity_sha256 = digest_hex(stored);
  const std::vector<std::span<float>> kept = targets(layout.registry);
  std::vector<unsigned char> chunk(kSambaStreamChunk);
  for (std::size_t i = 0; i < kArrays.size(); ++i) {
    const Value& descriptor = arrays.as_array()[i];
    const std::uint64_t nbytes = 4 * (kArrays[i].name == "buf_initialized" ? t : n);
    Sha256 hasher;
    // The parameters go to their targets in file order, the other arrays through the scratch chunk.
    std::size_t target = 0;
    std::uint64_t target_done = 0;  // bytes of kept[target] already filled
    for (std::uint64_t done = 0; done < nbytes;) {
      unsigned char* destination = chunk.data();
      std::uint64_t room = kSambaStreamChunk;
      if (i == 0) {
        while (target < kept.size() && target_done == kept[target].size_bytes()) {
          ++target;
          target_done = 0;
        }
        if (target == kept.size()) throw_runtime_error("Samba checkpoint: parameter targets too small");
        destination = reinterpret_cast<unsigned char*>(kept[target].data()) + target_done;
        room = kept[target].size_bytes() - target_done;
      }
      const std::size_t step = static_cast<std::size_t>(std::min({kSambaStreamChunk, nbytes - done, room}));
      if (read_up_to(file.get(), destination, step, path) != step) refuse(kStream + "truncated array");
      hasher.update(destination, step);
      done += step;
      target_done += step;
    }
    std::string actual = digest_hex(hasher.finish());
    if (!descriptor.find("sha256")->is_string_equal(actual)) {
      refuse(kStream + "array integrity mismatch: " + std::string(kArrays[i].name));
    }
    info.arrays.push_back({std::string(kArrays[i].name), std::string(kArrays[i].dtype),
                           static_cast<std::int64_t>(nbytes / 4), actual});
  }
  // 10. nothing after the last array
  unsigned char extra = 0;
  if (read_up_to(file.get(), &extra, 1, path) != 0) refuse(kStream + "trailing array data");
  return envelope;
}

}  // namespace

SambaCheckpoint read_samba_stream_checkpoint(const std::string& path) {
  std::vector<float> parameters;
  SambaCheckpointInfo info;
  const Value envelope = read_stream(
      path,
      [&](const SambaRegistry& registry) {
        parameters.resize(static_cast<std::size_t>(registry.total));
        return std::vector<std::span<float>>{std::span<float>(parameters)};
      },
      info);
  return finish_flat(*envelope.find("state"), std::move(parameters), std::move(info));
}

// The same file, read into one buffer per registry tensor (no flat copy ever exists).
SambaCheckpointTensors read_samba_stream_checkpoint_tensors(const std::string& path) {
  std::vector<std::vector<float>> tensors;
  SambaCheckpointInfo info;
  const Value envelope = read_stream(
      path,
      [&](const SambaRegistry& registry) {
        std::vector<std::span<float>> spans;
        tensors.reserve(registry.entries.size());
        for (const models::SambaRegistryEntry& entry : registry.entries) {
          tensors.emplace_back(static_cast<std::size_t>(entry.size));
          spans.emplace_back(tensors.back());
        }
        return spans;
      },
      info);
  return finish_split(*envelope.find("state"), std::move(tensors), std::move(info));
}

namespace {

// ------------------------------------------------------------------------ legacy JSON (3.11)

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t skip_space(std::string_view text, std::size_t i) {
  while (i < text.size() && is_json_space(text[i])) ++i;
  return i;
}

// Past the closing quote of the string starting at text[i] == '"'.
std::size_t skip_string(std::string_view text, std::size_t i) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return text.size();
}

// Past the value starting at text[i]; the document already parsed, so only nesting needs tracking.
std::size_t skip_value(std::string_view text, std::size_t i) {
  if (text[i] == '"') return skip_string(text, i);
  if (text[i] != '{' && text[i] != '[') {
    while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' && !is_json_space(text[i]))
      ++i;
    return i;
  }
  std::size_t depth = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '"') {
      i = skip_string(text, i);
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
    ++i;
  }
  return text.size();
}

// The exact bytes of the envelope's "payload" value, located in a document known to be a valid object
// that has that key.
std::string_view payload_text(std::string_view text) {
  std::size_t i = skip_space(text, 0) + 1;  // past '{'
  while (true) {
    i = skip_space(text, i);
    std::size_t key_end = skip_string(text, i);
    Value key = json::parse(text.substr(i, key_end - i));
    i = skip_space(text, key_end) + 1;  // past ':'
    i = skip_space(text, i);
    std::size_t value_end = skip_value(text, i);
    if (key.is_string_equal("payload")) return text.substr(i, value_end - i);
    i = skip_space(text, value_end) + 1;  // past ','
  }
}

int hex_value(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// bytes.fromhex: upper or lower case, ASCII whitespace allowed between byte pairs.
template <typename Text>
bool python_fromhex(const Text& text, std::vector<unsigned char>& bytes) {
  auto is_space = [](char32_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  bytes.clear();
  bytes.reserve(text.size() / 2);
  for (std::size_t i = 0;;) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i >= text.size()) return true;
    int high = hex_value(text[i++]);
    int low = i < text.size() ? hex_value(text[i++]) : -1;
    if (high < 0 || low < 0) return false;
    bytes.push_back(static_cast<unsigned char>(high * 16 + low));
  }
}

// ---- The big hex strings, kept out of the parse.
//
// A legacy file is mostly four hex strings. Parsed, each character would cost four bytes (the value
// model holds UTF-32), so the parse runs on a skeleton of the file instead: every string that is the
// value of a "hex" key, long, and made of hex digits only is replaced by a short placeholder naming its
// byte range in the file text, which the decoder reads directly. A hex-digit string is its own canonical
// JSON encoding and a valid string token, so the skeleton is valid JSON, canonical, and the same value
// everywhere else exactly when the file is; a placeholder found anywhere but at payload.<array>.hex (or
// text that already spells one) sends the file through the plain parse instead.
constexpr std::size_t kSkeletonMinimum = 4096;                // shorter strings are parsed as they are
constexpr std::string_view kPlaceholderText = "\\u0000hex:";  // as spelled in JSON text
constexpr std::u32string_view kPlaceholder{U"\0hex:", 5};     // as parsed

struct Skeleton {
  std::string text;                     // the file with placeholders
  std::vector<std::string_view> spans;  // placeholder k's digits, viewing the file text
};

bool is_hex_digit(char c) { return hex_value(static_cast<unsigned char>(c)) >= 0; }

// nullopt when nothing is worth replacing or the text already spells a placeholder.
std::optional<Skeleton> skeleton_of(std::string_view text) {
  if (text.find(kPlaceholderText) != std::string_view::npos) return std::nullopt;
  Skeleton out;
  std::size_t copied = 0;        // text[0, copied) is in out.text
  bool after_hex_key = false;    // the previous string token was "hex"
  std::size_t previous_end = 0;  // where the previous string token ended
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] != '"') {
      ++i;
      continue;
    }
    const std::size_t end = skip_string(text, i);
    if (end > text.size() || end - i < 2 || text[end - 1] != '"') break;  // unterminated: the parse refuses
    const std::string_view content = text.substr(i + 1, end - i - 2);
    bool is_value_of_hex = false;
    if (after_hex_key) {
      std::size_t j = skip_space(text, previous_end);
      is_value_of_hex = j < text.size() && text[j] == ':' && skip_space(text, j + 1) == i;
    }
    if (is_value_of_hex && content.size() >= kSkeletonMinimum &&
        std::all_of(content.begin(), content.end(), is_hex_digit)) {
      out.text.append(text.substr(copied, i + 1 - copied));
      out.text.append(kPlaceholderText);
      out.text.append(std::to_string(out.spans.size()));
      out.text.push_back('"');
      copied = end;
      out.spans.push_back(content);
    }
    after_hex_key = content == "hex";
    previous_end = end;
    i = end;
  }
  if (out.spans.empty()) return std::nullopt;
  out.text.append(text.substr(copied));
  return out;
}

// The span a placeholder string names, or nullptr when `value` is not one.
const std::string_view* placeholder_span(const Value& value, const std::vector<std::string_view>& spans) {
  if (!value.is_string()) return nullptr;
  const std::u32string& text = value.as_string();
  if (text.size() <= kPlaceholder.size() || text.compare(0, kPlaceholder.size(), kPlaceholder) != 0)
    return nullptr;
  std::size_t index = 0;
  for (std::size_t i = kPlaceholder.size(); i < text.size(); ++i) {
    if (text[i] < U'0' || text[i] > U'9' || index > spans.size()) return nullptr;
    index = index * 10 + static_cast<std::size_t>(text[i] - U'0');
  }
  return index < spans.size() ? &spans[index] : nullptr;
}

// True when every placeholder sits at payload.<array>.hex, each array's at most once.
bool placeholders_in_place(const Value& envelope, const std::vector<std::string_view>& spans) {
  const Value* payload = envelope.is_object() ? envelope.find("payload") : nullptr;
  std::size_t found = 0;
  for (const ArraySpec& spec : kArrays) {
    const Value* descriptor = payload && payload->is_object() ? payload->find(spec.name) : nullptr;
    const Value* hex = descriptor && descriptor->is_object() ? descriptor->find("hex") : nullptr;
    if (hex != nullptr && placeholder_span(*hex, spans) != nullptr) ++found;
  }
  return found == spans.size();
}

// One `{"dtype", "hex", "shape"}` array of the legacy payload, decoded as _read_legacy_checkpoint does
// (a placeholder's digits are read from the file text).
std::vector<unsigned char> decode_legacy_array(const Value& payload, const ArraySpec& spec,
                                               const std::vector<std::string_view>& spans) {
  const std::string name(spec.name);
  const Value* descriptor = payload.is_object() ? payload.find(spec.name) : nullptr;
  if (descriptor == nullptr || !descriptor->is_object()) {
    refuse(kStack + "checkpoint payload has no tensor descriptor for " + name);
  }
  const Value* dtype = descriptor->find("dtype");
  if (dtype == nullptr || !dtype->is_string_equal(spec.dtype))
    refuse(kStack + "checkpoint tensor dtype mismatch");
  const Value* hex = descriptor->find("hex");
  std::vector<unsigned char> bytes;
  const std::string_view* span = hex == nullptr ? nullptr : placeholder_span(*hex, spans);
  const bool decoded = span != nullptr
                           ? python_fromhex(*span, bytes)
                           : hex != nullptr && hex->is_string() && python_fromhex(hex->as_string(), bytes);
  if (!decoded) {
    refuse(kStack + "checkpoint tensor " + name + " is not hexadecimal");
  }
  const Value* shape_value = descriptor->find("shape");
  std::vector<std::int64_t> shape;
  __int128 elements = 1;
  bool shape_ok = shape_value != nullptr && shape_value->is_array();
  for (std::size_t k = 0; shape_ok && k < shape_value->as_array().size(); ++k) {
    const Value& dim = shape_value->as_array()[k];
    std::optional<std::int64_t> d = dim.is_integer() ? dim.as_int64() : std::nullopt;
    shape_ok = d.has_value() && *d >= 0;
    if (shape_ok) {
      shape.push_back(*d);
      elements = std::min<__int128>(elements * *d, __int128{1} << 80);  // bounded, never wraps
    }
  }
  if (!shape_ok) refuse("samebits: checkpoint tensor " + name + " has a shape that is not a list of sizes");
  const __int128 need = elements * 4;
  if (static_cast<__int128>(bytes.size()) != need) {
    const std::string need_text = need < (__int128{1} << 62) ? std::to_string(static_cast<std::int64_t>(need))
                                                             : std::string("too many");
    refuse("samebits: " + std::to_string(bytes.size()) + " bytes do not fill shape " + shape_repr(shape) +
           " of " + std::string(spec.dtype) + " (" + need_text + " bytes)");
  }
  return bytes;
}

// The legacy container checks (3.11); returns the parsed envelope and fills the file's flat parameter
// array. The text is released once its integrity is proven (the parse holds what is still needed).
Value read_legacy(const std::string& path, std::vector<float>& flat, SambaCheckpointInfo& info) {
  std::string text;
  {
    File file = open_checkpoint(path);
    // Read at most one byte past the limit; grow by chunks so a small file costs a small buffer.
    const std::uint64_t cap = kSambaLegacyLimit + 1;
    const std::uint64_t claimed = size_of(file.get(), path);
    // 1. size, refused from the file's own size before a byte is buffered (checked again below for a
    //    file that grows while it is read, or one whose size fstat cannot tell).
    if (claimed > kSambaLegacyLimit) refuse(kStack + "checkpoint exceeds the size limit");
    // One byte past the size fstat gave, so the usual file is read without growing the buffer (growing a
    // string past its capacity doubles it: twice the file for a moment).
    std::uint64_t hint = std::min<std::uint64_t>(claimed + 1, cap);
    text.resize(static_cast<std::size_t>(hint));
    std::size_t total = read_up_to(file.get(), text.data(), text.size(), path);
    while (total == text.size() && total < cap) {
      text.resize(static_cast<std::size_t>(std::min<std::uint64_t>(total + kSambaStreamChunk, cap)));
      std::size_t got = read_up_to(file.get(), text.data() + total, text.size() - total, path);
      total += got;
      if (got == 0) break;
    }
    text.resize(total);
  }
  // 1. size
  if (text.size() > kSambaLegacyLimit) refuse(kStack + "checkpoint exceeds the size limit");
  // 2. JSON, strict (Open point 8.4): the skeleton when it stands for the file exactly, else the file
  Value envelope;
  std::optional<Skeleton> skeleton = skeleton_of(text);
  try {
    envelope = json::parse(skeleton ? std::string_view(skeleton->text) : std::string_view(text));
    if (skeleton && !placeholders_in_place(envelope, skeleton->spans)) {
      skeleton.reset();
      envelope = json::parse(text);
    }
  } catch (const json::ParseError&) {
    refuse(kStack + "checkpoint is not valid JSON");
  }
  const std::vector<std::string_view> no_spans;
  const std::vector<std::string_view>& spans = skeleton ? skeleton->spans : no_spans;
  // 3. envelope
  if (!envelope.has_exactly_keys({"schema", "payload", "payload_sha256"}) ||
      !envelope.find("schema")->is_string_equal(kSambaLegacySchema)) {
    refuse(kStack + "checkpoint schema mismatch");
  }
  // 4. integrity: the raw payload bytes must be their own canonical encoding and hash to the stored digest
  //    (Open point 8.5), which is upstream's hash of the canonical re-encoding on every file it accepts.
  const Value& payload = *envelope.find("payload");
  //    The canonical comparison runs on the skeleton (equivalent, see skeleton_of), the digest on the file.
  std::string_view raw = payload_text(text);
  std::string stored_digest;
  const std::uint64_t file_bytes = text.size();
  {
    std::string canonical = json::canonical_json(payload);
    const std::string digest = sha256_hex(raw);
    const std::string_view spelled = skeleton ? payload_text(skeleton->text) : raw;
    if (spelled != canonical || !envelope.find("payload_sha256")->is_string_equal(digest)) {
      refuse(kStack + "checkpoint integrity mismatch");
    }
    stored_digest = digest;
  }
  if (skeleton) std::string().swap(skeleton->text);  // the spans still view `text`
  // 5. the four arrays, in order
  info.format = SambaCheckpointFormat::LegacyJson;
  info.schema = std::string(kSambaLegacySchema);
  info.file_bytes = file_bytes;
  info.integrity_sha256 = stored_digest;
  for (const ArraySpec& spec : kArrays) {
    std::vector<unsigned char> bytes = decode_legacy_array(payload, spec, spans);
    info.arrays.push_back({std::string(spec.name), std::string(spec.dtype),
                           static_cast<std::int64_t>(bytes.size() / 4),
                           sha256_hex(bytes.data(), bytes.size())});
    if (spec.name == "parameters") {
      flat.resize(bytes.size() / 4);
      std::memcpy(flat.data(), bytes.data(), bytes.size());
    }
  }
  return envelope;  // the file text goes with this frame; the envelope holds no view of it
}

}  // namespace

SambaCheckpoint read_samba_legacy_checkpoint(const std::string& path) {
  std::vector<float> flat;
  SambaCheckpointInfo info;
  const Value envelope = read_legacy(path, flat, info);
  return finish_flat(*envelope.find("payload"), std::move(flat), std::move(info));
}

SambaCheckpointTensors read_samba_legacy_checkpoint_tensors(const std::string& path) {
  std::vector<float> flat;
  SambaCheckpointInfo info;
  const Value envelope = read_legacy(path, flat, info);
  return finish_split(*envelope.find("payload"), std::move(flat), std::move(info));
}

namespace {

// The first 17 bytes decide the reader: the v2 magic selects the streamed archive, anything else the
// legacy JSON.
bool has_stream_magic(const std::string& path) {
  std::array<char, 17> head{};
  File file = open_checkpoint(path);
  const std::size_t got = read_up_to(file.get(), head.data(), head.size(), path);
  return got == head.size() && std::string_view(head.data(), head.size()) == kSambaStreamMagic;
}

}  // namespace

SambaCheckpoint read_samba_checkpoint(const std::string& path) {
  return has_stream_magic(path) ? read_samba_stream_checkpoint(path) : read_samba_legacy_checkpoint(path);
}

SambaCheckpointTensors read_samba_checkpoint_tensors(const std::string& path) {
  return has_stream_magic(path) ? read_samba_stream_checkpoint_tensors(path)
                                : read_samba_legacy_checkpoint_tensors(path);
}

}  // namespace samebits::io
