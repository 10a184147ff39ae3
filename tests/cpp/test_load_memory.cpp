// Bounded load memory: C++ SambaInference::from_checkpoint of a ~100 MB v2 archive peaks under 1.2x its
// parameter bytes plus a fixed overhead, and the packed panels give every weight back bit for bit.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <samebits/json.hpp>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"
#include "io/samba_checkpoint.hpp"
#include "io/sha256.hpp"
#include "models/samba.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm.hpp"
#include "test_samba_support.hpp"
#include "test_support.hpp"

namespace samebits {
namespace {

using json::Value;
using models::SambaConfig;
using models::SambaConfigArgs;

constexpr double kLoadRatio = 1.2;
constexpr std::int64_t kLoadOverhead = 16 * 1024 * 1024;  // bytes; the same figure the Python test uses

std::int64_t rss_now() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  EXPECT_EQ(std::fscanf(statm, "%ld %ld", &size, &resident), 2);
  std::fclose(statm);
  return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

std::int64_t peak_rss() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

// Deterministic weights of one tensor: norms near 1, the rest small; a few subnormals of both signs in
// every matrix, so the exact-unpack path is exercised by the whole-model check too.
std::vector<float> tensor_values(const models::SambaRegistryEntry& entry, std::uint64_t seed) {
  testing::Rng rng(seed);
  const bool is_norm = entry.name.find("norm") != std::string::npos;
  std::vector<float> values(static_cast<std::size_t>(entry.size));
  for (float& v : values) v = (is_norm ? 1.0f : 0.0f) + rng.uniform() * 0.05f;
  if (entry.shape.size() == 2 && values.size() > 8) {
    values[1] = std::bit_cast<float>(0x00000001u);
    values[values.size() - 2] = std::bit_cast<float>(0x80400000u);
  }
  return values;
}

Value integers(const std::vector<std::int64_t>& values) {
  Value::Array items;
  for (std::int64_t v : values) items.push_back(Value::make_integer(v));
  return Value::make_array(std::move(items));
}

Value object(std::vector<std::pair<const char*, Value>> members) {
  Value::Object out;
  for (auto& [key, value] : members) out.emplace_back(json::from_ascii(key), std::move(value));
  return Value::make_object(std::move(out));
}

// A valid v2 archive (docs/formats.md §3.2), written one tensor at a time; moments zero, flags one.
void write_archive(const std::string& path, const SambaConfig& config) {
  const models::SambaRegistry registry = config.registry();
  const std::int64_t n = registry.total;
  const auto t = static_cast<std::int64_t>(registry.entries.size());
  io::Sha256 parameters_hash;
  for (std::size_t i = 0; i < registry.entries.size(); ++i) {
    const std::vector<float> values = tensor_values(registry.entries[i], i + 1);
    parameters_hash.update(values.data(), values.size() * 4);
  }
  io::Sha256 zeros_hash;
  const std::vector<unsigned char> zeros(1 << 20);
  for (std::int64_t done = 0; done < 4 * n; done += static_cast<std::int64_t>(zeros.size()))
    zeros_hash.update(zeros.data(),
                      static_cast<std::size_t>(std::min<std::int64_t>(zeros.size(), 4 * n - done)));
  const std::vector<std::int32_t> flags(static_cast<std::size_t>(t), 1);
  const std::string zero_digest = io::digest_hex(zeros_hash.finish());
  auto descriptor = [](const char* name, const char* dtype, std::int64_t count, const std::string& digest) {
    return object({{"dtype", Value::make_string_ascii(dtype)},
                   {"name", Value::make_string_ascii(name)},
                   {"nbytes", Value::make_integer(4 * count)},
                   {"sha256", Value::make_string_ascii(digest)},
                   {"shape", integers({count})}});
  };
  Value::Array entries;
  for (const auto& entry : registry.entries)
    entries.push_back(object({{"name", Value::make_string_ascii(entry.name)},
                              {"offset", Value::make_integer(entry.offset)},
                              {"shape", integers(entry.shape)},
                              {"size", Value::make_integer(entry.size)}}));
  Value state =
      object({{"config", io::samba_config_to_json(config)},
              {"numeric_mode", Value::make_string_ascii("identical")},
              {"optimizer", object({{"kind", Value::make_string_ascii("adamw")}})},
              {"profile", Value::make_string_ascii(io::kSambaStackProfile)},
              {"registry", Value::make_array(std::move(entries))},
              {"rng", object({{"counter", Value::make_integer(1)}, {"seed", Value::make_integer(2)}})},
              {"schedule", Value()},
              {"schema", Value::make_string_ascii(io::kSambaStateSchema)},
              {"t", Value::make_integer(3)}});
  Value::Array arrays;
  arrays.push_back(descriptor("parameters", "<f4", n, io::digest_hex(parameters_hash.finish())));
  arrays.push_back(descriptor("exp_avg", "<f4", n, zero_digest));
  arrays.push_back(descriptor("exp_avg_sq", "<f4", n, zero_digest));
  arrays.push_back(descriptor("buf_initialized", "<i4", t, io::sha256_hex(flags.data(), flags.size() * 4)));
  const std::string header =
      json::canonical_json(object({{"arrays", Value::make_array(std::move(arrays))},
                                   {"schema", Value::make_string_ascii(io::kSambaStreamSchema)},
                                   {"state", std::move(state)}}));
  std::FILE* out = std::fopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  std::fwrite(io::kSambaStreamMagic.data(), 1, io::kSambaStreamMagic.size(), out);
  const std::uint64_t length = header.size();  // little-endian host (the readers assume it too)
  std::fwrite(&length, 8, 1, out);
  std::fwrite(header.data(), 1, header.size(), out);
  const io::Sha256Digest digest = io::sha256(header);
  std::fwrite(digest.data(), 1, digest.size(), out);
  for (std::size_t i = 0; i < registry.entries.size(); ++i) {
    const std::vector<float> values = tensor_values(registry.entries[i], i + 1);
    std::fwrite(values.data(), 4, values.size(), out);
  }
  for (int moment = 0; moment < 2; ++moment)
    for (std::int64_t done = 0; done < 4 * n; done += static_cast<std::int64_t>(zeros.size()))
      std::fwrite(zeros.data(), 1,
                  static_cast<std::size_t>(std::min<std::int64_t>(zeros.size(), 4 * n - done)), out);
  std::fwrite(flags.data(), 4, flags.size(), out);
  std::fclose(out);
}

SambaConfig large_config() {  // 23.9 M parameters (95.6 MB), the Python test's config
  SambaConfigArgs args;
  args.vocab = 256;
  args.d_model = 512;
  for (int i = 0; i < 4; ++i) args.layers.insert(args.layers.end(), {"mamba3", "attention"});
  args.n_heads = 8;
  args.intermediate = 2048;
  return SambaConfig(args);
}

// First in this binary, so no earlier test has raised the process's high-water mark. The archive is
// written by a forked child, so its buffers never count against this process.
TEST(LoadMemory, LargeArchivePeakIsBoundedAndWeightsAreExact) {
  const SambaConfig config = large_config();
  // Per process, so that two suites running at once (a sanitizer build beside a release one) never share it.
  const std::string path =
      ::testing::TempDir() + "samebits_load_memory_" + std::to_string(getpid()) + ".samba";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    write_archive(path, config);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  const std::int64_t parameter_bytes = 4 * config.registry().total;
  ASSERT_GT(parameter_bytes, 95'000'000);
  const std::int64_t before = rss_now();
  const SambaInference model = SambaInference::from_checkpoint(path);
  const std::int64_t growth = peak_rss() - before;
  std::printf("parameter bytes %lld, peak RSS growth %lld (%.3fx)\n", static_cast<long long>(parameter_bytes),
              static_cast<long long>(growth),
              static_cast<double>(growth) / static_cast<double>(parameter_bytes));
#if defined(SAMEBITS_SANITIZER_BUILD)
  // ASan quarantines freed blocks and adds shadow memory, so the bound only holds in a normal build; the
  // load itself still runs here, under the sanitizer.
  (void)growth;
#else
  EXPECT_LE(growth,
            static_cast<std::int64_t>(kLoadRatio * static_cast<double>(parameter_bytes)) + kLoadOverhead);
#endif

  // Every tensor comes back exactly as written (subnormals included).
  const models::SambaRegistry registry = config.registry();
  for (std::size_t i = 0; i < registry.entries.size(); ++i) {
    const std::vector<float> want = tensor_values(registry.entries[i], i + 1);
    const std::vector<float> got = ApiAccess::model(model).tensor_copy(i);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << registry.entries[i].name;
  }
  // And the flat reader agrees with the model it built.
  const std::vector<std::int32_t> ids = {1, 2, 3, 250, 7, 9};
  const std::vector<float> fast = model.forward({ids.data(), 2, 3});
  const SambaInference flat(config, io::read_samba_checkpoint(path).parameters);
  const std::vector<float> again = flat.forward({ids.data(), 2, 3});
  EXPECT_EQ(std::memcmp(fast.data(), again.data(), fast.size() * 4), 0);
  std::remove(path.c_str());
}

// Values that F changes (subnormals) or that must pass through untouched (NaN payloads, infinities, -0).
std::vector<float> awkward_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  testing::Rng rng(seed);
  std::vector<float> values(static_cast<std::size_t>(rows * cols));
  for (float& v : values) v = rng.uniform();
  const std::uint32_t specials[] = {0x00000001u, 0x807FFFFFu, 0x00400000u, 0x80000000u,
                                    0x7FC01234u, 0xFF800000u, 0x7F800000u, 0x80000001u};
  for (std::size_t i = 0; i < values.size(); i += 7) values[i] = std::bit_cast<float>(specials[(i / 7) % 8]);
  return values;
}

void expect_bits(const std::vector<float>& got, const float* want, std::size_t count, const char* what) {
  ASSERT_EQ(got.size(), count) << what;
  EXPECT_EQ(std::memcmp(got.data(), want, count * 4), 0) << what;
}

TEST(LoadMemory, PackedRhsUnpacksExactlyInBothLayouts) {
  for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {33, 17}, {64, 130}, {70, 3}}) {
    const std::vector<float> w = awkward_matrix(n, k, static_cast<std::uint64_t>(n * 1000 + k));
    const gemm::PackedRhs transposed = gemm::PackedRhs::from_transposed(w.data(), n, k);
    expect_bits(transposed.unpack_transposed(), w.data(), w.size(), "unpack_transposed");
    expect_bits(transposed.clone().unpack_transposed(), w.data(), w.size(), "clone");
    for (std::int64_t first = 0; first < n; first += 5) {
      const std::int64_t count = std::min<std::int64_t>(4, n - first);
      std::vector<float> rows(static_cast<std::size_t>(count * k));
      transposed.unpack_transposed(first, count, rows.data());
      expect_bits(rows, w.data() + first * k, rows.size(), "row range");
    }
    // The panels hold F(w): flushed subnormals, everything else as is.
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t p = 0; p < k; ++p)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(transposed.at(p, j)),
                  std::bit_cast<std::uint32_t>(fp::F(w[static_cast<std::size_t>(j * k + p)])));
    // The same values read as B[k, n].
    const gemm::PackedRhs row_major = gemm::PackedRhs::from_row_major(w.data(), n, k);
    std::vector<float> back(w.size());
    row_major.unpack_row_major(back.data());
    expect_bits(back, w.data(), w.size(), "unpack_row_major");
  }
}

