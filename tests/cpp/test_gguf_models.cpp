// GGUF files as models and tokenizers (docs/gguf.md §10-§12): the Q/K row order undone on the spec's example,
// a tokenizer from metadata (smollm digits, BOS, special tokens, the chat template through the public API),
// and refusals naming the file and the key. The bitwise model equivalences live in test_gguf_models.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <samebits/errors.hpp>
#include <samebits/tokenizer.hpp>
#include <string>
#include <vector>

#include "gguf_builder.hpp"
#include "io/gguf.hpp"
#include "io/gguf_model.hpp"
#include "io/gguf_tokenizer.hpp"
#include "models/tokenizer/bpe.hpp"

namespace samebits {
namespace {

using testing::Builder;
using testing::put;
using testing::put_str;

TEST(GgufModel, UnpermuteRestoresTheRotateHalfOrder) {
  // Per head of 8 rows the file stores original rows [0, 4, 1, 5, 2, 6, 3, 7] (docs/gguf.md §11).
  const std::vector<int> stored_order{0, 4, 1, 5, 2, 6, 3, 7};
  std::vector<float> values;
  for (int head = 0; head < 2; ++head)
    for (int r : stored_order)
      for (int c = 0; c < 3; ++c) values.push_back(static_cast<float>(100 * head + 10 * r + c));
  io::unpermute_rope_rows(values, 2, 8, 3);
  for (int head = 0; head < 2; ++head)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(values[static_cast<std::size_t>((head * 8 + r) * 3 + c)],
                  static_cast<float>(100 * head + 10 * r + c));
}

std::string string_array(const std::vector<std::string>& items) {
  std::string out;
  put(out, 8, 4);
  put(out, items.size(), 8);
  for (const std::string& s : items) put_str(out, s);
  return out;
}

Builder vocab_builder(const std::string& model) {
  Builder b;
  b.kv_str("general.architecture", "llama").kv_str("tokenizer.ggml.model", model);
  b.kv_str("tokenizer.ggml.pre", "smollm");
  b.kv("tokenizer.ggml.tokens", 9, string_array({"a", "b", "ab", "\xC4\xA0", "1", "2", "<|s|>"}));
  std::string types;
  put(types, 5, 4);
  put(types, 7, 8);
  for (int t : {1, 1, 1, 1, 1, 1, 3}) put(types, static_cast<std::uint32_t>(t), 4);
  b.kv("tokenizer.ggml.token_type", 9, types);
  b.kv("tokenizer.ggml.merges", 9, string_array({"a b"}));
  b.kv_u32("tokenizer.ggml.bos_token_id", 6).kv_u32("tokenizer.ggml.eos_token_id", 6);
  b.kv("tokenizer.ggml.add_bos_token", 7, std::string(1, '\1'));
  b.kv_str("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
  return b;
}

TEST(GgufTokenizer, SmollmDigitsSpecialsAndBos) {
  const io::GgufFile file("t.gguf", vocab_builder("gpt2").build());
  models::tokenizer::BpeTokenizer tok(io::gguf_tokenizer_spec(file));
  EXPECT_EQ(tok.encode("ab 12", true, true), (std::vector<std::int32_t>{6, 2, 3, 4, 5}));
  EXPECT_EQ(tok.encode("a<|s|>b", false, true), (std::vector<std::int32_t>{0, 6, 1}));
  EXPECT_TRUE(tok.is_special(6));
  EXPECT_EQ(tok.decode_bytes(std::vector<std::int32_t>{2, 3, 4}, false), "ab 1");
}

TEST(GgufTokenizer, ChatTemplateThroughThePublicApi) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("samebits_gguf_vocab_" + std::to_string(getpid()) + ".gguf");
  {
    std::ofstream out(path, std::ios::binary);
    out << vocab_builder("gpt2").build();
  }
  const Tokenizer tok = Tokenizer::from_pretrained(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(tok.chat_template().has_value());
  EXPECT_EQ(*tok.chat_template(), "{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_EQ(tok.bos_ids(), (std::vector<std::int32_t>{6}));
  EXPECT_EQ(tok.encode("b1", false), (std::vector<std::int32_t>{1, 4}));
}

TEST(GgufTokenizer, RefusalsNameTheFileAndTheKey) {
  auto refusal = [](const std::string& bytes) {
    try {
      (void)io::gguf_tokenizer_spec(io::GgufFile("t.gguf", bytes));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Value);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(
      refusal(vocab_builder("llama").build()).find("t.gguf: tokenizer.ggml.model 'llama' is a SentencePiece"),
      std::string::npos);
  Builder b;
  b.kv_str("general.architecture", "llama");
  EXPECT_NE(refusal(b.build()).find("holds no tokenizer"), std::string::npos);
  b.kv_str("tokenizer.ggml.model", "gpt2").kv_u32("tokenizer.ggml.pre", 3);
  EXPECT_NE(refusal(b.build()).find("key 'tokenizer.ggml.pre' is UINT32, not STRING"), std::string::npos);
}

TEST(GgufModel, RefusesAMambaFileByName) {
  Builder b;
  b.kv_str("general.architecture", "mamba");
  try {
    io::GgufModel model("m.gguf", b.build());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.gguf: architecture 'mamba' is refused by name"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace samebits
