// Fuzzes the weight-dict validators of every model class (names, shapes, values; tiny dims); an accepted
// model must run a small forward and agree with its scalar twin.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <samebits/lowbit.hpp>
#include <string>
#include <vector>

#include "api/api_access.hpp"
#include "api/checks.hpp"
#include "blocks/mamba1/mamba1.hpp"
#include "blocks/mamba2/mamba2.hpp"
#include "blocks/mamba3/mamba3.hpp"
#include "blocks/transformer/transformer.hpp"
#include "fuzz_weights_support.hpp"

namespace {

using namespace samebits;
using fuzz::WeightSpec;

template <typename Table>
std::vector<WeightSpec> specs_of(const Table& table) {
  std::vector<WeightSpec> specs;
  for (const auto& t : table) specs.push_back({t.name, t.shape});
  return specs;
}

// An accepted block must compute x (1, 2, width): only a poisoned weight may make the call refuse (the
// Mamba blocks accept non-finite weights and refuse every call; a huge one may overflow an activation
// that a Mamba-3 layer then refuses), and the fast path must give the scalar twin's bits.
template <typename Forward, typename Reference>
void run_accepted(bool poisoned, Forward&& forward, Reference&& reference, const char* what) {
  std::vector<float> fast, scalar;
  const bool ran = fuzz::accepted([&] { fast = forward(); });
  fuzz::require(ran || poisoned, what);
  if (!ran) return;
  fuzz::require(fuzz::accepted([&] { scalar = reference(); }),
                "the scalar twin refused what the fast path ran");
  fuzz::require(fuzz::same_results(fast, scalar), "fast path and scalar twin disagree");
}

// run_accepted for a block's forward of x (1, 2, d_model), x small deterministic inputs.
template <typename Block>
void run_block_forward(const Block& model, std::int64_t d_model, bool poisoned, const char* what) {
  const std::vector<float> x = fuzz::small_inputs(2 * d_model);
  const TensorView view{x.data(), {1, 2, d_model}};
  run_accepted(
      poisoned, [&] { return model.forward(view); }, [&] { return model.forward_reference(view); }, what);
}

std::optional<std::int64_t> maybe(FuzzedDataProvider& in, std::int64_t usual) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      return std::nullopt;
    case 1:
      return in.ConsumeIntegralInRange<std::int64_t>(-2, 9);
    default:
      return usual;
  }
}

void transformer(FuzzedDataProvider& in) {
  blocks::TransformerDims dims;
  dims.n_heads = in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  dims.n_kv_heads = in.ConsumeBool() ? dims.n_heads : 1;
  dims.head_dim = 2 * in.ConsumeIntegralInRange<std::int64_t>(1, 2);
  dims.d_model = dims.n_heads * dims.head_dim;
  dims.intermediate = in.ConsumeIntegralInRange<std::int64_t>(1, 6);
  dims.window = in.ConsumeIntegralInRange<std::int64_t>(0, 3);
  TransformerOptions options;
  options.n_heads = maybe(in, dims.n_heads).value_or(0);
  options.n_kv_heads = in.ConsumeBool() ? maybe(in, dims.n_kv_heads) : std::nullopt;
  options.head_dim = in.ConsumeBool() ? maybe(in, dims.head_dim) : std::nullopt;
  options.window = maybe(in, dims.window).value_or(-1);
  fuzz::WeightDict dict = fuzz::make_weight_dict(in, specs_of(blocks::transformer_tensors(dims)));
  std::optional<TransformerBlockInference> model;
  if (!fuzz::accepted([&] { model.emplace(dict.views, options); })) return;
  // The transformer refuses non-finite weights when it is built, so every call must run.
  run_block_forward(*model, model->d_model(), false,
                    "an accepted TransformerBlockInference refused a valid forward");
}

void mamba1(FuzzedDataProvider& in) {
  const auto dims = blocks::Mamba1Dims::for_d_model(in.ConsumeIntegralInRange<std::int64_t>(1, 6));
  std::vector<WeightSpec> specs;
  for (const auto& t : blocks::mamba1_tensors(dims))
    specs.push_back({t.name, !t.alt_shape.empty() && in.ConsumeBool() ? t.alt_shape : t.shape});
  fuzz::WeightDict dict = fuzz::make_weight_dict(in, specs);
  std::optional<Mamba1BlockInference> model;
  if (!fuzz::accepted([&] { model.emplace(dict.views); })) return;
  run_block_forward(*model, model->d_model(), dict.poisoned,
                    "an accepted Mamba1BlockInference with finite weights refused a valid forward");
}

void mamba2(FuzzedDataProvider& in) {
  std::vector<WeightSpec> specs;
  for (const auto& t : blocks::mamba2_tensors(blocks::Mamba2Dims::for_d_model(32)))
    specs.push_back({t.name, !t.alt_shape.empty() && in.ConsumeBool() ? t.alt_shape : t.shape});
  fuzz::WeightDict dict = fuzz::make_weight_dict(in, specs);
  double lo = 0.0, hi = std::numeric_limits<double>::infinity();
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    lo = in.PickValueInArray({-1.0, 0.0, 1e-3, 0.5, 1e300, std::numeric_limits<double>::quiet_NaN()});
    hi = in.PickValueInArray({0.0, 0.1, 1.0, 1e300, std::numeric_limits<double>::infinity(),
                              -std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN()});
  }
  std::optional<Mamba2BlockInference> model;
  if (!fuzz::accepted([&] { model.emplace(dict.views, lo, hi); })) return;
  run_block_forward(*model, model->d_model(), dict.poisoned,
                    "an accepted Mamba2BlockInference with finite weights refused a valid forward");
}

