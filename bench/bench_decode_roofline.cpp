// B=1 decode steps of every block, the Samba stack and the shipped model against the read roofline: the
// bytes a step must read divided by the read bandwidth measured in the same run for that many bytes and
// that thread count (docs/performance.md §D), per SIMD target and thread
// count. Its own main (a table, not Google Benchmark rows); bench/bench_decode_roofline.py wraps it.
//
//   bench_decode_roofline [--rows SUBSTRING] [--threads 1,2] [--targets avx2,avx512] [--rounds N]
//                         [--model PATH]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <samebits/engine.hpp>
#include <samebits/json.hpp>
#include <samebits/mamba.hpp>
#include <samebits/mamba3.hpp>
#include <samebits/mlp.hpp>
#include <samebits/samba.hpp>
#include <samebits/transformer.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"
#include "numerics/machine_probe.hpp"
#include "numerics/simd_target.hpp"

namespace {

using namespace samebits;
using Clock = std::chrono::steady_clock;

constexpr int kSteps = 64;     // one Mamba-3 chunk: a timed loop seals one chunk, as steady decoding does
constexpr int kWarmSteps = 8;  // untimed steps that bring the weights back into the caches first
constexpr double kProbeSeconds = 0.15;

// Deterministic weights by tensor name, in the ranges trained blocks have (norms near 1, dt biases that
// give dt in (0.02, 1), A_log of small positive decays).
std::vector<float> weights_for(const std::string& name, std::int64_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& e : v) e = normal(rng);
  if (name.find("norm") != std::string::npos)
    for (float& e : v) e += 1.0f;
  if (name.find("A_log") != std::string::npos)
    for (float& e : v) e = std::log(1.0f + static_cast<float>(rng() % 16));
  if (name.find("dt_proj.bias") != std::string::npos || name.find("dt_bias") != std::string::npos)
    for (float& e : v) e = -4.0f + static_cast<float>(rng() % 100) * 0.04f;
  return v;
}

// Owned tensors and the NamedTensors views over them.
struct Weights {
  std::vector<std::vector<float>> values;
  NamedTensors views;
  double bytes = 0;
};

template <typename Table>
Weights make_weights(const Table& table) {
  Weights w;
  w.values.reserve(table.size());  // the views point into these vectors
  std::uint32_t seed = 1;
  for (const auto& t : table) {
    std::int64_t count = 1;
    for (std::int64_t d : t.shape) count *= d;
    w.values.push_back(weights_for(t.name, count, seed++));
    w.views.push_back({t.name, TensorView{w.values.back().data(), t.shape}});
    w.bytes += 4.0 * static_cast<double>(count);
  }
  return w;
}

template <typename Table>
double table_bytes(const Table& table) {
  double bytes = 0;
  for (const auto& t : table) {
    double count = 1;
    for (std::int64_t d : t.shape) count *= static_cast<double>(d);
    bytes += 4.0 * count;
  }
  return bytes;
}

std::vector<float> rows(std::int64_t count, std::int64_t width, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(count * width));
  for (float& e : x) e = normal(rng);
  return x;
}

// A decode loop on a prefilled state: reset() starts a fresh copy of it, step(i) runs the loop's i-th step.
struct Session {
  virtual ~Session() = default;
  virtual void reset() = 0;
  virtual void step(int i) = 0;
};

template <typename State, typename Step>
struct StateSession : Session {
  StateSession(State prefilled, Step step) : prefilled_(std::move(prefilled)), step_(std::move(step)) {}
  void reset() override {
    working_.reset();
    working_.emplace(prefilled_.clone());
  }
  void step(int i) override { step_(*working_, i); }
  State prefilled_;
  std::optional<State> working_;
  Step step_;
};

template <typename State, typename Step>
std::unique_ptr<Session> session(State prefilled, Step step) {
  return std::make_unique<StateSession<State, Step>>(std::move(prefilled), std::move(step));
}

// One table row group: a model, the positions it is read at, and what a step at a position must read.
struct Case {
  std::string name;
  std::vector<std::int64_t> positions;  // {0} for a stateless call
  double weight_bytes = 0;
  std::function<double(std::int64_t position)> state_bytes;  // mean over the timed loop's steps
  std::function<std::unique_ptr<Session>(std::int64_t position)> prefill;
};

// Mean over the timed loop of the rows an open chunk of `chunk` rows holds before each step.
double mean_open_rows(std::int64_t position, std::int64_t chunk) {
  double sum = 0;
  for (int i = 0; i < kSteps; ++i) sum += static_cast<double>((position + i) % chunk);
  return sum / kSteps;
}

