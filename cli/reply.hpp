// The streaming decode loop `generate` and `chat` share: sample, print what the text stream completes
// (held back by stop strings), stop at a stop id, a stop string or the token budget, step.
#pragma once

#include <cstdint>
#include <samebits/sampler.hpp>
#include <string>
#include <vector>

#include "language_model.hpp"

namespace samebits::cli {

struct ReplyEnd {
  std::int64_t produced = 0;  // tokens sampled (a stop id and held-back stop-string bytes included)
  double seconds = 0.0;       // decoding time
  bool stop_string = false;   // ended at a --stop string
  bool stop_id = false;       // ended at an end-of-sequence / end-of-turn id
  bool open = true;           // standard output still takes writes
  std::string text;           // everything printed
};

// Continues `state` after a prefill whose last-position logits are `logits` (vocab values): at most
// `max_new` tokens, each sampled one printed through `text` and `stops`, fed back with a step unless it
// ends the reply. Every id fed to the state is appended to `fed` (the stop id and the last pick are not).
ReplyEnd stream_reply(const LanguageModel& model, ModelState& state, std::vector<float> logits,
                      Sampler& sampler, std::int64_t max_new, const std::vector<std::int32_t>& stop_ids,
                      StopStrings& stops, TextStream& text, std::vector<std::int32_t>& fed);

}  // namespace samebits::cli
