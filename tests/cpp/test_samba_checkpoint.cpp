// Samba checkpoint readers: archives and legacy files written here from docs/formats.md §3 load with exact
// bits; upstream's corruption gate, the header/registry/metadata/descriptor checks and the inference checks
// refuse with their messages, in the documented order. (tests/python/test_samba_checkpoint.py runs the full
// refusal table of the independent Python writer through the same reader.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/samba_checkpoint.hpp"
#include "io/sha256.hpp"
#include "models/samba_config.hpp"
#include "test_samba_support.hpp"
#include "test_support.hpp"

namespace json = samebits::json;
namespace io = samebits::io;
using json::Value;
using samebits::models::SambaConfig;
using samebits::models::SambaConfigArgs;

namespace {

// ----------------------------------------------------------------------- a writer from the format rules

Value object(std::vector<std::pair<std::string, Value>> members) {
  Value::Object out;
  for (auto& [key, value] : members) out.emplace_back(json::from_ascii(key), std::move(value));
  return Value::make_object(std::move(out));
}
Value text(std::string_view ascii) { return Value::make_string_ascii(ascii); }
Value integer(std::int64_t n) { return Value::make_integer(n); }
Value number(double x) { return Value::make_float(x); }
Value integers(const std::vector<std::int64_t>& values) {
  Value::Array items;
  for (auto v : values) items.push_back(integer(v));
  return Value::make_array(std::move(items));
}

SambaConfigArgs example_args() { return samebits::testing::upstream_example_args(); }

// to_dict() written out field by field (not through samba_config_to_json, which is tested against it).
Value config_value(const SambaConfig& c) {
  auto optional = [](std::optional<std::int64_t> v) { return v ? integer(*v) : Value(); };
  Value::Array layers;
  for (const auto& kind : c.layers()) layers.push_back(text(kind));
  return object({{"vocab", integer(c.vocab())},
                 {"d_model", integer(c.d_model())},
                 {"layers", Value::make_array(std::move(layers))},
                 {"n_heads", optional(c.n_heads())},
                 {"n_kv_heads", optional(c.n_kv_heads())},
                 {"head_dim", optional(c.head_dim())},
                 {"intermediate", optional(c.intermediate())},
                 {"tie_embeddings", Value::make_bool(c.tie_embeddings())},
                 {"norm_eps", number(c.norm_eps())},
                 {"dropout", number(c.dropout())}});
}

struct State {
  SambaConfig config;
  std::vector<float> parameters, exp_avg, exp_avg_sq;
  std::vector<std::int32_t> flags;
};

State make_state(const SambaConfigArgs& args, std::uint64_t seed = 7) {
  SambaConfig config(args);
  auto registry = config.registry();
  samebits::testing::Rng rng(seed);
  State state{config, rng.uniform_vector(static_cast<std::size_t>(registry.total), 0.5f), {}, {}, {}};
  state.exp_avg = rng.uniform_vector(state.parameters.size(), 0.01f);
  for (float v : rng.uniform_vector(state.parameters.size(), 0.01f)) state.exp_avg_sq.push_back(v * v);
  state.flags.assign(registry.entries.size(), 1);
  return state;
}

// The state's JSON part (docs/formats.md §3.4), the example's optimizer/schedule/RNG (docs/formats.md §3.8).
Value metadata(const State& state) {
  Value::Array registry;
  for (const auto& entry : state.config.registry().entries) {
    registry.push_back(object({{"name", text(entry.name)},
                               {"offset", integer(entry.offset)},
                               {"shape", integers(entry.shape)},
                               {"size", integer(entry.size)}}));
  }
  return object({{"config", config_value(state.config)},
                 {"numeric_mode", text("identical")},
                 {"optimizer", object({{"accumulation_steps", integer(1)},
                                       {"beta1", number(0.9)},
                                       {"beta2", number(0.999)},
                                       {"eps", number(1e-8)},
                                       {"kind", text("adamw")},
                                       {"lr", number(0.0005000000237487257)},
                                       {"max_norm", number(1.0)},
                                       {"weight_decay", number(0.01)}})},
                 {"profile", text("mojolearn.samba-stack.fp32.v1")},
                 {"registry", Value::make_array(std::move(registry))},
                 {"rng", object({{"counter", integer(11)}, {"seed", integer(7)}})},
                 {"schedule", object({{"kind", text("cosine")},
                                      {"min_lr", number(0.0)},
                                      {"peak_lr", number(0.0010000000474974513)},
                                      {"total_steps", integer(64)},
                                      {"warmup_steps", integer(8)}})},
                 {"schema", text("mojolearn.samba-stack-state.v1")},
                 {"t", integer(3)}});
}

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<std::pair<std::string, std::string>> array_bytes(const State& s) {
  return {{"parameters", bytes_of(s.parameters)},
          {"exp_avg", bytes_of(s.exp_avg)},
          {"exp_avg_sq", bytes_of(s.exp_avg_sq)},
          {"buf_initialized", bytes_of(s.flags)}};
}

std::string stream_header(const State& state) {
  Value::Array descriptors;
  for (const auto& [name, raw] : array_bytes(state)) {
    descriptors.push_back(object({{"dtype", text(name == "buf_initialized" ? "<i4" : "<f4")},
                                  {"name", text(name)},
                                  {"nbytes", integer(static_cast<std::int64_t>(raw.size()))},
                                  {"sha256", text(io::sha256_hex(raw))},
                                  {"shape", integers({static_cast<std::int64_t>(raw.size() / 4)})}}));
  }
  return json::canonical_json(object({{"arrays", Value::make_array(std::move(descriptors))},
                                      {"schema", text("mojolearn.samba-stream.v2")},
                                      {"state", metadata(state)}}));
}

std::string le64(std::uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return out;
}

std::string digest_bytes(const std::string& header) {
  auto digest = samebits::io::sha256(header);
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

// magic, L, header, SHA-256(header), the four arrays (docs/formats.md §3.2).
std::string archive(const State& state, std::optional<std::string> header = std::nullopt,
                    std::optional<std::uint64_t> length = std::nullopt) {
  std::string h = header ? *header : stream_header(state);
  std::string out =
      std::string(io::kSambaStreamMagic) + le64(length ? *length : h.size()) + h + digest_bytes(h);
  for (const auto& [name, raw] : array_bytes(state)) out += raw;
  return out;
}

std::string hex_of(const std::string& raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

// The legacy payload: the state with the four arrays as {"dtype", "hex", "shape"} descriptors.
std::string legacy_payload(const State& state,
                           const std::function<std::string(std::string)>& edit_hex = nullptr) {
  Value::Object members = metadata(state).as_object();
  for (const auto& [name, raw] : array_bytes(state)) {
    std::string hex = hex_of(raw);
    if (edit_hex && name == "parameters") hex = edit_hex(hex);
    members.emplace_back(json::from_ascii(name),
                         object({{"dtype", text(name == "buf_initialized" ? "<i4" : "<f4")},
                                 {"hex", text(hex)},
                                 {"shape", integers({static_cast<std::int64_t>(raw.size() / 4)})}}));
  }
  return json::canonical_json(Value::make_object(std::move(members)));
}

std::string legacy_file(const std::string& payload, std::optional<std::string> digest = std::nullopt) {
  return "{\"payload\":" + payload + ",\"payload_sha256\":\"" + (digest ? *digest : io::sha256_hex(payload)) +
         "\",\"schema\":\"mojolearn.samba-stack-json-checkpoint.v1\"}\n";
}

std::string replace_once(const std::string& data, const std::string& from, const std::string& to) {
  std::size_t at = data.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(data.find(from, at + 1), std::string::npos) << from << " occurs twice";
  std::string out = data;
  return at == std::string::npos ? out : out.replace(at, from.size(), to);
}

// ----------------------------------------------------------------------------------- file plumbing

class SambaCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("samebits_samba_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    auto path = dir_ / name;
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path.string();
  }

  // The refusal message of reading `bytes` with `reader`, or "" when it loads.
  std::string refusal(const std::string& bytes,
                      io::SambaCheckpoint (*reader)(const std::string&) = &io::read_samba_checkpoint) {
    std::string path = write("case.bin", bytes);
    try {
      reader(path);
    } catch (const samebits::Error& error) {
      EXPECT_EQ(error.kind(), samebits::ErrorKind::Value);
      return error.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

void expect_same_weights(const io::SambaCheckpoint& loaded, const State& state) {
  ASSERT_EQ(loaded.parameters.size(), state.parameters.size());
  EXPECT_EQ(std::memcmp(loaded.parameters.data(), state.parameters.data(), state.parameters.size() * 4), 0);
  EXPECT_EQ(loaded.config, state.config);
  EXPECT_EQ(loaded.registry.entries.size(), state.config.registry().entries.size());
}

const std::string kStream = "Samba checkpoint ";

}  // namespace

// ------------------------------------------------------------------------------------------ valid files

TEST(SambaConfigJson, ToJsonIsTheSpecExampleConfig) {
  // docs/formats.md §3.8, the "config" object of the example header, copied from the spec.
  EXPECT_EQ(json::canonical_json(io::samba_config_to_json(SambaConfig(example_args()))),
            "{\"d_model\":32,\"dropout\":0.0,\"head_dim\":16,\"intermediate\":64,\"layers\":[\"mamba3\","
            "\"attention\"],\"n_heads\":2,\"n_kv_heads\":2,\"norm_eps\":9.999999747378752e-06,"
            "\"tie_embeddings\":true,\"vocab\":256}");
  SambaConfigArgs mamba;
  mamba.vocab = 10;
  mamba.d_model = 64;
  mamba.layers = {"mamba3"};
  EXPECT_EQ(json::canonical_json(io::samba_config_to_json(SambaConfig(mamba))),
            "{\"d_model\":64,\"dropout\":0.0,\"head_dim\":null,\"intermediate\":null,\"layers\":[\"mamba3\"],"
            "\"n_heads\":null,\"n_kv_heads\":null,\"norm_eps\":9.999999747378752e-06,\"tie_embeddings\":true,"
            "\"vocab\":10}");
}

TEST(SambaConfigJson, FromJsonRoundTripsAndIsStrict) {
  SambaConfig config(example_args());
  EXPECT_EQ(io::samba_config_from_json(io::samba_config_to_json(config)), config);
  auto refusal = [](const std::string& text) -> std::string {
    try {
      io::samba_config_from_json(json::parse(text));
    } catch (const samebits::Error& error) {
      EXPECT_EQ(error.kind(), samebits::ErrorKind::Value);
      return error.what();
    }
    return "";
  };
  const std::string good =
      "{\"d_model\":32,\"dropout\":0,\"head_dim\":null,\"intermediate\":64,\"layers\":[\"mamba3\","
      "\"attention\"],"
      "\"n_heads\":2,\"n_kv_heads\":null,\"norm_eps\":1e-05,\"tie_embeddings\":true,\"vocab\":256,\"extra\":["
      "1]}";
  EXPECT_EQ(refusal(good), "");  // integer dropout, filled defaults, an extra key ignored
  EXPECT_EQ(io::samba_config_from_json(json::parse(good)), config);
  const std::string c = "samebits.SambaConfig: ";
  // The refusal of `good` with its first `from` replaced by `to`.
  auto edited = [&](const std::string& from, const std::string& to) {
    return refusal(replace_once(good, from, to));
  };
  EXPECT_EQ(refusal("[1]"), c + "from_dict takes a dict with the ten config keys, not list");
  EXPECT_EQ(edited("\"vocab\":256,", ""), c + "from_dict is missing the key 'vocab'");
  EXPECT_EQ(edited("\"vocab\":256", "\"vocab\":256.0"), c + "vocab must be an integer, not float");
  EXPECT_EQ(edited("\"vocab\":256", "\"vocab\":true"), c + "vocab must be an integer, not bool");
  EXPECT_EQ(edited("\"vocab\":256", "\"vocab\":99999999999999999999"),
            c + "vocab = 99999999999999999999 does not fit a 64-bit integer");
  EXPECT_EQ(edited("\"n_heads\":2", "\"n_heads\":\"2\""), c + "n_heads must be an integer or null, not str");
  EXPECT_EQ(edited("[\"mamba3\",\"attention\"]", "\"mamba3\""),
            c + "layers must be a list of layer kinds, not str");
  EXPECT_EQ(edited("[\"mamba3\",\"attention\"]", "[\"mamba3\",3]"),
            c + "layers must be a list of layer kinds, not of int");
  EXPECT_EQ(edited("\"tie_embeddings\":true", "\"tie_embeddings\":1"),
            c + "tie_embeddings must be true or false, not int");
  EXPECT_EQ(edited("\"norm_eps\":1e-05", "\"norm_eps\":\"1e-05\""), c + "norm_eps must be a number, not str");
  EXPECT_EQ(edited("\"dropout\":0", "\"dropout\":1" + std::string(400, '0')),
            c + "dropout is too large to convert to float");
  // After the conversions, the constructor's own rules.
  EXPECT_EQ(edited("\"n_heads\":2", "\"n_heads\":null"),
            c + "an attention layer needs n_heads and intermediate");
}

TEST_F(SambaCheckpointTest, ExampleArchiveLoadsWithExactBits) {
  State state = make_state(example_args());
  std::string bytes = archive(state);
  // docs/formats.md §3.8: the example header is 2,731 bytes and the whole file 417,228 bytes.
  EXPECT_EQ(stream_header(state).size(), 2731u);
  ASSERT_EQ(bytes.size(), 417228u);
  std::string path = write("example.samba", bytes);
  io::SambaCheckpoint loaded = io::read_samba_checkpoint(path);
  expect_same_weights(loaded, state);
  EXPECT_EQ(loaded.info.format, io::SambaCheckpointFormat::StreamV2);
  EXPECT_EQ(loaded.info.schema, "mojolearn.samba-stream.v2");
  EXPECT_EQ(loaded.info.file_bytes, 417228u);
  EXPECT_EQ(loaded.info.header_bytes, 2731u);
  EXPECT_EQ(loaded.info.integrity_sha256, io::sha256_hex(stream_header(state)));
  ASSERT_EQ(loaded.info.arrays.size(), 4u);
  EXPECT_EQ(loaded.info.arrays[3].name, "buf_initialized");
  EXPECT_EQ(loaded.info.arrays[3].elements, 20);
  EXPECT_EQ(loaded.info.arrays[1].sha256, io::sha256_hex(bytes_of(state.exp_avg)));
  EXPECT_EQ(loaded.info.parameter_count, 34530);
  EXPECT_EQ(loaded.info.tensor_count, 20);
  EXPECT_EQ(loaded.info.numeric_mode, "identical");
  EXPECT_EQ(loaded.info.numeric_profile, "fp32_v1");
  EXPECT_EQ(loaded.info.step_json, "3");
  EXPECT_EQ(loaded.info.rng_json, "{\"counter\":11,\"seed\":7}");
  EXPECT_NE(loaded.info.schedule_json.find("\"cosine\""), std::string::npos);
  EXPECT_NE(loaded.info.optimizer_json.find("\"adamw\""), std::string::npos);
  // Named access: the tensor at its registry offset.
  auto down = loaded.weight("layers.1.down_proj.weight");
  ASSERT_EQ(down.size(), 2048u);
  EXPECT_EQ(std::memcmp(down.data(), state.parameters.data() + 32450, 2048 * 4), 0);
  EXPECT_THROW(loaded.weight("layers.2.D"), samebits::Error);
  // The stream reader alone gives the same.
  expect_same_weights(io::read_samba_stream_checkpoint(path), state);
}

TEST_F(SambaCheckpointTest, LegacyFileOfTheSameStateLoadsTheSameBits) {
  State state = make_state(example_args());
  std::string payload = legacy_payload(state);
  std::string path = write("example.json", legacy_file(payload));
  io::SambaCheckpoint loaded = io::read_samba_checkpoint(path);
  expect_same_weights(loaded, state);
  EXPECT_EQ(loaded.info.format, io::SambaCheckpointFormat::LegacyJson);
  EXPECT_EQ(loaded.info.integrity_sha256, io::sha256_hex(payload));
  EXPECT_EQ(loaded.info.header_bytes, 0u);
  EXPECT_EQ(loaded.info.arrays[0].sha256, io::sha256_hex(bytes_of(state.parameters)));
  expect_same_weights(io::read_samba_legacy_checkpoint(path), state);
  // Python's bytes.fromhex takes upper case and whitespace between byte pairs; the payload stays canonical.
  auto upper = [](std::string hex) {
    for (char& c : hex) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return hex;
  };
  expect_same_weights(
      io::read_samba_checkpoint(write("upper.json", legacy_file(legacy_payload(state, upper)))), state);
  auto spaced = [](std::string hex) { return "  " + hex.substr(0, 2) + " \t" + hex.substr(2) + "\n"; };
  expect_same_weights(
      io::read_samba_checkpoint(write("spaced.json", legacy_file(legacy_payload(state, spaced)))), state);
}

TEST_F(SambaCheckpointTest, OtherConfigsRoundTripInBothFormats) {
  SambaConfigArgs untied = example_args();
  untied.tie_embeddings = false;
  SambaConfigArgs mamba_only;
  mamba_only.vocab = 64;
  mamba_only.d_model = 64;
  mamba_only.layers = {"mamba3", "mamba3", "mamba3"};
  mamba_only.norm_eps = 1e-6;
  SambaConfigArgs gqa;
  gqa.vocab = 5;
  gqa.d_model = 24;
  gqa.layers = {"attention"};
  gqa.n_heads = 4;
  gqa.n_kv_heads = 2;
  gqa.intermediate = 40;
  gqa.dropout = 0.1;
  for (const SambaConfigArgs& args : {untied, mamba_only, gqa}) {
    State state = make_state(args, 99);
    SCOPED_TRACE(json::canonical_json(config_value(state.config)));
    expect_same_weights(io::read_samba_checkpoint(write("s.samba", archive(state))), state);
    expect_same_weights(io::read_samba_checkpoint(write("l.json", legacy_file(legacy_payload(state)))),
                        state);
  }
}

TEST_F(SambaCheckpointTest, LegacyWeightsAreSlicedByTheStoredOffsets) {
  // mojolearn's SambaInference slices the flat vector by each entry's offset/size (it trusts them on the
  // legacy path); a file laying the tensors out in reverse order loads as the registry says.
  State state = make_state(example_args());
  auto registry = state.config.registry();
  std::vector<float> reversed;
  std::string payload = legacy_payload(state);
  State stored = state;
  std::int64_t offset = 0;
  for (std::size_t k = registry.entries.size(); k-- > 0;) {
    const auto& entry = registry.entries[k];
    payload = replace_once(
        payload, "{\"name\":\"" + entry.name + "\",\"offset\":" + std::to_string(entry.offset) + ",",
        "{\"name\":\"" + entry.name + "\",\"offset\":" + std::to_string(offset) + ",");
    reversed.insert(reversed.end(), state.parameters.begin() + entry.offset,
                    state.parameters.begin() + entry.offset + entry.size);
    offset += entry.size;
  }
  stored.parameters = reversed;
  payload = replace_once(payload, hex_of(bytes_of(state.parameters)), hex_of(bytes_of(reversed)));
  io::SambaCheckpoint loaded = io::read_samba_checkpoint(write("reversed.json", legacy_file(payload)));
  expect_same_weights(loaded, state);  // repacked into the registry layout
}

// -------------------------------------------------------------------------------------- refusals

TEST_F(SambaCheckpointTest, UpstreamCorruptionGateIsRefused) {
  // docs/formats.md §3.9: the corruptions mojolearn's own checkpoint gate confirms are refused.
  State state = make_state(example_args());
  const std::string good = archive(state);
  const std::string header = stream_header(state);
  const std::size_t digest_end = 25 + header.size() + 32;
  auto flipped = [&](std::size_t at) {
    std::string out = good;
    out[at] = static_cast<char>(out[at] ^ 0x01);
    return out;
  };
  EXPECT_EQ(refusal(flipped(digest_end - 1)), kStream + "header integrity mismatch");
  EXPECT_EQ(refusal(flipped(digest_end)), kStream + "array integrity mismatch: parameters");
  EXPECT_EQ(refusal(flipped(good.size() - 1)), kStream + "array integrity mismatch: buf_initialized");
  EXPECT_EQ(refusal(good.substr(0, good.size() - 1)), kStream + "truncated or trailing array data");
  EXPECT_EQ(refusal(good + "x"), kStream + "truncated or trailing array data");
  EXPECT_EQ(refusal(archive(state, header, io::kSambaHeaderLimit + 1)),
            kStream + "header length exceeds limit");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"offset\":0,\"shape\":[256,32],\"size\":8192",
                                                "\"offset\":0,\"shape\":[256,32],\"size\":8193"))),
            kStream + "registry mismatch or index overflow");
  EXPECT_EQ(refusal(good), "");
}

