// MLP checkpoint reader: a file written here from docs/formats.md §4 loads exactly; every refusal class
// gets mojolearn's message, in the documented check order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <samebits/errors.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/mlp_checkpoint.hpp"
#include "io/sha256.hpp"

using samebits::io::decode_mlp_checkpoint;
using samebits::io::MlpCheckpoint;
using samebits::io::read_mlp_checkpoint;

namespace {

// ------------------------------------------------------------------- a writer from the format rules

using Fields =
    std::map<std::string, std::string>;  // key -> raw JSON text; std::map sorts ASCII keys by code point

std::string object_text(const Fields& fields) {
  std::string text = "{";
  for (const auto& [key, raw] : fields) {
    if (text.size() > 1) text.push_back(',');
    text.append("\"").append(key).append("\":").append(raw);
  }
  return text + "}";
}

std::string json_string(const std::string& text) { return "\"" + text + "\""; }

std::string hex_of_words(const std::vector<std::uint32_t>& words) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (std::uint32_t word : words) {
    for (int byte = 0; byte < 4; ++byte) {  // little-endian byte order
      unsigned value = (word >> (8 * byte)) & 0xFF;
      hex.push_back(kDigits[value >> 4]);
      hex.push_back(kDigits[value & 15]);
    }
  }
  return hex;
}

std::string descriptor(const std::string& dtype, const std::string& shape,
                       const std::vector<std::uint32_t>& words) {
  return object_text(
      {{"dtype", json_string(dtype)}, {"hex", json_string(hex_of_words(words))}, {"shape", shape}});
}

// docs/goldens.md §5 recipe: (arange(size) % 7 - 3) / 32, exact in float32.
std::vector<float> recipe_values(std::size_t size) {
  std::vector<float> values(size);
  for (std::size_t i = 0; i < size; ++i) values[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 32.0f;
  return values;
}

std::vector<std::uint32_t> words_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> words;
  for (float value : values) words.push_back(std::bit_cast<std::uint32_t>(value));
  return words;
}

struct WeightSet {
  std::vector<float> weight1 = recipe_values(128), bias1 = recipe_values(16), weight2 = recipe_values(48),
                     bias2 = recipe_values(3);
};

// The same defaults as tests/python/mlp_checkpoint_writer.py, so both writers produce the same bytes.
struct CheckpointText {
  WeightSet weights;
  std::vector<std::uint32_t> m, v, flags{1, 1, 1, 1};
  Fields weight_fields;  // filled from `weights` unless a test overrides an entry
  Fields optimizer{{"kind", json_string("AdamW")}, {"step", "5"}};
  Fields config{{"beta1", "0.8999999761581421"},
                {"beta2", "0.9990000128746033"},
                {"eps", "9.99999993922529e-09"},
                {"lr", "0.0010000000474974513"},
                {"weight_decay", "0.009999999776482582"}};
  Fields payload{{"architecture", "[8,16,3]"},
                 {"data_schedule",
                  "{\"batch_size\":32,\"dataset\":\"synthetic-blobs-v1\",\"order\":[0,1,2],\"seed\":"
                  "18446744073709551615}"},
                 {"numeric_mode", json_string("identical")},
                 {"parameter_order", "[\"weight1\",\"bias1\",\"weight2\",\"bias2\"]"},
                 {"schema", json_string("mojolearn.small-mlp-trainer.v1")}};
  std::set<std::string> omit_payload, omit_optimizer, omit_weights;
  std::optional<std::string> arithmetic_profile;  // raw JSON of the optional envelope key
  std::optional<std::string> payload_override;    // raw JSON replacing the whole payload
  std::optional<std::string> hash_override;       // raw JSON replacing payload_sha256
  Fields envelope_extra;
  std::set<std::string> omit_envelope;

  CheckpointText() {
    for (int i = 0; i < 195; ++i) {
      m.push_back(std::bit_cast<std::uint32_t>(static_cast<float>(i % 5 - 2) / 64.0f));
      v.push_back(std::bit_cast<std::uint32_t>(static_cast<float>(i % 3) / 128.0f));
    }
  }

