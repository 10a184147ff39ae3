// Reader of Hugging Face tokenizer files (tokenizer.json + tokenizer_config.json) into the byte-level BPE
// tokenizer's spec (docs/tokenizer.md §2): every field it honors, and a refusal naming file, field and
// problem for every one it does not.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "models/tokenizer/bpe.hpp"

namespace samebits::io {

// `path` is a directory holding tokenizer.json (and optionally tokenizer_config.json) or the path of a
// tokenizer.json (its config is looked for beside it). Refusals are samebits::Error of kind Value.
models::tokenizer::TokenizerSpec read_tokenizer_files(const std::string& path);

// The same checks on file contents already in memory; `source` names the tokenizer.json in messages and
// `config_text` is tokenizer_config.json's text when there is one.
models::tokenizer::TokenizerSpec decode_tokenizer_json(std::string_view json_text,
                                                       std::optional<std::string_view> config_text,
                                                       const std::string& source);

}  // namespace samebits::io