TEST_F(SambaCheckpointTest, ContainerChecksInOrder) {
  State state = make_state(example_args());
  const std::string good = archive(state);
  const std::string header = stream_header(state);
  const std::string magic(io::kSambaStreamMagic);
  // 1. magic: only the stream reader itself says so; the dispatcher hands anything else to the JSON reader
  std::string bad_magic = good;
  bad_magic[15] = '\x03';
  EXPECT_EQ(refusal(bad_magic, &io::read_samba_stream_checkpoint), kStream + "stream magic mismatch");
  EXPECT_EQ(refusal(bad_magic), "samebits.SambaStack: checkpoint is not valid JSON");
  EXPECT_EQ(refusal("MOJOLEARN", &io::read_samba_stream_checkpoint), kStream + "stream magic mismatch");
  EXPECT_EQ(refusal(good, &io::read_samba_legacy_checkpoint),
            "samebits.SambaStack: checkpoint is not valid JSON");
  // 2-4.
  EXPECT_EQ(refusal(magic + "1234567"), kStream + "truncated header length");
  EXPECT_EQ(refusal(archive(state, header, 0)), kStream + "header length exceeds limit");
  EXPECT_EQ(refusal(archive(state, header, ~std::uint64_t{0})), kStream + "header length exceeds limit");
  EXPECT_EQ(refusal(magic + le64(header.size() + 500) + header), kStream + "header integrity mismatch");
  EXPECT_EQ(refusal(good.substr(0, 25 + header.size() + 31)), kStream + "header integrity mismatch");
  // 5. JSON and canonical spelling (both re-hashed honestly)
  EXPECT_EQ(refusal(archive(state, "{\"arrays\":")), kStream + "header is not valid JSON");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"t\":3}}", "\"t\":3,\"t\":3}}"))),
            kStream + "header is not valid JSON");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"max_norm\":1.0", "\"max_norm\":NaN"))),
            kStream + "header is not valid JSON");
  EXPECT_EQ(refusal(archive(state, " " + header)), kStream + "header integrity mismatch");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"max_norm\":1.0", "\"max_norm\":1.00"))),
            kStream + "header integrity mismatch");
  // 6. envelope
  EXPECT_EQ(refusal(archive(state, "[]")), kStream + "stream schema mismatch");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "samba-stream.v2", "samba-stream.v1"))),
            kStream + "stream schema mismatch");
  // 7a-7b.
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"profile\":\"mojolearn.samba-stack.fp32.v1\"",
                                                "\"profile\":\"mojolearn.samba-stack.fp16.v1\""))),
            kStream + "state schema mismatch");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"d_model\":32,", ""))),
            "samebits.SambaConfig: from_dict is missing the key 'd_model'");
  // 7c-7e: a registry one entry short, an empty tensor, the int32 bound, a float offset
  std::string short_registry =
      replace_once(header, ",{\"name\":\"norm_f.weight\",\"offset\":34498,\"shape\":[32],\"size\":32}", "");
  EXPECT_EQ(refusal(archive(state, short_registry)), kStream + "registry length mismatch");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"intermediate\":64", "\"intermediate\":0"))),
            kStream + "registry has an empty tensor");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"vocab\":256", "\"vocab\":67108864"))),
            kStream + "registry mismatch or index overflow");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "{\"name\":\"embed.weight\",\"offset\":0,",
                                                "{\"name\":\"embed.weight\",\"offset\":0.0,"))),
            kStream + "registry mismatch or index overflow");
  // 7f.
  const std::string metadata_mismatch = kStream + "state metadata mismatch";
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"t\":3}", "\"t\":-1}"))), metadata_mismatch);
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"t\":3}", "\"t\":true}"))), metadata_mismatch);
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"kind\":\"adamw\"", "\"kind\":\"sgd\""))),
            metadata_mismatch);
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"numeric_mode\":\"identical\"",
                                                "\"numeric_mode\":\"unknown\""))),
            metadata_mismatch);
  EXPECT_EQ(
      refusal(archive(state, replace_once(header, "\"rng\":{\"counter\":11,\"seed\":7}", "\"rng\":null"))),
      metadata_mismatch);
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"schedule\":{", "\"schedule\":[{") + "")),
            kStream + "header is not valid JSON");  // sanity: an unbalanced edit is a parse error
  // 7g-7h.
  std::string digest = io::sha256_hex(bytes_of(state.exp_avg));
  EXPECT_EQ(refusal(archive(state, replace_once(header, digest, std::string(64, 'A')))),
            kStream + "array descriptor mismatch");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"nbytes\":80,", "\"nbytes\":84,"))),
            kStream + "array descriptor mismatch");
  EXPECT_EQ(refusal(archive(state, replace_once(header, "\"nbytes\":80,", "\"nbytes\":80.0,"))),
            kStream + "array descriptor mismatch");
  // 8-10.
  EXPECT_EQ(refusal(good.substr(0, 25 + header.size() + 32)), kStream + "truncated or trailing array data");
  std::string flipped = good;
  flipped[25 + header.size() + 32 + 4 * 34530 + 100] ^= 0x10;
  EXPECT_EQ(refusal(flipped), kStream + "array integrity mismatch: exp_avg");
}