  std::string payload_text() const {
    if (payload_override) return *payload_override;
    Fields weight_map{{"weight1", descriptor("<f4", "[16,8]", words_of(weights.weight1))},
                      {"bias1", descriptor("<f4", "[16]", words_of(weights.bias1))},
                      {"weight2", descriptor("<f4", "[3,16]", words_of(weights.weight2))},
                      {"bias2", descriptor("<f4", "[3]", words_of(weights.bias2))}};
    for (const auto& [key, raw] : weight_fields) weight_map[key] = raw;
    for (const auto& key : omit_weights) weight_map.erase(key);
    Fields optimizer_map{{"m", descriptor("<f4", "[195]", m)},
                         {"v", descriptor("<f4", "[195]", v)},
                         {"flags", descriptor("<i4", "[4]", flags)}};
    for (const auto& [key, raw] : optimizer) optimizer_map[key] = raw;
    for (const auto& key : omit_optimizer) optimizer_map.erase(key);
    Fields payload_map{{"weights", object_text(weight_map)},
                       {"optimizer", object_text(optimizer_map)},
                       {"config", object_text(config)}};
    for (const auto& [key, raw] : payload) payload_map[key] = raw;
    for (const auto& key : omit_payload) payload_map.erase(key);
    return object_text(payload_map);
  }

  std::string file() const {
    std::string payload_json = payload_text();
    Fields envelope{{"payload", payload_json},
                    {"payload_sha256",
                     hash_override ? *hash_override : json_string(samebits::io::sha256_hex(payload_json))},
                    {"schema", json_string("mojolearn.small-mlp-checkpoint.v1")}};
    if (arithmetic_profile) envelope["arithmetic_profile"] = *arithmetic_profile;
    for (const auto& [key, raw] : envelope_extra) envelope[key] = raw;
    for (const auto& key : omit_envelope) envelope.erase(key);
    return object_text(envelope) + "\n";
  }
};

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The message of the refusal, or "" when the file loads.
std::string refusal_of(const std::string& file_bytes) {
  try {
    decode_mlp_checkpoint(file_bytes);
    return "";
  } catch (const samebits::Error& error) {
    EXPECT_EQ(error.kind(), samebits::ErrorKind::Value);
    return error.what();
  }
}

std::string repeat(const std::string& text, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += text;
  return out;
}

// A per-process scratch directory, removed when the test program exits.
const std::filesystem::path& scratch_directory() {
  struct Directory {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("samebits_test_mlp_checkpoint_" + std::to_string(::getpid()));
    Directory() { std::filesystem::create_directories(path); }
    ~Directory() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Directory directory;
  return directory.path;
}

std::filesystem::path scratch_path(const std::string& name) { return scratch_directory() / name; }

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream stream(path, std::ios::binary);
  stream << bytes;
}

