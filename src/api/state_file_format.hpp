// The saved-state container (docs/formats.md §9): a writer of named counters and float32 arrays, and a
// reader that verifies the whole file (length, magic, version, checksum, kind, fingerprint) before it
// indexes a single entry, with every size checked against the bytes before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <samebits/pin.hpp>
#include <string>
#include <vector>

namespace samebits::state_file {

// A file's kind: the position of its state in SavedStates (samebits/state_file.hpp) plus one.
using Kind = std::uint32_t;
// "TransformerState", ..., or "unknown kind N".
std::string kind_name(Kind kind);

// Applies X to every model of SavedStateModels (samebits/state_file.hpp), where the api layer instantiates
// the saved-state templates.
#define SAMEBITS_FOR_EACH_SAVED_STATE_MODEL(X) \
  X(TransformerBlockInference)                 \
  X(Mamba1BlockInference) X(Mamba2BlockInference) X(Mamba3BlockInference) X(SambaInference) X(CausalLM)

inline constexpr std::uint32_t kVersion = 2;
inline constexpr std::size_t kMaxNameBytes = 64;
inline constexpr std::size_t kMaxRank = 6;

class Writer {
 public:
  void counter(const std::string& name, std::int64_t value);
  void array(const std::string& name, const std::vector<std::int64_t>& shape, const float* data);
  // The whole file: header, entries, checksum.
  std::vector<std::uint8_t> finish(Kind kind, const std::string& fingerprint) const;

 private:
  std::string body_;
  std::uint32_t entries_ = 0;
};

class Reader {
 public:
  // Verifies and indexes `size` bytes at `data` (kept, not copied: they must outlive the reader). `source`
  // names them in every refusal ("samebits saved state <source>: <field>: <problem>").
  Reader(const unsigned char* data, std::uint64_t size, std::string source, Kind kind,
         const std::string& fingerprint);

  // A counter, refused when missing or outside [lo, hi].
  std::int64_t counter(const std::string& name, std::int64_t lo, std::int64_t hi) const;
  // Refuses unless array `name` exists with exactly `shape`.
  void expect(const std::string& name, const std::vector<std::int64_t>& shape) const;
  // Refuses any entry not named in `known` (a file from a newer writer or an edited one).
  void expect_only(const std::vector<std::string>& known) const;
  // Copies array `name` (already expected with the pin's element count) into the pin's buffer.
  void copy_into(const std::string& name, const BufferPin& pin) const;
  [[noreturn]] void refuse(const std::string& field, const std::string& problem) const;

 private:
  struct Array {
    std::vector<std::int64_t> shape;
    std::size_t offset = 0;
    std::int64_t count = 0;
  };
  const unsigned char* data_;
  std::string source_;
  std::map<std::string, std::int64_t> counters_;
  std::map<std::string, Array> arrays_;
};

// The product of `shape`, refused (through `reader`) as `field` when it overflows int64.
std::int64_t element_count(const Reader& reader, const std::string& field,
                           const std::vector<std::int64_t>& shape);

}  // namespace samebits::state_file