TEST(LoadMemory, BlocksGiveTheirWeightsBackExactly) {
  blocks::TransformerDims dims{64, 4, 2, 16, 96, 0};
  blocks::TransformerWeights given;
  std::uint64_t seed = 11;
  std::vector<std::vector<float>*> parts = {&given.input_norm, &given.post_norm, &given.q,
                                            &given.k,          &given.v,         &given.o,
                                            &given.gate,       &given.up,        &given.down};
  const auto tensors = blocks::transformer_tensors(dims);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::int64_t rows = tensors[i].shape.size() == 2 ? tensors[i].shape[0] : 1;
    *parts[i] = awkward_matrix(rows, tensors[i].shape.back(), seed++);
    for (float& v : *parts[i])
      if (!fp::is_finite(v)) v = 0.5f;  // the block refuses non-finite weights
  }
  const blocks::TransformerWeights copy = given;
  const blocks::TransformerBlock block(dims, std::move(given), "test");
  const blocks::TransformerWeights back = block.weights();
  const std::vector<const std::vector<float>*> want = {&copy.input_norm, &copy.post_norm, &copy.q,
                                                       &copy.k,          &copy.v,         &copy.o,
                                                       &copy.gate,       &copy.up,        &copy.down};
  const std::vector<const std::vector<float>*> got = {&back.input_norm, &back.post_norm, &back.q,
                                                      &back.k,          &back.v,         &back.o,
                                                      &back.gate,       &back.up,        &back.down};
  for (std::size_t i = 0; i < want.size(); ++i)
    expect_bits(*got[i], want[i]->data(), want[i]->size(), tensors[i].name);

  const blocks::Mamba3Dims mdims = blocks::Mamba3Dims::of(64);
  const auto specs = blocks::mamba3_tensors(mdims);
  blocks::Mamba3Weights mgiven;
  for (int i = 0; i < blocks::kMamba3TensorCount; ++i) {
    const std::int64_t rows = specs[i].shape.size() == 2 ? specs[i].shape[0] : 1;
    mgiven.tensors[i] = awkward_matrix(rows, specs[i].elements() / rows, seed++);
  }
  const blocks::Mamba3Weights mcopy = mgiven;
  const blocks::Mamba3Block mblock(std::move(mgiven));
  EXPECT_TRUE(mblock.held_weights().in_proj().empty());  // the panels are the only copy
  EXPECT_TRUE(mblock.held_weights().out_proj().empty());
  const blocks::Mamba3Weights mback = mblock.weights();
  for (int i = 0; i < blocks::kMamba3TensorCount; ++i)
    expect_bits(mback.tensors[i], mcopy.tensors[i].data(), mcopy.tensors[i].size(), specs[i].name);
}

TEST(LoadMemory, ModelParametersRoundTripTiedAndUntied) {
  for (bool tied : {true, false}) {
    const SambaConfig config(testing::samba_args(40, 32, {"attention", "mamba3"}, 2, 48, tied));
    std::vector<float> flat = awkward_matrix(1, config.registry().total, tied ? 3 : 4);
    for (float& v : flat)
      if (!fp::is_finite(v)) v = -0.25f;
    const models::SambaModel model(config, flat);
    const std::vector<float> back = model.parameters();
    expect_bits(back, flat.data(), flat.size(), tied ? "tied" : "untied");
  }
}

}  // namespace
}  // namespace samebits