// K and V of one attention layer over the positions the loop's steps attend to, on average.
double kv_bytes(std::int64_t position, std::int64_t kv_width) {
  return 2.0 * 4.0 * static_cast<double>(kv_width) * (static_cast<double>(position) + (kSteps + 1) / 2.0);
}

// A Mamba-3 layer's state a step reads: h, and the open chunk's buffered keys, values and three scalars.
double mamba3_state_bytes(std::int64_t d_model, std::int64_t position) {
  const blocks::Mamba3Dims dims = blocks::Mamba3Dims::of(d_model);
  const double heads = static_cast<double>(dims.heads);
  const double h = heads * blocks::mamba3::kHeadDim * blocks::mamba3::kStateDim;
  const double per_row = heads * (blocks::mamba3::kStateDim + blocks::mamba3::kHeadDim + 3);
  return 4.0 * (h + mean_open_rows(position, blocks::mamba3::kChunk) * per_row);
}

const std::vector<std::int64_t> kPositions{16, 512, 2048};

Case mlp_case() {
  Case c{"MLP 8-16-3", {0}, 0, [](std::int64_t) { return 4.0 * 8; }, nullptr};
  const std::vector<TensorInfo> table = MLPInference::weight_table();
  auto weights = std::make_shared<Weights>(make_weights(table));
  c.weight_bytes = weights->bytes;
  auto model = std::make_shared<MLPInference>(weights->views[0].second, weights->views[1].second,
                                              weights->views[2].second, weights->views[3].second);
  c.prefill = [model](std::int64_t) {
    struct Stateless {
      Stateless clone() const { return {}; }
    };
    auto x = std::make_shared<std::vector<float>>(rows(kSteps, 8, 3));
    return session(Stateless{}, [model, x](Stateless&, int i) {
      model->predict_logits({x->data() + 8 * i, {1, 8}});
    });
  };
  return c;
}

// A block with (B, d_model) steps over a state from allocate_state(1) prefilled by forward.
template <typename Block, typename Allocate>
Case block_case(std::string name, std::shared_ptr<Block> block, double weight_bytes, std::int64_t d_model,
                Allocate allocate, std::function<double(std::int64_t)> state_bytes) {
  Case c{std::move(name), kPositions, weight_bytes, std::move(state_bytes), nullptr};
  c.prefill = [block, d_model, allocate](std::int64_t position) {
    auto state = allocate(*block, position);
    const std::vector<float> prefix = rows(position, d_model, 5);
    block->forward({prefix.data(), {1, position, d_model}}, &state);
    auto x = std::make_shared<std::vector<float>>(rows(kSteps, d_model, 6));
    return session(std::move(state), [block, x, d_model](auto& s, int i) {
      block->step({x->data() + d_model * i, {1, d_model}}, &s);
    });
  };
  return c;
}

Case mamba1_case(std::int64_t d_model) {
  const auto table = blocks::mamba1_tensors(blocks::Mamba1Dims::for_d_model(d_model));
  const Weights w = make_weights(table);
  auto block = std::make_shared<Mamba1BlockInference>(w.views);
  const auto dims = blocks::Mamba1Dims::for_d_model(d_model);
  const double state =
      4.0 * static_cast<double>(dims.d_inner) * (blocks::Mamba1Dims::kConv + blocks::Mamba1Dims::kState);
  return block_case(
      "Mamba-1 " + std::to_string(d_model), block, w.bytes, d_model,
      [](const Mamba1BlockInference& b, std::int64_t) { return b.allocate_state(1); },
      [state](std::int64_t) { return state; });
}

Case mamba2_case(std::int64_t d_model) {
  const auto dims = blocks::Mamba2Dims::for_d_model(d_model);
  const Weights w = make_weights(blocks::mamba2_tensors(dims));
  auto block = std::make_shared<Mamba2BlockInference>(w.views);
  using D = blocks::Mamba2Dims;
  const double fixed =
      4.0 * static_cast<double>(dims.nheads * D::kHeadDim * D::kState + dims.conv_dim * D::kConv);
  // A step's diagonal term reads the open chunk's discretized x rows and B rows.
  const double per_row = 4.0 * static_cast<double>(dims.d_inner + D::kState);
  return block_case(
      "Mamba-2 " + std::to_string(d_model), block, w.bytes, d_model,
      [](const Mamba2BlockInference& b, std::int64_t) { return b.allocate_state(1); },
      [fixed, per_row](std::int64_t p) { return fixed + per_row * mean_open_rows(p, D::kChunk); });
}

