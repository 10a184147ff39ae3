// SmallMLPTrainer checkpoint reader: the file checks of MLPInference.from_checkpoint, then the trainer's
// payload decoder and state validator, in upstream's order and with upstream's sentences
// (docs/formats.md §4.3).
#include "io/mlp_checkpoint.hpp"

#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <span>
#include <vector>

#include "io/sha256.hpp"
#include "numerics/fp.hpp"

namespace samebits::io {
namespace {

using json::Value;

constexpr std::int64_t kMaxStep = 2147483647;           // 2^31 - 1
constexpr double kFloat32Max = 3.4028234663852886e+38;  // numpy.finfo(float32).max as a double
constexpr std::size_t kMomentCount = 195;               // 128 + 16 + 48 + 3
constexpr std::size_t kFlagCount = 4;                   // one per tensor

// data_schedule bounds (docs/formats.md §4.4).
constexpr int kScheduleMaxNodes = 128;
constexpr int kScheduleMaxDepth = 8;
constexpr std::size_t kScheduleMaxItems = 128;
constexpr std::size_t kScheduleMaxText = 2048;
constexpr std::size_t kScheduleMaxIntegerBits = 4096;
constexpr std::size_t kScheduleMaxBytes = 2048;

constexpr std::array<std::int64_t, 3> kArchitecture = {8, 16, 3};

struct TensorSpec {
  std::string_view name;
  std::array<std::int64_t, 2> dims;
  std::size_t rank;
  std::size_t cells;
  std::span<const std::int64_t> shape() const { return {dims.data(), rank}; }
};

// Parameter order of the file (`parameter_order`) and of every loop below.
constexpr std::string_view kWeight1 = "weight1", kBias1 = "bias1", kWeight2 = "weight2", kBias2 = "bias2";

[[noreturn]] void refuse(const std::string& message) { throw_value_error(message); }

// ------------------------------------------------------------------------------- payload decoding (7)

bool is_python_space(char32_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int hex_digit(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// bytes.fromhex semantics: ASCII whitespace may separate byte pairs (and so shortens the result,
// which the byte-count check then refuses); anything else that is not a hex digit is an error.
std::vector<std::uint8_t> python_fromhex(const std::u32string& text) {
  std::vector<std::uint8_t> bytes;
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && is_python_space(text[i])) ++i;
    if (i >= text.size()) break;
    int high = hex_digit(text[i++]);
    int low = i < text.size() ? hex_digit(text[i++]) : -1;
    if (high < 0 || low < 0) refuse("SmallMLPTrainer checkpoint tensor is not hexadecimal");
    bytes.push_back(static_cast<std::uint8_t>(high * 16 + low));
  }
  return bytes;
}

bool is_integer_list(const Value& value, std::span<const std::int64_t> expected) {
  if (!value.is_array() || value.as_array().size() != expected.size()) return false;
  const auto* want = expected.data();
  for (const Value& item : value.as_array()) {
    // Strict: Python's == would also take 16.0 for 16; mojolearn always writes integers.
    if (item.as_int64() != *want++) return false;
  }
  return true;
}

// One `{"dtype", "shape", "hex"}` descriptor to its little-endian 32-bit words.
std::vector<std::uint32_t> decode_tensor(const Value& descriptor, const TensorSpec& spec,
                                         std::string_view dtype) {
  const Value* hex = descriptor.find("hex");
  if (!descriptor.has_exactly_keys({"dtype", "shape", "hex"}) ||
      !descriptor.find("dtype")->is_string_equal(dtype) ||
      !is_integer_list(*descriptor.find("shape"), spec.shape()) || !hex->is_string()) {
    refuse("SmallMLPTrainer checkpoint tensor descriptor mismatch");
  }
  if (hex->as_string().size() != spec.cells * 8) refuse("SmallMLPTrainer checkpoint tensor length mismatch");
  std::vector<std::uint8_t> bytes = python_fromhex(hex->as_string());
  if (bytes.size() != spec.cells * 4) refuse("SmallMLPTrainer checkpoint tensor byte count mismatch");
  std::vector<std::uint32_t> words(spec.cells);
  for (std::size_t i = 0; i < spec.cells; ++i) {
    words[i] = std::uint32_t{bytes[4 * i]} | (std::uint32_t{bytes[4 * i + 1]} << 8) |
               (std::uint32_t{bytes[4 * i + 2]} << 16) | (std::uint32_t{bytes[4 * i + 3]} << 24);
  }
  return words;
}

struct DecodedState {
  std::vector<std::uint32_t> weights[4];
  std::vector<std::uint32_t> m, v, flags;
};

constexpr TensorSpec kWeightSpecs[4] = {{kWeight1, {16, 8}, 2, 128},
                                        {kBias1, {16, 0}, 1, 16},
                                        {kWeight2, {3, 16}, 2, 48},
                                        {kBias2, {3, 0}, 1, 3}};
constexpr TensorSpec kMomentSpec = {"m", {195, 0}, 1, kMomentCount};
constexpr TensorSpec kVarianceSpec = {"v", {195, 0}, 1, kMomentCount};
constexpr TensorSpec kFlagsSpec = {"flags", {4, 0}, 1, kFlagCount};

// `_decode_state`: a missing key or a wrong container type anywhere here is "state is incomplete",
// which is what upstream's KeyError/TypeError handler reports.
DecodedState decode_state(const Value& payload) {
  if (!payload.is_object()) refuse("SmallMLPTrainer checkpoint payload must be an object");
  const std::string incomplete = "SmallMLPTrainer checkpoint state is incomplete";
  DecodedState state;
  const Value* weights = payload.find("weights");
  if (weights == nullptr) refuse(incomplete);
  if (!weights->has_exactly_keys({kWeight1, kBias1, kWeight2, kBias2})) {
    refuse("SmallMLPTrainer checkpoint parameter registry mismatch");
  }
  for (int i = 0; i < 4; ++i) {
    state.weights[i] = decode_tensor(*weights->find(kWeightSpecs[i].name), kWeightSpecs[i], "<f4");
  }
  const Value* optimizer = payload.find("optimizer");
  if (optimizer == nullptr || !optimizer->is_object()) refuse(incomplete);
  auto moment = [&](std::string_view key, const TensorSpec& spec, std::string_view dtype) {
    const Value* descriptor = optimizer->find(key);
    if (descriptor == nullptr) refuse(incomplete);
    return decode_tensor(*descriptor, spec, dtype);
  };
  state.m = moment("m", kMomentSpec, "<f4");
  state.v = moment("v", kVarianceSpec, "<f4");
  state.flags = moment("flags", kFlagsSpec, "<i4");
  return state;
}

// ----------------------------------------------------------------------------- state validation (8)

float as_float(std::uint32_t word) { return std::bit_cast<float>(word); }

void require_finite(const std::vector<std::uint32_t>& words, std::string_view name) {
  for (std::uint32_t word : words) {
    if (!fp::is_finite(as_float(word))) refuse("SmallMLPTrainer " + std::string(name) + " must be finite");
  }
}

// `_scalar`: bools refused, any JSON number taken (Python's float() of an int is correctly rounded, as
// from_chars is), then bounded by float32's range and rounded to float32. Strings are refused even
// though Python's float() would parse some of them; mojolearn always writes numbers.
float config_scalar(const Value& value, std::string_view name) {
  const std::string prefix = "SmallMLPTrainer " + std::string(name);
  if (value.is_bool()) refuse(prefix + " must be a finite float32 scalar");
  double number = 0.0;
  if (value.is_float()) {
    number = value.as_float();
  } else if (value.is_integer()) {
    const std::string& decimal = value.integer_decimal();
    auto [end, error] = std::from_chars(decimal.data(), decimal.data() + decimal.size(), number);
    if (error != std::errc()) refuse(prefix + " must be a scalar");  // OverflowError upstream
  } else {
    refuse(prefix + " must be a scalar");
  }
  if (!std::isfinite(number) || std::fabs(number) > kFloat32Max) refuse(prefix + " must be finite float32");
  return static_cast<float>(number);  // one round-to-nearest-even, like struct.pack('<f')
}

MlpAdamWConfig validate_config(const Value* config) {
  if (config == nullptr || !config->has_exactly_keys({"lr", "beta1", "beta2", "eps", "weight_decay"})) {
    refuse("SmallMLPTrainer state optimizer configuration mismatch");
  }
  MlpAdamWConfig result;
  result.lr = config_scalar(*config->find("lr"), "lr");
  result.beta1 = config_scalar(*config->find("beta1"), "beta1");
  result.beta2 = config_scalar(*config->find("beta2"), "beta2");
  result.eps = config_scalar(*config->find("eps"), "eps");
  result.weight_decay = config_scalar(*config->find("weight_decay"), "weight_decay");
  if (!(result.lr > 0.0f) || !(result.eps > 0.0f) || result.weight_decay < 0.0f) {
    refuse("SmallMLPTrainer requires lr > 0, eps > 0 and weight_decay >= 0");
  }
  auto in_unit_interval = [](float beta) { return beta >= 0.0f && beta < 1.0f; };
  if (!in_unit_interval(result.beta1) || !in_unit_interval(result.beta2)) {
    refuse("SmallMLPTrainer betas must remain in [0, 1) in float32");
  }
  return result;
}

// `_schedule`'s walk: every node counts against the budget before its own size is looked at.
void visit_schedule(const Value& item, int depth, int& remaining) {
  --remaining;
  if (depth > kScheduleMaxDepth || remaining < 0) refuse("SmallMLPTrainer data_schedule is too complex");
  if (item.is_object()) {
    const auto& members = item.as_object();
    bool too_large = members.size() > kScheduleMaxItems;
    for (const auto& member : members) too_large = too_large || member.first.size() > kScheduleMaxText;
    if (too_large) refuse("SmallMLPTrainer data_schedule object is too large");
    for (const auto& member : members) visit_schedule(member.second, depth + 1, remaining);
  } else if (item.is_array()) {
    if (item.as_array().size() > kScheduleMaxItems) refuse("SmallMLPTrainer data_schedule list is too large");
    for (const Value& child : item.as_array()) visit_schedule(child, depth + 1, remaining);
  } else if (item.is_string()) {
    if (item.as_string().size() > kScheduleMaxText)
      refuse("SmallMLPTrainer data_schedule string is too large");
  } else if (item.is_integer()) {
    if (json::integer_bit_length(item.integer_decimal()) > kScheduleMaxIntegerBits) {
      refuse("SmallMLPTrainer data_schedule integer is too large");
    }
  }
  // Floats are finite by construction (the parser refuses NaN, Infinity and overflow), so upstream's
  // "must be finite JSON" refusal cannot arise from a file.
}

std::string validate_schedule(const Value& schedule) {
  if (!schedule.is_object() || schedule.as_object().empty()) {
    refuse("SmallMLPTrainer data_schedule must be a nonempty JSON object");
  }
  int remaining = kScheduleMaxNodes;
  visit_schedule(schedule, 0, remaining);
  std::string encoded = json::canonical_json(schedule);
  if (encoded.size() > kScheduleMaxBytes) refuse("SmallMLPTrainer data_schedule exceeds 2048 bytes");
  return encoded;
}

bool is_parameter_order(const Value& value) {
  if (!value.is_array() || value.as_array().size() != 4) return false;
  const auto& items = value.as_array();
  return items[0].is_string_equal(kWeight1) && items[1].is_string_equal(kBias1) &&
         items[2].is_string_equal(kWeight2) && items[3].is_string_equal(kBias2);
}

// `_validate_state` on the decoded payload; fills everything but the file-level fields.
void validate_state(const Value& payload, const DecodedState& state, MlpCheckpoint& out) {
  if (!payload.has_exactly_keys({"schema", "architecture", "numeric_mode", "parameter_order", "weights",
                                 "optimizer", "config", "data_schedule"})) {
    refuse("SmallMLPTrainer state has missing or unknown fields");
  }
  if (!payload.find("schema")->is_string_equal(kMlpStateSchema) ||
      !is_integer_list(*payload.find("architecture"), kArchitecture) ||
      !payload.find("numeric_mode")->is_string_equal(kProcessNumericMode) ||
      !is_parameter_order(*payload.find("parameter_order"))) {
    refuse("SmallMLPTrainer state schema/architecture/mode/order mismatch");
  }
  // The weights object was rebuilt from exactly the four names by the decoder, so upstream's
  // "requires all four named parameters" cannot fire here; each is float32 of the exact shape.
  for (int i = 0; i < 4; ++i) require_finite(state.weights[i], kWeightSpecs[i].name);
  out.config = validate_config(payload.find("config"));

  const Value& optimizer = *payload.find("optimizer");
  if (!optimizer.has_exactly_keys({"kind", "step", "m", "v", "flags"}) ||
      !optimizer.find("kind")->is_string_equal("AdamW")) {
    refuse("SmallMLPTrainer state optimizer mismatch");
  }
  const Value& step = *optimizer.find("step");
  if (!step.is_integer()) refuse("SmallMLPTrainer step must be an integer");  // bools and floats too
  std::optional<std::int64_t> step_value = step.as_int64();
  if (!step_value || *step_value < 0 || *step_value > kMaxStep) {
    refuse("SmallMLPTrainer step is outside its supported range");
  }
  out.optimizer_step = *step_value;
  require_finite(state.m, "m");
  require_finite(state.v, "v");
  bool v_nonnegative = true;
  for (std::uint32_t word : state.v) v_nonnegative = v_nonnegative && !(as_float(word) < 0.0f);
  bool flags_binary = true;
  for (std::uint32_t word : state.flags) flags_binary = flags_binary && (word == 0 || word == 1);
  if (!v_nonnegative || !flags_binary)
    refuse("SmallMLPTrainer state requires nonnegative v and binary flags");
  out.data_schedule_canonical = validate_schedule(*payload.find("data_schedule"));
  out.numeric_mode = std::string(kProcessNumericMode);
}

template <std::size_t N>
void copy_floats(const std::vector<std::uint32_t>& words, std::array<float, N>& target) {
  for (std::size_t i = 0; i < N; ++i) target[i] = as_float(words[i]);
}

}  // namespace

MlpCheckpoint decode_mlp_checkpoint(std::string_view file_bytes) {
  // 1. size bound
  if (file_bytes.size() > kMlpFileLimit) refuse("MLPInference checkpoint exceeds its size bound");
  // 2. strict JSON (duplicate keys, bad UTF-8, NaN literals, excessive nesting all refused)
  Value envelope;
  try {
    envelope = json::parse(file_bytes);
  } catch (const json::ParseError&) {
    refuse("MLPInference checkpoint is not valid bounded JSON");
  }
  // 3. envelope keys: the three written by the trainer, optionally plus arithmetic_profile
  if (!envelope.has_exactly_keys({"schema", "payload", "payload_sha256"}) &&
      !envelope.has_exactly_keys({"schema", "payload", "payload_sha256", "arithmetic_profile"})) {
    refuse("MLPInference checkpoint envelope mismatch");
  }
  // 4. file schema
  if (!envelope.find("schema")->is_string_equal(kMlpFileSchema))
    refuse("MLPInference checkpoint schema mismatch");
  // 5. integrity: SHA-256 of the payload's canonical re-encoding, as upstream hashes it
  const Value& payload = *envelope.find("payload");
  std::string digest = sha256_hex(json::canonical_json(payload));
  if (!envelope.find("payload_sha256")->is_string_equal(digest)) {
    refuse("MLPInference checkpoint integrity mismatch");
  }
  // 6. arithmetic profile, absent meaning the fp32 neural profile
  const Value* profile = envelope.find("arithmetic_profile");
  if (profile != nullptr && !profile->is_string_equal(kNeuralArithmeticProfile)) {
    refuse("MLPInference checkpoint arithmetic profile mismatch");
  }
  // 7. decode the tensors, 8. validate the whole state
  DecodedState state = decode_state(payload);
  MlpCheckpoint checkpoint;
  validate_state(payload, state, checkpoint);
  copy_floats(state.weights[0], checkpoint.weight1);
  copy_floats(state.weights[1], checkpoint.bias1);
  copy_floats(state.weights[2], checkpoint.weight2);
  copy_floats(state.weights[3], checkpoint.bias2);
  checkpoint.arithmetic_profile = std::string(kNeuralArithmeticProfile);
  checkpoint.payload_sha256 = digest;
  checkpoint.file_bytes = file_bytes.size();
  return checkpoint;
}

MlpCheckpoint read_mlp_checkpoint(const std::string& path) {
  struct Closer {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    refuse("MLPInference checkpoint cannot be opened: '" + path + "' (" + std::strerror(errno) + ")");
  }
  // One byte past the limit is enough to tell an oversized file; the rest is never read.
  std::string contents(kMlpFileLimit + 1, '\0');
  std::size_t total = 0;
  while (total < contents.size()) {
    std::size_t got = std::fread(contents.data() + total, 1, contents.size() - total, file.get());
    if (got == 0) break;
    total += got;
  }
  if (std::ferror(file.get())) {
    refuse("MLPInference checkpoint cannot be read: '" + path + "' (" + std::strerror(errno) + ")");
  }
  contents.resize(total);
  return decode_mlp_checkpoint(contents);
}

}  // namespace samebits::io