template <std::size_t N>
void expect_bits_equal(const std::array<float, N>& got, const std::vector<float>& want, const char* name) {
  ASSERT_EQ(want.size(), N) << name;
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
        << name << "[" << i << "]";
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------ loading

// The default file is byte-identical to what tests/python/mlp_checkpoint_writer.py writes with json.dumps:
// its length and SHA-256 below were printed by `python3 tests/python/mlp_checkpoint_writer.py`.
TEST(MlpCheckpoint, WriterMatchesPythonJsonDumps) {
  std::string file = CheckpointText().file();
  EXPECT_EQ(file.size(), 5640u);
  EXPECT_EQ(samebits::io::sha256_hex(file),
            "4679ebabf024ceea56f2413382424b2c5efccbe7f6cbbf591d025f57c305ba3c");
}

TEST(MlpCheckpoint, ValidFileLoadsExactly) {
  CheckpointText text;
  std::string file = text.file();
  MlpCheckpoint checkpoint = decode_mlp_checkpoint(file);
  expect_bits_equal(checkpoint.weight1, text.weights.weight1, "weight1");
  expect_bits_equal(checkpoint.bias1, text.weights.bias1, "bias1");
  expect_bits_equal(checkpoint.weight2, text.weights.weight2, "weight2");
  expect_bits_equal(checkpoint.bias2, text.weights.bias2, "bias2");
  EXPECT_EQ(checkpoint.optimizer_step, 5);
  EXPECT_EQ(checkpoint.config.lr, 0.001f);
  EXPECT_EQ(checkpoint.config.beta1, 0.9f);
  EXPECT_EQ(checkpoint.config.beta2, 0.999f);
  EXPECT_EQ(checkpoint.config.eps, 1e-8f);
  EXPECT_EQ(checkpoint.config.weight_decay, 0.01f);
  EXPECT_EQ(checkpoint.data_schedule_canonical, text.payload.at("data_schedule"));
  EXPECT_EQ(checkpoint.numeric_mode, "identical");
  EXPECT_EQ(checkpoint.arithmetic_profile, "mojolearn.neural-training.fp32.v1");
  // Printed by the Python writer's self-check alongside the file digest.
  EXPECT_EQ(checkpoint.payload_sha256, "1d46999540e3f8cddd1f92d9dc06fafbbdffb3429e58ebd1a46625334696dd9a");
  EXPECT_EQ(checkpoint.file_bytes, file.size());
}

TEST(MlpCheckpoint, ReadsFromDisk) {
  CheckpointText text;
  auto path = scratch_path("valid.json");
  write_file(path, text.file());
  MlpCheckpoint checkpoint = read_mlp_checkpoint(path.string());
  expect_bits_equal(checkpoint.weight2, text.weights.weight2, "weight2");
  EXPECT_EQ(checkpoint.file_bytes, text.file().size());
  std::filesystem::remove(path);
}

TEST(MlpCheckpoint, ArbitraryBitPatternsSurvive) {
  CheckpointText text;
  // Subnormals, negative zero and the largest finite float are stored and returned untouched.
  text.weights.bias1[0] = std::bit_cast<float>(0x00000001u);
  text.weights.bias1[1] = std::bit_cast<float>(0x80000000u);
  text.weights.weight1[127] = std::bit_cast<float>(0x7F7FFFFFu);
  text.weights.weight2[5] = std::bit_cast<float>(0x807FFFFFu);
  for (std::size_t i = 0; i < text.weights.weight1.size(); ++i) {
    text.weights.weight1[i] = std::bit_cast<float>(static_cast<std::uint32_t>(0x3A000000u + 7919u * i));
  }
  MlpCheckpoint checkpoint = decode_mlp_checkpoint(text.file());
  expect_bits_equal(checkpoint.weight1, text.weights.weight1, "weight1");
  expect_bits_equal(checkpoint.bias1, text.weights.bias1, "bias1");
  expect_bits_equal(checkpoint.weight2, text.weights.weight2, "weight2");
}

TEST(MlpCheckpoint, AcceptedVariants) {
  std::vector<std::pair<std::string, std::function<void(CheckpointText&)>>> variants = {
      {"arithmetic_profile_present",
       [](CheckpointText& t) { t.arithmetic_profile = json_string("mojolearn.neural-training.fp32.v1"); }},
      {"step_zero_flags_zero",
       [](CheckpointText& t) {
         t.optimizer["step"] = "0";
         t.flags = {0, 0, 0, 0};
       }},
      {"step_max", [](CheckpointText& t) { t.optimizer["step"] = "2147483647"; }},
      {"integer_config_values",
       [](CheckpointText& t) {
         t.config["weight_decay"] = "0";
         t.config["beta1"] = "0";
       }},
      {"negative_zero_decay_and_v",
       [](CheckpointText& t) {
         t.config["weight_decay"] = "-0.0";
         t.v[3] = 0x80000000u;
       }},
      {"schedule_depth_eight",
       [](CheckpointText& t) { t.payload["data_schedule"] = repeat("{\"k\":", 8) + "0" + repeat("}", 8); }},
      {"schedule_128_nodes",
       [](CheckpointText& t) {
         std::string items = "0";
         for (int i = 1; i < 126; ++i) items += ",0";
         t.payload["data_schedule"] =
             "{\"a\":[" + items + "]}";  // root + list + 126 zeros = 128 nodes, the bound
       }},
      {"uppercase_tensor_hex",
       [](CheckpointText& t) {
         // bytes.fromhex accepts upper case; the hash is over the file's own text, so it still matches.
         t.weight_fields["bias2"] = "{\"dtype\":\"<f4\",\"hex\":\"0000C0BD000080BD000000BD\",\"shape\":[3]}";
       }},
  };
  for (auto& [name, mutate] : variants) {
    CheckpointText text;
    mutate(text);
    EXPECT_EQ(refusal_of(text.file()), "") << name;
  }
}

TEST(MlpCheckpoint, NonCanonicalLayoutWithCanonicalHashLoads) {
  // Upstream hashes the canonical re-encoding of the parsed payload, so whitespace and key order in the
  // file do not matter as long as the stored digest is of the canonical form.
  CheckpointText text;
  std::string canonical_payload = text.payload_text();
  std::string spaced =
      replace_once(canonical_payload, "\"architecture\":[8,16,3]", "\"architecture\" : [ 8 , 16 , 3 ]");
  text.payload_override = spaced;
  text.hash_override = json_string(samebits::io::sha256_hex(canonical_payload));
  std::string file = replace_once(text.file(), "{\"payload\":", " {\n  \"payload\" :\t");
  EXPECT_EQ(refusal_of(file), "");
  // Padding with whitespace up to the size bound still loads.
  EXPECT_EQ(refusal_of(file + std::string(samebits::io::kMlpFileLimit - file.size(), ' ')), "");
}

// ------------------------------------------------------------------------------------------ refusals

namespace {

const std::string kMlp = "MLPInference checkpoint ";
const std::string kTrainer = "SmallMLPTrainer ";

struct Refusal {
  std::string name;
  std::function<std::string()> file;
  std::string message;
};

std::function<std::string()> edited(std::function<void(CheckpointText&)> mutate) {
  return [mutate] {
    CheckpointText text;
    mutate(text);
    return text.file();
  };
}

// The checkpoint with bias2's tensor descriptor (3 floats) replaced by the JSON text `descriptor_json`.
std::function<std::string()> bias2_descriptor(std::string descriptor_json) {
  return edited([descriptor_json](CheckpointText& t) { t.weight_fields["bias2"] = descriptor_json; });
}

std::function<std::string()> raw_edit(std::string from, std::string to) {
  return [from, to] { return replace_once(CheckpointText().file(), from, to); };
}

std::vector<Refusal> refusal_table() {
  const std::string good = CheckpointText().file();
  return {
      // 1. size
      {"oversize", [good] { return good + std::string(samebits::io::kMlpFileLimit + 1 - good.size(), ' '); },
       kMlp + "exceeds its size bound"},
      {"oversize_braces", [] { return std::string(40000, '{'); }, kMlp + "exceeds its size bound"},
      // 2. JSON
      {"empty", [] { return std::string(); }, kMlp + "is not valid bounded JSON"},
      {"not_json", [] { return std::string("checkpoint\n"); }, kMlp + "is not valid bounded JSON"},
      {"truncated", [good] { return good.substr(0, good.size() / 2); }, kMlp + "is not valid bounded JSON"},
      {"trailing_garbage", [good] { return good + "x"; }, kMlp + "is not valid bounded JSON"},
      {"duplicate_envelope_key", [good] { return "{\"schema\":\"x\"," + good.substr(1); },
       kMlp + "is not valid bounded JSON"},
      {"duplicate_nested_key", raw_edit("\"batch_size\":32,", "\"batch_size\":32,\"batch_size\":32,"),
       kMlp + "is not valid bounded JSON"},
      {"byte_order_mark", [good] { return "\xEF\xBB\xBF" + good; }, kMlp + "is not valid bounded JSON"},
      {"invalid_utf8",
       raw_edit("synthetic-blobs-v1",
                "synthetic-blobs-\xFF"
                "1"),
       kMlp + "is not valid bounded JSON"},
      {"encoded_surrogate", raw_edit("synthetic-blobs-v1", "synthetic-blobs-\xED\xA0\x80"),
       kMlp + "is not valid bounded JSON"},
      {"nan_literal", raw_edit("\"lr\":0.0010000000474974513", "\"lr\":NaN"),
       kMlp + "is not valid bounded JSON"},
      {"infinity_literal", raw_edit("\"step\":5", "\"step\":-Infinity"), kMlp + "is not valid bounded JSON"},
      {"float_overflow", raw_edit("\"lr\":0.0010000000474974513", "\"lr\":1e999"),
       kMlp + "is not valid bounded JSON"},
      {"control_character", raw_edit("synthetic-blobs-v1", "synthetic\nblobs"),
       kMlp + "is not valid bounded JSON"},
      {"nesting_too_deep",
       [] {
         return "{\"payload\":" + repeat("[", 2000) + repeat("]", 2000) +
                ",\"payload_sha256\":\"0\",\"schema\":\"x\"}";
       },
       kMlp + "is not valid bounded JSON"},
      {"integer_too_long", raw_edit("\"seed\":18446744073709551615", "\"seed\":" + std::string(4301, '9')),
       kMlp + "is not valid bounded JSON"},
      // 3. envelope
      {"envelope_array", [] { return std::string("[1,2]\n"); }, kMlp + "envelope mismatch"},
      {"envelope_extra_key", edited([](CheckpointText& t) { t.envelope_extra["note"] = "1"; }),
       kMlp + "envelope mismatch"},
      {"envelope_missing_hash", edited([](CheckpointText& t) { t.omit_envelope.insert("payload_sha256"); }),
       kMlp + "envelope mismatch"},
      {"envelope_missing_payload", edited([](CheckpointText& t) { t.omit_envelope.insert("payload"); }),
       kMlp + "envelope mismatch"},
      // 4. schema (checked before the hash: a wrong hash as well does not change the message)
      {"wrong_schema", edited([](CheckpointText& t) {
         t.envelope_extra["schema"] = json_string("mojolearn.small-mlp-checkpoint.v2");
       }),
       kMlp + "schema mismatch"},
      {"schema_and_hash_wrong", edited([](CheckpointText& t) {
         t.envelope_extra["schema"] = "null";
         t.hash_override = json_string("00");
       }),
       kMlp + "schema mismatch"},
      // 5. integrity (checked before the arithmetic profile)
      {"hash_and_profile_wrong", edited([](CheckpointText& t) {
         t.hash_override = json_string(samebits::io::sha256_hex("other"));
         t.arithmetic_profile = json_string("other");
       }),
       kMlp + "integrity mismatch"},
      {"wrong_hash",
       edited([](CheckpointText& t) { t.hash_override = json_string(samebits::io::sha256_hex("other")); }),
       kMlp + "integrity mismatch"},
      {"hash_not_string", edited([](CheckpointText& t) { t.hash_override = "12"; }),
       kMlp + "integrity mismatch"},
      {"uppercase_hash", edited([](CheckpointText& t) {
         std::string hash = samebits::io::sha256_hex(t.payload_text());
         for (char& c : hash) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
         t.hash_override = json_string(hash);
       }),
       kMlp + "integrity mismatch"},
      {"flipped_payload_digit",
       [good] {
         std::string file = good;
         std::size_t at = file.find("\"weight1\":{\"dtype\":\"<f4\",\"hex\":\"") + 40;
         file[at] = file[at] == '0' ? '1' : '0';
         return file;
       },
       kMlp + "integrity mismatch"},
      {"non_canonical_payload_hashed_raw", edited([](CheckpointText& t) {
         // A digest of the payload's own non-canonical text is not accepted: upstream hashes the
         // canonical re-encoding.
         std::string spaced = replace_once(t.payload_text(), "[8,16,3]", "[8, 16, 3]");
         t.payload_override = spaced;
         t.hash_override = json_string(samebits::io::sha256_hex(spaced));
       }),
       kMlp + "integrity mismatch"},
      // 6. arithmetic profile (after the hash; the profile is outside the hashed payload)
      {"profile_mismatch", edited([](CheckpointText& t) {
         t.arithmetic_profile = json_string("mojolearn.neural-training.bf16.v1");
       }),
       "MLPInference checkpoint arithmetic profile mismatch"},
      {"profile_not_string", edited([](CheckpointText& t) { t.arithmetic_profile = "null"; }),
       "MLPInference checkpoint arithmetic profile mismatch"},
      // 7. payload decoding
      {"payload_not_object", edited([](CheckpointText& t) { t.payload_override = "[1,2,3]"; }),
       kTrainer + "checkpoint payload must be an object"},
      {"missing_weights", edited([](CheckpointText& t) { t.omit_payload.insert("weights"); }),
       kTrainer + "checkpoint state is incomplete"},
      {"weights_registry", edited([](CheckpointText& t) { t.omit_weights.insert("bias2"); }),
       kTrainer + "checkpoint parameter registry mismatch"},
      {"weights_extra", edited([](CheckpointText& t) { t.weight_fields["bias3"] = "{}"; }),
       kTrainer + "checkpoint parameter registry mismatch"},
      {"weights_not_object", edited([](CheckpointText& t) { t.payload["weights"] = "\"w\""; }),
       kTrainer + "checkpoint parameter registry mismatch"},
      {"descriptor_not_object", edited([](CheckpointText& t) { t.weight_fields["bias1"] = "[]"; }),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"wrong_shape", edited([](CheckpointText& t) {
         t.weight_fields["weight1"] = descriptor("<f4", "[8,16]", words_of(t.weights.weight1));
       }),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"float_in_shape", edited([](CheckpointText& t) {
         t.weight_fields["bias1"] = descriptor("<f4", "[16.0]", words_of(t.weights.bias1));
       }),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"wrong_dtype", edited([](CheckpointText& t) {
         t.weight_fields["bias2"] = descriptor("<i4", "[3]", words_of(t.weights.bias2));
       }),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"descriptor_extra_key",
       bias2_descriptor(R"({"dtype":"<f4","hex":"000000000000000000000000","order":"C","shape":[3]})"),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"hex_not_string", bias2_descriptor(R"({"dtype":"<f4","hex":12,"shape":[3]})"),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"hex_length", bias2_descriptor(R"({"dtype":"<f4","hex":"00000000000000000000000000","shape":[3]})"),
       kTrainer + "checkpoint tensor length mismatch"},
      {"hex_bad_digit", bias2_descriptor(R"({"dtype":"<f4","hex":"0000000000000000000000g0","shape":[3]})"),
       kTrainer + "checkpoint tensor is not hexadecimal"},
      {"hex_non_ascii",
       bias2_descriptor(R"({"dtype":"<f4","hex":"\u00e9)" + std::string(23, '0') + R"(","shape":[3]})"),
       kTrainer + "checkpoint tensor is not hexadecimal"},
      {"hex_odd_digit_before_space",
       bias2_descriptor(R"({"dtype":"<f4","hex":"0 0000000000000000000000","shape":[3]})"),
       kTrainer + "checkpoint tensor is not hexadecimal"},
      {"hex_with_spaces",
       bias2_descriptor(R"({"dtype":"<f4","hex":"00 0000 00000000000000\t ","shape":[3]})"),
       kTrainer + "checkpoint tensor byte count mismatch"},
      {"missing_optimizer", edited([](CheckpointText& t) { t.omit_payload.insert("optimizer"); }),
       kTrainer + "checkpoint state is incomplete"},
      {"optimizer_not_object", edited([](CheckpointText& t) { t.payload["optimizer"] = "[]"; }),
       kTrainer + "checkpoint state is incomplete"},
      {"missing_v", edited([](CheckpointText& t) { t.omit_optimizer.insert("v"); }),
       kTrainer + "checkpoint state is incomplete"},
      {"bad_m_before_missing_v", edited([](CheckpointText& t) {
         t.omit_optimizer.insert("v");
         t.optimizer["m"] = "{}";
       }),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"flags_dtype",
       edited([](CheckpointText& t) { t.optimizer["flags"] = descriptor("<f4", "[4]", t.flags); }),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      {"flags_shape",
       edited([](CheckpointText& t) { t.optimizer["flags"] = descriptor("<i4", "[2,2]", t.flags); }),
       kTrainer + "checkpoint tensor descriptor mismatch"},
      // 8. state validation
      {"unknown_payload_key", edited([](CheckpointText& t) { t.payload["comment"] = "1"; }),
       kTrainer + "state has missing or unknown fields"},
      {"missing_config", edited([](CheckpointText& t) { t.omit_payload.insert("config"); }),
       kTrainer + "state has missing or unknown fields"},
      {"missing_data_schedule", edited([](CheckpointText& t) { t.omit_payload.insert("data_schedule"); }),
       kTrainer + "state has missing or unknown fields"},
      {"wrong_state_schema",
       edited([](CheckpointText& t) { t.payload["schema"] = json_string("mojolearn.small-mlp-trainer.v0"); }),
       kTrainer + "state schema/architecture/mode/order mismatch"},
      {"wrong_architecture", edited([](CheckpointText& t) { t.payload["architecture"] = "[8,16,4]"; }),
       kTrainer + "state schema/architecture/mode/order mismatch"},
      {"float_architecture", edited([](CheckpointText& t) { t.payload["architecture"] = "[8.0,16,3]"; }),
       kTrainer + "state schema/architecture/mode/order mismatch"},
      {"fast_mode", edited([](CheckpointText& t) { t.payload["numeric_mode"] = json_string("fast"); }),
       kTrainer + "state schema/architecture/mode/order mismatch"},
      {"wrong_order", edited([](CheckpointText& t) {
         t.payload["parameter_order"] = "[\"weight1\",\"weight2\",\"bias1\",\"bias2\"]";
       }),
       kTrainer + "state schema/architecture/mode/order mismatch"},
      {"nan_weight",
       edited([](CheckpointText& t) { t.weights.bias1[3] = std::bit_cast<float>(0x7FC00000u); }),
       kTrainer + "bias1 must be finite"},
      {"inf_weight",
       edited([](CheckpointText& t) { t.weights.weight2[47] = std::bit_cast<float>(0xFF800000u); }),
       kTrainer + "weight2 must be finite"},
      {"first_nonfinite_named", edited([](CheckpointText& t) {
         t.weights.bias2[0] = std::bit_cast<float>(0x7F800000u);
         t.weights.weight1[0] = std::bit_cast<float>(0x7F800001u);
       }),
       kTrainer + "weight1 must be finite"},
      {"config_extra", edited([](CheckpointText& t) { t.config["momentum"] = "0.5"; }),
       kTrainer + "state optimizer configuration mismatch"},
      {"config_not_object", edited([](CheckpointText& t) { t.payload["config"] = "[]"; }),
       kTrainer + "state optimizer configuration mismatch"},
      {"config_bool", edited([](CheckpointText& t) { t.config["lr"] = "true"; }),
       kTrainer + "lr must be a finite float32 scalar"},
      {"config_text", edited([](CheckpointText& t) { t.config["beta2"] = json_string("fast"); }),
       kTrainer + "beta2 must be a scalar"},
      {"config_numeric_text", edited([](CheckpointText& t) { t.config["eps"] = json_string("1e-8"); }),
       kTrainer + "eps must be a scalar"},
      {"config_null", edited([](CheckpointText& t) { t.config["weight_decay"] = "null"; }),
       kTrainer + "weight_decay must be a scalar"},
      {"config_huge_integer", edited([](CheckpointText& t) { t.config["lr"] = "1" + std::string(400, '0'); }),
       kTrainer + "lr must be a scalar"},
      {"config_beyond_float32", edited([](CheckpointText& t) { t.config["eps"] = "1e+39"; }),
       kTrainer + "eps must be finite float32"},
      {"config_scalars_in_order", edited([](CheckpointText& t) {
         t.config["eps"] = "1e+39";
         t.config["beta1"] = "false";
       }),
       kTrainer + "beta1 must be a finite float32 scalar"},
      {"zero_lr", edited([](CheckpointText& t) { t.config["lr"] = "0.0"; }),
       kTrainer + "requires lr > 0, eps > 0 and weight_decay >= 0"},
      {"lr_underflows_float32", edited([](CheckpointText& t) { t.config["lr"] = "1e-50"; }),
       kTrainer + "requires lr > 0, eps > 0 and weight_decay >= 0"},
      {"negative_decay", edited([](CheckpointText& t) { t.config["weight_decay"] = "-0.01"; }),
       kTrainer + "requires lr > 0, eps > 0 and weight_decay >= 0"},
      {"beta_one", edited([](CheckpointText& t) { t.config["beta1"] = "1.0"; }),
       kTrainer + "betas must remain in [0, 1) in float32"},
      {"beta_rounds_to_one", edited([](CheckpointText& t) { t.config["beta2"] = "0.99999999"; }),
       kTrainer + "betas must remain in [0, 1) in float32"},
      {"beta_negative", edited([](CheckpointText& t) { t.config["beta2"] = "-0.5"; }),
       kTrainer + "betas must remain in [0, 1) in float32"},
      {"optimizer_kind", edited([](CheckpointText& t) { t.optimizer["kind"] = json_string("adamw"); }),
       kTrainer + "state optimizer mismatch"},
      {"optimizer_extra", edited([](CheckpointText& t) { t.optimizer["lr"] = "0.5"; }),
       kTrainer + "state optimizer mismatch"},
      {"optimizer_no_step", edited([](CheckpointText& t) { t.optimizer.erase("step"); }),
       kTrainer + "state optimizer mismatch"},
      {"step_float", edited([](CheckpointText& t) { t.optimizer["step"] = "5.0"; }),
       kTrainer + "step must be an integer"},
      {"step_bool", edited([](CheckpointText& t) { t.optimizer["step"] = "true"; }),
       kTrainer + "step must be an integer"},
      {"step_text", edited([](CheckpointText& t) { t.optimizer["step"] = json_string("5"); }),
       kTrainer + "step must be an integer"},
      {"step_negative", edited([](CheckpointText& t) { t.optimizer["step"] = "-1"; }),
       kTrainer + "step is outside its supported range"},
      {"step_too_large", edited([](CheckpointText& t) { t.optimizer["step"] = "2147483648"; }),
       kTrainer + "step is outside its supported range"},
      {"step_huge", edited([](CheckpointText& t) { t.optimizer["step"] = std::string(40, '9'); }),
       kTrainer + "step is outside its supported range"},
      {"nan_m", edited([](CheckpointText& t) { t.m[100] = 0x7FC00000u; }), kTrainer + "m must be finite"},
      {"inf_v", edited([](CheckpointText& t) { t.v[0] = 0x7F800000u; }), kTrainer + "v must be finite"},
      {"negative_v", edited([](CheckpointText& t) { t.v[7] = std::bit_cast<std::uint32_t>(-1.0f); }),
       kTrainer + "state requires nonnegative v and binary flags"},
      {"flag_two", edited([](CheckpointText& t) { t.flags[2] = 2; }),
       kTrainer + "state requires nonnegative v and binary flags"},
      {"flag_negative", edited([](CheckpointText& t) { t.flags[0] = 0xFFFFFFFFu; }),
       kTrainer + "state requires nonnegative v and binary flags"},
      {"schedule_empty", edited([](CheckpointText& t) { t.payload["data_schedule"] = "{}"; }),
       kTrainer + "data_schedule must be a nonempty JSON object"},
      {"schedule_list", edited([](CheckpointText& t) { t.payload["data_schedule"] = "[1]"; }),
       kTrainer + "data_schedule must be a nonempty JSON object"},
      {"schedule_too_deep", edited([](CheckpointText& t) {
         t.payload["data_schedule"] = repeat("{\"k\":", 9) + "0" + repeat("}", 9);
       }),
       kTrainer + "data_schedule is too complex"},
      {"schedule_deep_list", edited([](CheckpointText& t) {
         t.payload["data_schedule"] = "{\"k\":" + repeat("[", 9) + repeat("]", 9) + "}";
       }),
       kTrainer + "data_schedule is too complex"},
      {"schedule_129_nodes", edited([](CheckpointText& t) {
         std::string items = "0";
         for (int i = 1; i < 127; ++i) items += ",0";
         t.payload["data_schedule"] = "{\"a\":[" + items + "]}";  // root + list + 127 = 129 nodes
       }),
       kTrainer + "data_schedule is too complex"},
      {"schedule_long_list", edited([](CheckpointText& t) {
         std::string items = "0";
         for (int i = 1; i < 129; ++i) items += ",0";
         t.payload["data_schedule"] = "{\"a\":[" + items + "]}";
       }),
       kTrainer + "data_schedule list is too large"},
      {"schedule_many_keys", edited([](CheckpointText& t) {
         Fields keys;
         for (int i = 0; i < 129; ++i) keys.emplace(std::to_string(1000 + i), "0");
         t.payload["data_schedule"] = object_text(keys);
       }),
       kTrainer + "data_schedule object is too large"},
      {"schedule_long_key", edited([](CheckpointText& t) {
         t.payload["data_schedule"] = "{\"" + std::string(2049, 'k') + "\":0}";
       }),
       kTrainer + "data_schedule object is too large"},
      {"schedule_long_string", edited([](CheckpointText& t) {
         t.payload["data_schedule"] = "{\"s\":\"" + std::string(2049, 'x') + "\"}";
       }),
       kTrainer + "data_schedule string is too large"},
      {"schedule_huge_integer", edited([](CheckpointText& t) {
         // 10^1234 > 2^4096 (about 1.04e1233), so its bit length is above 4096.
         t.payload["data_schedule"] = "{\"n\":1" + std::string(1234, '0') + "}";
       }),
       kTrainer + "data_schedule integer is too large"},
      {"schedule_over_2048_bytes", edited([](CheckpointText& t) {
         t.payload["data_schedule"] =
             "{\"a\":\"" + std::string(1100, 'x') + "\",\"b\":\"" + std::string(1100, 'y') + "\"}";
       }),
       kTrainer + "data_schedule exceeds 2048 bytes"},
      {"schedule_escapes_count_in_bytes", edited([](CheckpointText& t) {
         // 400 characters, but each is written as a six-byte \u escape in canonical JSON.
         t.payload["data_schedule"] = "{\"s\":\"" + repeat("\\u00e9", 400) + "\"}";
       }),
       kTrainer + "data_schedule exceeds 2048 bytes"},
  };
}

}  // namespace

TEST(MlpCheckpoint, EveryRefusalClassGivesItsMessage) {
  for (const Refusal& refusal : refusal_table()) {
    EXPECT_EQ(refusal_of(refusal.file()), refusal.message) << refusal.name;
  }
}

TEST(MlpCheckpoint, ScheduleBoundsAreInclusive) {
  // 10^1233 has exactly 4096 bits (1233 log2(10) = 4095.9), the largest size accepted.
  CheckpointText text;
  text.payload["data_schedule"] = "{\"n\":1" + std::string(1233, '0') + "}";
  EXPECT_EQ(refusal_of(text.file()), "");
  text.payload["data_schedule"] = "{\"s\":\"" + std::string(2048, 'x') + "\"}";
  EXPECT_EQ(refusal_of(text.file()),
            "SmallMLPTrainer data_schedule exceeds 2048 bytes");                 // 2048 chars + framing
  text.payload["data_schedule"] = "{\"s\":\"" + std::string(2040, 'x') + "\"}";  // 2048 bytes exactly
  EXPECT_EQ(refusal_of(text.file()), "");
}

TEST(MlpCheckpoint, UnopenableFileIsAValueErrorNamingThePath) {
  const std::string path = scratch_path("does-not-exist.json").string();
  try {
    read_mlp_checkpoint(path);
    FAIL() << "expected a refusal";
  } catch (const samebits::Error& error) {
    EXPECT_EQ(error.kind(), samebits::ErrorKind::Value);
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
    EXPECT_EQ(std::string(error.what()).rfind("MLPInference checkpoint cannot be opened", 0), 0u)
        << error.what();
  }
  // A directory opens on Linux but cannot be read.
  auto directory = scratch_path("a-directory");
  std::filesystem::create_directories(directory);
  EXPECT_THROW(read_mlp_checkpoint(directory.string()), samebits::Error);
  std::filesystem::remove(directory);
}

TEST(MlpCheckpoint, HugeFileRefusedBySizeWithoutReadingItAll) {
  auto path = scratch_path("huge.json");
  write_file(path, std::string(8 << 20, '{'));
  try {
    read_mlp_checkpoint(path.string());
    FAIL() << "expected a refusal";
  } catch (const samebits::Error& error) {
    EXPECT_EQ(std::string(error.what()), "MLPInference checkpoint exceeds its size bound");
  }
  std::filesystem::remove(path);
  // Exactly at the bound: not a size refusal.
  std::string good = CheckpointText().file();
  write_file(path, good + std::string(samebits::io::kMlpFileLimit - good.size(), '\n'));
  EXPECT_EQ(read_mlp_checkpoint(path.string()).file_bytes, samebits::io::kMlpFileLimit);
  std::filesystem::remove(path);
}