Case mamba3_case(std::int64_t d_model) {
  const Weights w = make_weights(blocks::mamba3_tensors(blocks::Mamba3Dims::of(d_model)));
  auto block = std::make_shared<Mamba3BlockInference>(w.views);
  return block_case(
      "Mamba-3 " + std::to_string(d_model), block, w.bytes, d_model,
      [](const Mamba3BlockInference& b, std::int64_t) { return b.allocate_state(1); },
      [d_model](std::int64_t p) { return mamba3_state_bytes(d_model, p); });
}

// Issue 3's transformer block: d_model 512, 8 heads, 2 KV heads, SwiGLU 1536.
Case transformer_case() {
  constexpr std::int64_t d_model = 512, heads = 8, kv_heads = 2, intermediate = 1536;
  constexpr std::int64_t kv_width = kv_heads * (d_model / heads);
  const auto table = blocks::transformer_tensor_table<std::int64_t>(d_model, d_model, kv_width, intermediate);
  const Weights w = make_weights(table);
  TransformerOptions options;
  options.n_heads = heads;
  options.n_kv_heads = kv_heads;
  auto block = std::make_shared<TransformerBlockInference>(w.views, options);
  Case c{"transformer d512", kPositions, w.bytes, [](std::int64_t p) { return kv_bytes(p, kv_width); },
         nullptr};
  c.prefill = [block](std::int64_t position) {
    TransformerState state = block->allocate_state(1, position + kSteps + 1);
    const std::vector<float> prefix = rows(position, d_model, 5);
    block->forward({prefix.data(), {1, position, d_model}}, state);
    auto x = std::make_shared<std::vector<float>>(rows(kSteps, d_model, 6));
    return session(std::move(state), [block, x](TransformerState& s, int i) {
      block->step({x->data() + d_model * i, {1, d_model}}, s);
    });
  };
  return c;
}

// A Samba stack: weights (head = tied embedding, read whole; an untied embedding contributes one row) plus
// each layer's state.
Case samba_case(std::string name, std::shared_ptr<SambaInference> model) {
  const SambaConfig& cfg = model->config();
  double weights = 0;
  for (const SambaTensorEntry& e : cfg.registry())
    weights += 4.0 * static_cast<double>(e.name == "embedding.weight" && !cfg.tie_embeddings() ? cfg.d_model()
                                                                                               : e.size);
  const std::int64_t heads = cfg.n_heads().value_or(1);
  const std::int64_t kv_width =
      cfg.n_kv_heads().value_or(heads) * cfg.head_dim().value_or(cfg.d_model() / heads);
  std::vector<std::string> layers = cfg.layers();
  const std::int64_t d_model = cfg.d_model(), vocab = cfg.vocab();
  Case c{std::move(name), kPositions, weights,
         [layers, d_model, kv_width](std::int64_t p) {
           double bytes = 0;
           for (const std::string& kind : layers)
             bytes += kind == "mamba3" ? mamba3_state_bytes(d_model, p) : kv_bytes(p, kv_width);
           return bytes;
         },
         nullptr};
  c.prefill = [model, vocab](std::int64_t position) {
    SambaState state = model->allocate_state(1, position + kSteps + 1);
    std::mt19937 rng(9);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(position + kSteps));
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(vocab));
    model->forward({ids.data(), 1, position}, state);
    auto tail = std::make_shared<std::vector<std::int32_t>>(ids.begin() + position, ids.end());
    return session(std::move(state), [model, tail](SambaState& s, int i) {
      model->step({tail->data() + i, 1, 1}, s);
    });
  };
  return c;
}

// The Samba benchmark model of bench/bench_samba.py (random weights).
Case samba_bench_case() {
  const SambaConfig cfg = SambaConfig::from_json(json::parse(
      R"({"vocab":256,"d_model":384,"layers":["mamba3","attention","mamba3","attention"],"n_heads":6,)"
      R"("n_kv_heads":null,"head_dim":null,"intermediate":1024,"tie_embeddings":true,"norm_eps":1e-05,)"
      R"("dropout":0})"));
  std::vector<std::vector<float>> tensors;
  std::uint32_t seed = 1;
  for (const SambaTensorEntry& e : cfg.registry()) tensors.push_back(weights_for(e.name, e.size, seed++));
  return samba_case("Samba d384", std::make_shared<SambaInference>(cfg, std::move(tensors)));
}

// assets/default-model/samba-kjv.ckpt of this source tree: __FILE__ may be relative to the build directory,
// which holds this executable.
std::string shipped_model_path() {
  std::filesystem::path source(__FILE__);
  if (source.is_relative()) {
    std::error_code error;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
    if (!error) source = exe.parent_path() / source;
  }
  return (source.parent_path().parent_path() / "assets" / "default-model" / "samba-kjv.ckpt")
      .lexically_normal();
}