void mamba3(FuzzedDataProvider& in) {
  fuzz::WeightDict dict =
      fuzz::make_weight_dict(in, specs_of(blocks::mamba3_tensors(blocks::Mamba3Dims::of(32))));
  std::optional<Mamba3BlockInference> model;
  if (!fuzz::accepted([&] { model.emplace(dict.views); })) return;
  run_block_forward(*model, model->d_model(), dict.poisoned,
                    "an accepted Mamba3BlockInference with finite weights refused a valid forward");
}

void samba(FuzzedDataProvider& in) {
  models::SambaConfigArgs args;
  args.vocab = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegral<std::int64_t>()
                                                          : in.ConsumeIntegralInRange<std::int64_t>(1, 6);
  args.d_model = in.PickValueInArray<std::int64_t>({4, 8, 32, 32, 0, -32, std::int64_t{1} << 40});
  const int layers = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < layers; ++i)
    args.layers.push_back(
        in.PickValueInArray<std::string>({"mamba3", "attention", "attention", "mamba2", ""}));
  args.n_heads = maybe(in, 2);
  args.n_kv_heads = in.ConsumeBool() ? maybe(in, 1) : std::nullopt;
  args.head_dim = in.ConsumeBool() ? maybe(in, 2) : std::nullopt;
  args.intermediate = maybe(in, 4);
  args.tie_embeddings = in.ConsumeBool();
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) args.norm_eps = in.ConsumeFloatingPoint<double>();
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) args.dropout = in.ConsumeFloatingPoint<double>();
  std::optional<models::SambaConfig> config;
  if (!fuzz::accepted([&] { config.emplace(args); })) return;
  std::optional<models::SambaRegistry> registry;
  if (!fuzz::accepted([&] { registry.emplace(config->registry()); })) return;
  std::vector<WeightSpec> specs;
  // A config too large to back honestly gets one-float tensors: refused by shape, never allocated for.
  const bool honest = registry->exact && registry->total <= fuzz::kMaxTensorFloats;
  for (const auto& entry : registry->entries)
    specs.push_back({entry.name, honest ? entry.shape : std::vector<std::int64_t>{1}});
  fuzz::WeightDict dict = fuzz::make_weight_dict(in, specs);
  std::optional<SambaInference> model;
  if (!fuzz::accepted([&] { model.emplace(*config, dict.views); })) return;
  fuzz::require(honest && !dict.non_finite, "SambaInference accepted weights that do not fill its registry");
  const std::int32_t ids[2] = {0, static_cast<std::int32_t>(config->vocab() - 1)};
  run_accepted(
      dict.poisoned,
      [&] {
        return model->forward(IdsView{ids, 1, 2});
      },
      [&] {
        return model->forward_reference(IdsView{ids, 1, 2});
      },
      "an accepted SambaInference refused a valid forward");
}

void mlp(FuzzedDataProvider& in) {
  const std::vector<WeightSpec> specs = {
      {"weight1", {16, 8}}, {"bias1", {16}}, {"weight2", {3, 16}}, {"bias2", {3}}};
  fuzz::WeightDict dict = fuzz::make_weight_dict(in, specs);
  if (dict.views.size() < 4) return;
  std::optional<MLPInference> model;
  if (in.ConsumeBool()) {
    if (!fuzz::accepted([&] {
          model.emplace(dict.views[0].second, dict.views[1].second, dict.views[2].second,
                        dict.views[3].second);
        }))
      return;
  } else {
    // Packed matrices: each in a fuzzed format, now and then with a vector cut short.
    auto pack = [&](const TensorView& view) {
      // A (rows, cols) shape packs as itself; any other (or a negative dimension) as one row of its floats.
      const auto& shape = view.shape;
      const bool matrix = shape.size() == 2 && shape[0] >= 0 && shape[1] >= 0;
      const std::size_t rows = matrix ? static_cast<std::size_t>(shape[0]) : 1;
      const std::size_t cols =
          matrix ? static_cast<std::size_t>(shape[1]) : static_cast<std::size_t>(fuzz::claimed_floats(shape));
      lowbit::PackedMatrix packed = lowbit::pack_matrix(
          view.data, rows, cols,
          in.PickValueInArray(
              {lowbit::WeightFormat::Float32, lowbit::WeightFormat::BFloat16, lowbit::WeightFormat::Int8}));
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
        if (!packed.codes.empty()) packed.codes.pop_back();
        if (!packed.bf16_bits.empty()) packed.bf16_bits.pop_back();
        if (!packed.f32.empty()) packed.f32.pop_back();
      }
      return packed;
    };
    const lowbit::PackedMatrix w1 = pack(dict.views[0].second), w2 = pack(dict.views[2].second);
    if (!fuzz::accepted([&] { model.emplace(w1, dict.views[1].second, w2, dict.views[3].second); })) return;
  }
  const std::vector<float> x = fuzz::small_inputs(16);
  const TensorView view{x.data(), {2, 8}};
  run_accepted(
      dict.poisoned, [&] { return model->predict_logits(view); },
      [&] { return model->predict_logits_reference(view); },
      "an accepted MLPInference refused a valid batch");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return samebits::fuzz::initialize_single_threaded(); }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  static void (*const cases[])(FuzzedDataProvider&) = {transformer, mamba1, mamba2, mamba3, samba, mlp};
  fuzz::run_one_of(in, cases);
  return 0;
}