TEST_F(SambaCheckpointTest, InferenceChecksAfterTheContainer) {
  State state = make_state(example_args());
  // A NaN weight, honestly hashed: refused by name (the first non-finite tensor in registry order).
  State poisoned = state;
  poisoned.parameters[21632] = std::bit_cast<float>(0x7FC00000u);  // layers.0.dt_bias
  poisoned.parameters[34530 - 1] = std::bit_cast<float>(0x7F800000u);
  EXPECT_EQ(refusal(archive(poisoned)), "samebits.SambaInference: layers.0.dt_bias is not finite");
  EXPECT_EQ(refusal(legacy_file(legacy_payload(poisoned))),
            "samebits.SambaInference: layers.0.dt_bias is not finite");
  // ...but a corrupt optimizer array wins over it: the whole container is verified first.
  std::string both = archive(poisoned);
  both[both.size() - 100] ^= 0x01;
  EXPECT_EQ(refusal(both), kStream + "array integrity mismatch: exp_avg_sq");
  // Numeric profile (Open point 8.6).
  const std::string header = stream_header(state);
  const std::string with_profile = "\"numeric_mode\":\"identical\",\"numeric_profile\":";
  auto profiled = [&](const std::string& value) {
    return archive(state,
                   replace_once(header, "\"numeric_mode\":\"identical\",", with_profile + value + ","));
  };
  EXPECT_EQ(refusal(profiled("\"fp32_v1\"")), "");
  EXPECT_EQ(refusal(profiled("null")), "");
  EXPECT_EQ(refusal(profiled("\"fixed15_v1\"")),
            "samebits: samebits.SambaInference state was written under numeric profile 'fixed15_v1' and this "
            "object "
            "computes under 'fp32_v1'; a run keeps one arithmetic, so build the object with "
            "numeric_profile='fixed15_v1'");
  EXPECT_EQ(
      refusal(profiled("\"fp16\"")),
      "samebits: samebits.SambaInference state numeric_profile='fp16' is not a registered numeric profile; "
      "registered: fp32_v1, fixed15_v1");
  EXPECT_NE(refusal(profiled("\"int8_v1\"")).find("numeric_profile='int8_v1' is not offered: "),
            std::string::npos);
  EXPECT_EQ(
      refusal(profiled("[]")),
      "samebits: samebits.SambaInference state numeric_profile must be a profile name (a str), got list");
}

