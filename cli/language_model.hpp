// One face for the two kinds of language model the commands run (docs/cli.md §8): a byte-level Samba
// checkpoint, whose tokens are bytes, and a CausalLM opened through CausalLM::load and
// Tokenizer::from_pretrained (a Hugging Face directory, or any path those accept).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <samebits/causal_lm.hpp>
#include <samebits/samba.hpp>
#include <samebits/sampler.hpp>
#include <samebits/tokenizer.hpp>
#include <string>
#include <variant>
#include <vector>

#include "cli.hpp"

namespace samebits::cli {

// True for a directory holding config.json (a Hugging Face model); false for a file; refuses a directory
// without one ("cannot read checkpoint 'PATH': it is a directory ...").
bool is_model_directory(const std::string& path);

// A carried decode state of either kind.
using ModelState = std::variant<SambaState, CausalLMState>;

class LanguageModel {
 public:
  // Opens `path` for `command`: a Samba checkpoint (by its file kind), else a CausalLM; `with_tokenizer`
  // also loads the tokenizer (required for text). Refusals are samebits::Error naming the path.
  static LanguageModel open(const std::string& path, const std::string& command, bool with_tokenizer);

  const std::string& path() const { return path_; }
  // True for a Samba checkpoint (tokens are bytes); false for a CausalLM.
  bool byte_level() const { return samba_ != nullptr; }
  std::int64_t vocab() const;
  // The most positions one sequence may span, nullopt for none.
  std::optional<std::int64_t> position_limit() const;
  const SambaInference* samba() const { return samba_.get(); }
  const CausalLM* causal_lm() const { return causal_lm_.get(); }
  // The tokenizer (a CausalLM opened with_tokenizer), else nullptr.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }

  // The ids of text: its bytes for a Samba model; the tokenizer's ids (special tokens parsed) otherwise.
  std::vector<std::int32_t> encode(const std::string& text, bool add_special_tokens) const;

  // Stateless logits (B, L, vocab).
  std::vector<float> forward(const IdsView& ids) const;
  ModelState allocate_state(std::int64_t batch, std::int64_t max_tokens) const;
  // Carried forward (B, L, vocab) and step (B, vocab).
  std::vector<float> forward(const IdsView& ids, ModelState& state) const;
  std::vector<float> step(const IdsView& ids, ModelState& state) const;

 private:
  std::string path_;
  std::shared_ptr<const SambaInference> samba_;
  std::shared_ptr<const CausalLM> causal_lm_;
  std::shared_ptr<const Tokenizer> tokenizer_;
};

// Text out of generated ids as it completes: bytes for a Samba model, the tokenizer's stream decoder
// (special tokens left out) for a CausalLM.
class TextStream {
 public:
  explicit TextStream(const LanguageModel& model);
  std::string push(std::int32_t id);
  std::string finish();

 private:
  std::optional<TokenStreamDecoder> decoder_;
};

// A generating command's spec: its own options, then the sampling options (--temperature ... --seed,
// docs/cli.md §5) and the repeatable --stop (`stop_help`), then `tail` options.
CommandSpec generating_command(std::string name, std::string synopsis, std::string summary,
                               std::vector<OptionSpec> own, const std::string& stop_help,
                               std::vector<OptionSpec> tail, std::string example);
// Those options as parsed; a missing --seed draws a random one.
SamplerOptions parse_sampling(const Args& args);

}  // namespace samebits::cli
