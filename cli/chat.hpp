// The chat template of a model as the commands use it: its native renderer and the ids that end a reply.
#pragma once

#include <cstdint>
#include <samebits/chat_template.hpp>
#include <samebits/tokenizer.hpp>
#include <string>
#include <vector>

namespace samebits::cli {

struct ChatSetup {
  ChatTemplate format;                 // the model's template, recognized (docs/tokenizer.md §10)
  std::vector<std::int32_t> stop_ids;  // end-of-sequence and end-of-turn ids
};

// Refuses a model without a tokenizer (nullptr) or without a chat template, and a template of another
// family; `path` names the model in refusals.
ChatSetup chat_setup(const Tokenizer* tokenizer, const std::string& path);

}  // namespace samebits::cli