TEST_F(SambaCheckpointTest, LegacyChecksInOrder) {
  State state = make_state(example_args());
  const std::string payload = legacy_payload(state);
  const std::string good = legacy_file(payload);
  const std::string stack = "samebits.SambaStack: ";
  EXPECT_EQ(refusal(good), "");
  EXPECT_EQ(refusal(good.substr(0, 1000)), stack + "checkpoint is not valid JSON");
  EXPECT_EQ(refusal(""), stack + "checkpoint is not valid JSON");
  EXPECT_EQ(refusal(replace_once(good, "json-checkpoint.v1", "json-checkpoint.v2")),
            stack + "checkpoint schema mismatch");
  EXPECT_EQ(refusal("{\"payload\":{},\"schema\":\"mojolearn.samba-stack-json-checkpoint.v1\"}"),
            stack + "checkpoint schema mismatch");
  // integrity: a wrong digest, an edit without re-hashing, and a non-canonical payload whose digest is
  // that of its canonical form (mojolearn would accept it; Open point 8.5) or of its raw text
  EXPECT_EQ(refusal(legacy_file(payload, std::string(64, '0'))), stack + "checkpoint integrity mismatch");
  EXPECT_EQ(refusal(legacy_file(replace_once(payload, "\"t\":3", "\"t\":4"), io::sha256_hex(payload))),
            stack + "checkpoint integrity mismatch");
  std::string spaced = replace_once(payload, "\"t\":3", "\"t\": 3");
  EXPECT_EQ(refusal(legacy_file(spaced, io::sha256_hex(payload))), stack + "checkpoint integrity mismatch");
  EXPECT_EQ(refusal(legacy_file(spaced)), stack + "checkpoint integrity mismatch");
  // the four arrays
  EXPECT_EQ(refusal(legacy_file(replace_once(payload, "{\"dtype\":\"<i4\"", "{\"dtype\":\"<f4\""))),
            stack + "checkpoint tensor dtype mismatch");
  auto bad_hex = [](std::string hex) { return "0g" + hex.substr(2); };
  EXPECT_EQ(refusal(legacy_file(legacy_payload(state, bad_hex))),
            stack + "checkpoint tensor parameters is not hexadecimal");
  auto short_hex = [](std::string hex) { return hex.substr(0, hex.size() - 8); };
  EXPECT_EQ(refusal(legacy_file(legacy_payload(state, short_hex))),
            "samebits: 138116 bytes do not fill shape (34530,) of <f4 (138120 bytes)");
  // the inference checks
  EXPECT_EQ(refusal(legacy_file(replace_once(payload, "\"schema\":\"mojolearn.samba-stack-state.v1\"",
                                             "\"schema\":\"mojolearn.samba-stack-state.v2\""))),
            "samebits.SambaInference: checkpoint schema/profile mismatch");
  EXPECT_EQ(refusal(legacy_file(replace_once(payload, "\"name\":\"layers.0.D\"", "\"name\":\"layers.0.E\""))),
            "samebits.SambaInference: checkpoint registry differs from its config's");
  EXPECT_EQ(refusal(legacy_file(replace_once(payload, "\"offset\":34498", "\"offset\":34530"))),
            "samebits: 0 bytes do not fill shape (32,) of <f4 (128 bytes)");
  EXPECT_EQ(refusal(legacy_file(replace_once(payload, "\"offset\":34498", "\"offset\":-1"))),
            "samebits.SambaInference: checkpoint registry differs from its config's");
}

TEST_F(SambaCheckpointTest, MissingFileNamesThePath) {
  std::string path = (dir_ / "no-such-file.samba").string();
  try {
    io::read_samba_checkpoint(path);
    FAIL() << "expected a refusal";
  } catch (const samebits::Error& error) {
    EXPECT_EQ(error.kind(), samebits::ErrorKind::Value);
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos);
  }
}