struct Options {
  std::string rows;
  std::vector<int> threads{1, 2};
  std::vector<simd::Target> targets;
  int rounds = 5;
  std::string model = shipped_model_path();
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

Options parse(int argc, char** argv) {
  Options o;
  for (simd::Target t : simd::available_targets())
    if (t != simd::Target::Scalar) o.targets.push_back(t);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rows") {
      o.rows = value;
    } else if (flag == "--threads") {
      o.threads.clear();
      for (const std::string& t : split(value)) o.threads.push_back(std::max(1, std::atoi(t.c_str())));
    } else if (flag == "--targets") {
      o.targets.clear();
      for (const std::string& name : split(value))
        for (simd::Target t : simd::available_targets())
          if (name == simd::target_name(t)) o.targets.push_back(t);
    } else if (flag == "--rounds") {
      o.rounds = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--model") {
      o.model = value;
    } else {
      std::fprintf(stderr, "bench_decode_roofline: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return o;
}

// Best seconds per step over `rounds` loops, each on a fresh copy after kWarmSteps untimed steps.
double time_step(Session& s, int rounds) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    s.reset();
    for (int i = 0; i < kWarmSteps; ++i) s.step(i);
    s.reset();
    const auto start = Clock::now();
    for (int i = 0; i < kSteps; ++i) s.step(i);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / kSteps);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const std::vector<std::pair<std::string, std::function<Case()>>> makers{
      {"MLP 8-16-3", mlp_case},
      {"transformer d512", transformer_case},
      {"Mamba-1 768", [] { return mamba1_case(768); }},
      {"Mamba-2 768", [] { return mamba2_case(768); }},
      {"Mamba-3 768", [] { return mamba3_case(768); }},
      {"Samba d384", samba_bench_case},
      {"default model (samba-kjv)",
       [&] {
         return samba_case("default model (samba-kjv)",
                           std::make_shared<SambaInference>(SambaInference::from_checkpoint(options.model)));
       }},
  };
  std::printf("ISA targets:");
  for (simd::Target t : options.targets) std::printf(" %s", simd::target_name(t));
  std::printf(
      "; %d timed steps per round, best of %d rounds; probe: the step's bytes re-read by the same "
      "threads\n\n",
      kSteps, options.rounds);
  std::printf(
      "| model | position | ISA | threads | step us | MB read | probe GB/s | roofline us | fraction |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  // (model, ISA, threads) -> (position, step seconds, bytes), for the growth lines after the table.
  struct Point {
    std::string key;
    std::int64_t position;
    double step, bytes;
  };
  std::vector<Point> points;
  for (const auto& [name, make] : makers) {
    if (!options.rows.empty() && name.find(options.rows) == std::string::npos) continue;
    const Case c = make();
    for (std::int64_t position : c.positions) {
      std::unique_ptr<Session> s = c.prefill(position);
      const double bytes = c.weight_bytes + c.state_bytes(position);
      for (simd::Target target : options.targets) {
        simd::set_target(target);
        for (int threads : options.threads) {
          set_num_threads(threads);
          const double step = time_step(*s, options.rounds);
          const double rate =
              machine_probe::measure_read_bandwidth(static_cast<std::size_t>(bytes), kProbeSeconds, threads);
          const double floor = bytes / rate;
          std::printf("| %s | %s | %s | %d | %.*f | %.3f | %.1f | %.*f | %.2f |\n", c.name.c_str(),
                      position > 0 ? std::to_string(position).c_str() : "-", simd::target_name(target),
                      threads, step < 1e-5 ? 2 : 1, step * 1e6, bytes / 1e6, rate / 1e9, floor < 1e-5 ? 3 : 1,
                      floor * 1e6, floor / step);
          std::fflush(stdout);
          points.push_back({c.name + " | " + simd::target_name(target) + " | " + std::to_string(threads),
                            position, step, bytes});
        }
      }
      simd::reset_target();
    }
  }
  // Growth from the first to the last position: attention must not grow faster than its bytes (issue 23
  // asks for at most 1.2x), a recurrent layer not at all.
  std::printf("\n| model | ISA | threads | step growth 16 -> 2048 | bytes growth | step / bytes growth |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Point& first : points) {
    if (first.position != kPositions.front()) continue;
    for (const Point& last : points)
      if (last.key == first.key && last.position == kPositions.back())
        std::printf("| %s | %.2fx | %.2fx | %.2f |\n", first.key.c_str(), last.step / first.step,
                    last.bytes / first.bytes, (last.step / first.step) / (last.bytes / first.bytes));
  }
  return 0;
}
