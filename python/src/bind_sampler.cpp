// Binding of the shared sampler (include/samebits/sampler.hpp), of a Samba generation loop over it, and of
// file-kind detection (include/samebits/file_kind.hpp); samebits/_samba.py builds generate() on these.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <samebits/file_kind.hpp>
#include <samebits/samebits.hpp>
#include <samebits/sampler.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"

namespace nb = nanobind;

namespace samebits::python {
namespace {

using LogitsIn = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

SamplerOptions options_from(double temperature, std::int64_t top_k, double top_p, double min_p,
                            double repetition_penalty, std::int64_t repetition_window,
                            double presence_penalty, double frequency_penalty, std::uint64_t seed) {
  const SamplerOptions o{.temperature = temperature,
                         .top_k = top_k,
                         .top_p = top_p,
                         .min_p = min_p,
                         .repetition_penalty = repetition_penalty,
                         .penalty_last_n = repetition_window,
                         .presence_penalty = presence_penalty,
                         .frequency_penalty = frequency_penalty,
                         .seed = seed};
  check_sampler_options(o, "samebits SambaInference.generate");
  return o;
}

// Prefill, then one sampled token per step through a private state. For a byte-level model (vocab 256) the
// tokens are bytes and stop strings apply; next() returns the token and the bytes now safe to release.
class SambaGeneration {
 public:
  SambaGeneration(const SambaInference& model, std::vector<std::int32_t> prompt, std::int64_t max_new_tokens,
                  const SamplerOptions& options, std::vector<std::string> stops)
      : model_(model),
        vocab_(model.config().vocab()),
        prompt_(std::move(prompt)),
        max_new_(max_new_tokens),
        sampler_(options),
        stops_(std::move(stops)),
        state_(model.allocate_state(1, static_cast<std::int64_t>(prompt_.size()) + max_new_tokens)) {
    for (std::int32_t id : prompt_) sampler_.accept(id);
  }

  // The next token and the bytes it releases, or nothing once max_new_tokens or a stop string is reached.
  std::optional<std::pair<std::int32_t, std::string>> next() {
    if (produced_ == max_new_ || stops_.stopped()) return std::nullopt;
    std::vector<float> logits;
    if (produced_ == 0) {
      const auto length = static_cast<std::int64_t>(prompt_.size());
      logits = model_.forward({prompt_.data(), 1, length}, state_);
      logits.erase(logits.begin(), logits.end() - vocab_);
    } else {
      logits = model_.step({&last_, 1, 1}, state_);
    }
    last_ = sampler_.sample_and_accept(logits.data(), vocab_);
    ++produced_;
    std::string released;
    if (vocab_ == 256) released = stops_.push(static_cast<char>(last_));
    return std::make_pair(last_, std::move(released));
  }

  // The bytes still held back by a possible stop string (empty after a completed one).
  std::string flush() { return stops_.stopped() ? std::string() : stops_.flush(); }

  // Everything at once: every token produced and every byte released (flush included).
  std::pair<std::vector<std::int32_t>, nb::bytes> run() {
    std::vector<std::int32_t> tokens;
    std::string text;
    {
      nb::gil_scoped_release release;
      while (auto piece = next()) {
        tokens.push_back(piece->first);
        text += piece->second;
      }
      text += flush();
    }
    return {std::move(tokens), nb::bytes(text.data(), text.size())};
  }

  std::int64_t produced() const { return produced_; }
  bool stopped() const { return stops_.stopped(); }
  std::uint64_t seed() const { return sampler_.options().seed; }

 private:
  const SambaInference& model_;
  std::int64_t vocab_;
  std::vector<std::int32_t> prompt_;
  std::int64_t max_new_;
  Sampler sampler_;
  StopStrings stops_;
  SambaState state_;
  std::int32_t last_ = 0;
  std::int64_t produced_ = 0;
};

void bind_sampler(nb::module_& m) {
  nb::class_<Sampler>(m, "SamplerEngine")
      .def(
          "__init__",
          [](Sampler* self, double temperature, std::int64_t top_k, double top_p, double min_p,
             double repetition_penalty, std::int64_t repetition_window, double presence_penalty,
             double frequency_penalty, std::uint64_t seed) {
            new (self) Sampler(options_from(temperature, top_k, top_p, min_p, repetition_penalty,
                                            repetition_window, presence_penalty, frequency_penalty, seed));
          },
          nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("min_p"),
          nb::arg("repetition_penalty"), nb::arg("repetition_window"), nb::arg("presence_penalty"),
          nb::arg("frequency_penalty"), nb::arg("seed"))
      .def("accept", &Sampler::accept, nb::arg("token"))
      .def(
          "sample",
          [](Sampler& self, const LogitsIn& logits) {
            const auto vocab = static_cast<std::int64_t>(logits.shape(0));
            for (std::int64_t u = 0; u < vocab; ++u)
              if (!(logits.data()[u] - logits.data()[u] == 0.0f))
                throw_value_error("samebits Sampler.sample: logits must be finite (index " +
                                  std::to_string(u) + ")");
            return self.sample(logits.data(), vocab);
          },
          nb::arg("logits"))
      .def("copy", [](const Sampler& self) { return Sampler(self); })
      .def_prop_ro("window", [](const Sampler& self) { return self.window(); });

  nb::class_<SambaGeneration>(m, "SambaGeneration")
      .def(
          "__init__",
          [](SambaGeneration* self, const SambaInference& model, std::vector<std::int32_t> prompt,
             std::int64_t max_new_tokens, const Sampler& sampler, const std::vector<nb::bytes>& stops) {
            std::vector<std::string> texts;
            for (const nb::bytes& s : stops) texts.emplace_back(s.c_str(), s.size());
            new (self) SambaGeneration(model, std::move(prompt), max_new_tokens, sampler.options(),
                                       std::move(texts));
          },
          nb::arg("model"), nb::arg("prompt"), nb::arg("max_new_tokens"), nb::arg("sampler"),
          nb::arg("stops"), nb::keep_alive<1, 2>())
      .def("next",
           [](SambaGeneration& self) -> nb::object {
             std::optional<std::pair<std::int32_t, std::string>> piece;
             {
               nb::gil_scoped_release release;
               piece = self.next();
             }
             if (!piece) return nb::none();
             return nb::make_tuple(piece->first, nb::bytes(piece->second.data(), piece->second.size()));
           })
      .def("flush",
           [](SambaGeneration& self) {
             const std::string rest = self.flush();
             return nb::bytes(rest.data(), rest.size());
           })
      .def("run", &SambaGeneration::run)
      .def_prop_ro("produced", &SambaGeneration::produced)
      .def_prop_ro("stopped", &SambaGeneration::stopped)
      .def_prop_ro("seed", &SambaGeneration::seed);

  m.def(
      "file_kind",
      [](const std::string& path, const std::string& noun) {
        const FileKind kind = detect_file_kind(path, noun);
        return std::make_pair(static_cast<int>(kind), describe_file_kind(kind));
      },
      nb::arg("path"), nb::arg("noun") = "file");
}

const Registration kRegistration{&bind_sampler, 80};

}  // namespace
}  // namespace samebits::python
