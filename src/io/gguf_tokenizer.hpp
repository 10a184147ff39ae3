// The tokenizer a GGUF file carries in its metadata, translated into the byte-level BPE tokenizer's spec
// (docs/gguf.md §12): the `gpt2` model with the `gpt-2`, `llama-bpe`, `qwen2` and `smollm` pre-tokenizers,
// its special tokens, BOS/EOS, add_bos/add_eos and the chat template; every other model refused by name.
#pragma once

#include <string>

#include "io/gguf.hpp"
#include "models/tokenizer/bpe.hpp"

namespace samebits::io {

// The spec of `file`'s tokenizer; refusals are ValueErrors naming the file, the key and the problem.
models::tokenizer::TokenizerSpec gguf_tokenizer_spec(const GgufFile& file);

// The same for the GGUF file at `path`.
models::tokenizer::TokenizerSpec read_gguf_tokenizer(const std::string& path);

}  // namespace samebits::io
