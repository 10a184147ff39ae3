// File-kind detection (include/samebits/file_kind.hpp): every kind from its first bytes, one sentence for
// missing, directory and unreadable paths, and the "PATH is a <kind>; <command> wants ..." refusal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <samebits/file_kind.hpp>
#include <stdexcept>
#include <string>

namespace samebits {
namespace {

namespace fs = std::filesystem;

class FileKindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("samebits-file-kind-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }
  fs::path dir_;
};

TEST_F(FileKindTest, ShippedCheckpoints) {
  const std::string root = SAMEBITS_SOURCE_DIR;
  EXPECT_EQ(detect_file_kind(root + "/assets/default-model/samba-kjv.ckpt"), FileKind::SambaArchive);
  EXPECT_EQ(detect_file_kind(root + "/assets/mlp-demo.ckpt"), FileKind::MlpCheckpoint);
}

TEST_F(FileKindTest, EveryKindFromItsBytes) {
  EXPECT_EQ(detect_file_kind(write("a", std::string("MOJOLEARN-SAMBA\x02\n", 17) + "\xff\xff")),
            FileKind::SambaArchive);
  EXPECT_EQ(
      detect_file_kind(write("b", "{\"arrays\":[],\"schema\":\"mojolearn.samba-stack-json-checkpoint.v1\"}")),
      FileKind::SambaJson);
  EXPECT_EQ(detect_file_kind(write("c", "{\"payload\":{},\"schema\":\"mojolearn.small-mlp-checkpoint.v1\"}")),
            FileKind::MlpCheckpoint);
  EXPECT_EQ(detect_file_kind(write("d", std::string("\x0e\0\0\0\0\0\0\0{\"__metadata__\":{}}", 23))),
            FileKind::Safetensors);
  EXPECT_EQ(detect_file_kind(write("e", std::string("GGUF\x03\0\0\0", 8))), FileKind::Gguf);
  EXPECT_EQ(detect_file_kind(write("f", "  {\"hello\": 1}\n")), FileKind::Json);
  EXPECT_EQ(detect_file_kind(write("g", "In the beginning\tGod created\r\nthe heaven.\n")), FileKind::Text);
  EXPECT_EQ(detect_file_kind(write("h", "")), FileKind::Empty);
  EXPECT_EQ(detect_file_kind(write("i", std::string("\x7f"
                                                    "ELF\x02\x01\0",
                                                    7))),
            FileKind::Binary);
}

TEST_F(FileKindTest, UnreadablePathsGetOneSentence) {
  const std::string missing = (dir_ / "missing.ckpt").string();
  try {
    detect_file_kind(missing, "checkpoint");
    FAIL() << "no refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read checkpoint '" + missing + "': No such file or directory");
  }
  try {
    detect_file_kind(dir_.string());
    FAIL() << "no refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read file '" + dir_.string() + "': it is a directory");
  }
  if (::geteuid() != 0) {  // root reads every file
    const std::string locked = write("locked", "text");
    fs::permissions(locked, fs::perms::none);
    EXPECT_THROW(detect_file_kind(locked), std::runtime_error);
  }
}

TEST_F(FileKindTest, WrongKindNamesBoth) {
  const std::string text = write("notes.txt", "just words\n");
  try {
    require_file_kind(text, "generate", {FileKind::SambaArchive, FileKind::SambaJson}, "a Samba checkpoint");
    FAIL() << "no refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), text + " is a text file; generate wants a Samba checkpoint");
  }
  EXPECT_EQ(require_file_kind(text, "eval", {FileKind::Text}, "text"), FileKind::Text);
  EXPECT_EQ(describe_file_kind(FileKind::MlpCheckpoint), "an MLP checkpoint");
}

}  // namespace
}  // namespace samebits

namespace samebits {
namespace {

// The bytes-only judgement the path version delegates to (and fuzz_file_kind checks against it).
TEST(FileKindBytes, ClassifiesHeadAndTail) {
  EXPECT_EQ(classify_file_bytes("", ""), FileKind::Empty);
  EXPECT_EQ(classify_file_bytes("GGUF\x03", ""), FileKind::Gguf);
  EXPECT_EQ(classify_file_bytes("MOJOLEARN-SAMBA\x02\n", ""), FileKind::SambaArchive);
  EXPECT_EQ(classify_file_bytes(std::string("\x02\0\0\0\0\0\0\0{}", 10), ""), FileKind::Safetensors);
  EXPECT_EQ(classify_file_bytes(" {\"a\":1}", ""), FileKind::Json);
  EXPECT_EQ(classify_file_bytes("{\"x\":1", "\"schema\":\"mojolearn.samba-stack-json-checkpoint.v1\"}"),
            FileKind::SambaJson);
  EXPECT_EQ(classify_file_bytes("{\"payload\":{\"architecture\":[8]}}", ""), FileKind::MlpCheckpoint);
  EXPECT_EQ(classify_file_bytes("plain text\n", ""), FileKind::Text);
  EXPECT_EQ(classify_file_bytes(std::string("\0\1", 2), ""), FileKind::Binary);
}

}  // namespace
}  // namespace samebits
