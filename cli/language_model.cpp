// The commands' one face over a Samba checkpoint and a CausalLM (docs/cli.md §8), the streaming text of
// generated ids, and the sampling options every generating command shares (docs/cli.md §5).
#include "language_model.hpp"

#include <filesystem>
#include <random>
#include <samebits/errors.hpp>
#include <samebits/file_kind.hpp>

namespace samebits::cli {

bool is_model_directory(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) return false;
  if (!std::filesystem::exists(std::filesystem::path(path) / "config.json", error))
    throw_value_error("cannot read checkpoint '" + path +
                      "': it is a directory without a config.json (a Hugging Face model directory has one)");
  return true;
}

LanguageModel LanguageModel::open(const std::string& path, const std::string& command, bool with_tokenizer) {
  LanguageModel model;
  model.path_ = path;
  if (!is_model_directory(path)) {
    const FileKind kind = detect_file_kind(path, "checkpoint");
    if (kind == FileKind::SambaArchive || kind == FileKind::SambaJson) {
      model.samba_ = std::make_shared<const SambaInference>(SambaInference::from_checkpoint(path));
      return model;
    }
    if (kind != FileKind::Gguf)
      throw_value_error(path + " is " + describe_file_kind(kind) + "; " + command +
                        " wants a Samba checkpoint, a Hugging Face model directory or a GGUF file");
  }
  model.causal_lm_ = std::make_shared<const CausalLM>(CausalLM::load(path));
  if (with_tokenizer) model.tokenizer_ = std::make_shared<const Tokenizer>(Tokenizer::from_pretrained(path));
  return model;
}

std::int64_t LanguageModel::vocab() const {
  return samba_ ? samba_->config().vocab() : causal_lm_->vocab_size();
}

std::optional<std::int64_t> LanguageModel::position_limit() const {
  if (!samba_) return causal_lm_->max_positions();
  const auto& layers = samba_->config().layers();
  for (const std::string& layer : layers)
    if (layer == "attention") return 8192;  // RoPE's angle domain (docs/cli.md §6)
  return std::nullopt;
}

std::vector<std::int32_t> LanguageModel::encode(const std::string& text, bool add_special_tokens) const {
  if (samba_) {
    std::vector<std::int32_t> bytes;
    for (unsigned char c : text) bytes.push_back(c);
    return bytes;
  }
  if (!tokenizer_) throw_value_error(path_ + ": no tokenizer was loaded for text");
  return tokenizer_->encode(text, add_special_tokens, true);
}

std::vector<float> LanguageModel::forward(const IdsView& ids) const {
  return samba_ ? samba_->forward(ids) : causal_lm_->forward(ids);
}

ModelState LanguageModel::allocate_state(std::int64_t batch, std::int64_t max_tokens) const {
  if (samba_) return samba_->allocate_state(batch, max_tokens);
  return causal_lm_->allocate_state(batch, max_tokens);
}

std::vector<float> LanguageModel::forward(const IdsView& ids, ModelState& state) const {
  if (samba_) return samba_->forward(ids, std::get<SambaState>(state));
  return causal_lm_->forward(ids, std::get<CausalLMState>(state));
}

std::vector<float> LanguageModel::step(const IdsView& ids, ModelState& state) const {
  if (samba_) return samba_->step(ids, std::get<SambaState>(state));
  return causal_lm_->step(ids, std::get<CausalLMState>(state));
}

TextStream::TextStream(const LanguageModel& model) {
  if (const Tokenizer* tokenizer = model.tokenizer()) decoder_.emplace(*tokenizer, true);
}

std::string TextStream::push(std::int32_t id) {
  return decoder_ ? decoder_->push(id) : std::string(1, static_cast<char>(id));
}

std::string TextStream::finish() { return decoder_ ? decoder_->finish() : std::string(); }

CommandSpec generating_command(std::string name, std::string synopsis, std::string summary,
                               std::vector<OptionSpec> own, const std::string& stop_help,
                               std::vector<OptionSpec> tail, std::string example) {
  const std::string off = "0 = off";
  std::vector<OptionSpec> sampling = {
      {"--temperature", "", "T", "0.8", "softmax temperature; 0 = greedy (argmax)"},
      {"--top-k", "", "K", off, "keep the K most likely tokens"},
      {"--top-p", "", "P", "1.0 = off", "keep the most likely tokens up to probability mass P"},
      {"--min-p", "", "P", off, "drop tokens less likely than P times the most likely one"},
      {"--repeat-penalty", "", "R", "1.0 = off", "penalize tokens seen in the last --repeat-last-n"},
      {"--repeat-last-n", "", "N", "64", "the window of the three penalties (prompt included)"},
      {"--presence-penalty", "", "P", off, "subtract P from the logit of every token in the window"},
      {"--frequency-penalty", "", "P", off, "subtract P per occurrence in the window"},
      {"--seed", "-s", "S", "random, printed on stderr", "seed of the sampler, 0 to 2^63-1"},
      {"--stop", "", "TEXT", "none", stop_help, true},
  };
  own.insert(own.end(), sampling.begin(), sampling.end());
  own.insert(own.end(), tail.begin(), tail.end());
  return CommandSpec{std::move(name), std::move(synopsis), std::move(summary), std::move(own),
                     std::move(example)};
}

SamplerOptions parse_sampling(const Args& args) {
  SamplerOptions s;
  const auto real = [&](const char* name, const char* fallback, double lo, double hi) {
    return parse_double(args.get(name).value_or(fallback), name, lo, hi);
  };
  s.temperature = real("--temperature", "0.8", 0.0, 100.0);
  s.top_k = args.integer("--top-k", "0", 0, 1 << 20);
  s.top_p = real("--top-p", "1.0", 1e-9, 1.0);
  s.min_p = real("--min-p", "0", 0.0, 1.0);
  s.repetition_penalty = real("--repeat-penalty", "1.0", 1e-3, 1e3);
  s.penalty_last_n = args.integer("--repeat-last-n", "64", 0, 8192);
  s.presence_penalty = real("--presence-penalty", "0", -100.0, 100.0);
  s.frequency_penalty = real("--frequency-penalty", "0", -100.0, 100.0);
  if (const auto seed = args.get("--seed")) {
    s.seed = static_cast<std::uint64_t>(parse_int(*seed, "--seed", 0, INT64_MAX));
  } else {
    // 63 random bits, so every seed printed can be given back with --seed.
    std::random_device device;
    const std::uint64_t high = device(), low = device();
    s.seed = ((high << 32) ^ low) & 0x7FFFFFFFFFFFFFFFull;
  }
  return s;
}

}  // namespace samebits::cli
