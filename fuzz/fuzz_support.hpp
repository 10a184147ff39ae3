// Shared pieces of the libFuzzer harnesses: the refusal rule, in-memory files and digest repair.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <samebits/errors.hpp>
#include <samebits/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "core/thread_pool.hpp"
#include "io/sha256.hpp"

namespace samebits::fuzz {

// The one rule of every harness: a refusal is a samebits::Error. Any other exception escapes to
// libFuzzer (reported as a crash with a reproducer), and so does every sanitizer finding.
// With FUZZ_VERBOSE set, each refusal's message goes to stderr (to read what a reproducer hits).
template <typename Body>
bool accepted(Body&& body) {
  static const bool verbose = std::getenv("FUZZ_VERBOSE") != nullptr;
  try {
    body();
    return true;
  } catch (const samebits::Error& refusal) {
    if (verbose) std::fprintf(stderr, "refused: %s\n", refusal.what());
    return false;
  }
}

// A property that must hold: a violation aborts so libFuzzer keeps the input.
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
  }
}

// Runs `body` on the input, then once more on repair(input) (digests made honest) when that differs, so
// mutations also reach the checks that stand behind the hashes.
template <typename Body, typename Repair>
void with_honest_retry(std::string_view bytes, Body&& body, Repair&& repair) {
  body(bytes);
  if (auto honest = repair(bytes); honest && *honest != bytes) body(std::string_view(*honest));
}

// One worker thread: the bits never depend on the count, and a single thread keeps each run short and
// the reports readable.
inline void single_threaded() { samebits::set_num_threads(1); }

// What LLVMFuzzerInitialize returns in a harness whose only set-up is that one worker thread.
inline int initialize_single_threaded() {
  single_threaded();
  return 0;
}

// The bytes as a file the path-taking readers can open, without touching the disk: an anonymous memfd
// reached through /proc/self/fd/N.
class MemFile {
 public:
  explicit MemFile(std::string_view bytes) : fd_(memfd_create("samebits-fuzz", 0)) {
    require(fd_ >= 0, "memfd_create failed");
    for (std::size_t done = 0; done < bytes.size();) {
      ssize_t wrote = write(fd_, bytes.data() + done, bytes.size() - done);
      require(wrote > 0, "write to memfd failed");
      done += static_cast<std::size_t>(wrote);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  ~MemFile() { close(fd_); }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// An object member replaced (or appended) by key; the object's other members keep their order.
inline json::Value with_member(const json::Value& object, std::string_view key, json::Value value) {
  json::Value::Object members = object.as_object();
  const std::u32string wide = json::from_ascii(key);
  for (auto& member : members) {
    if (member.first == wide) {
      member.second = std::move(value);
      return json::Value::make_object(std::move(members));
    }
  }
  members.emplace_back(wide, std::move(value));
  return json::Value::make_object(std::move(members));
}

// A JSON envelope {"payload": ..., "payload_sha256": ...} (the legacy Samba file and the MLP checkpoint)
// re-encoded canonically with its digest recomputed, plus the final newline; nothing when the text is
// not such an object. Mutated payloads then reach the checks behind the integrity check.
inline std::optional<std::string> honest_payload_envelope(std::string_view text) {
  std::optional<std::string> out;
  accepted([&] {
    json::Value envelope = json::parse(text);
    if (!envelope.is_object() || envelope.find("payload") == nullptr) return;
    const std::string digest = io::sha256_hex(json::canonical_json(*envelope.find("payload")));
    envelope = with_member(envelope, "payload_sha256", json::Value::make_string_ascii(digest));
    out = json::canonical_json(envelope) + "\n";
  });
  return out;
}

// A v2 Samba archive with an honest canonical header: each array descriptor's sha256 recomputed over the
// body bytes its nbytes claims (in order), the header re-encoded canonically, its length and digest
// rewritten. Nothing when the bytes have no magic, length and parseable header.
inline std::optional<std::string> honest_samba_stream(std::string_view bytes) {
  constexpr std::size_t kMagic = 17, kLength = 8, kDigest = 32;
  if (bytes.size() < kMagic + kLength) return std::nullopt;
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[kMagic + i]);
  const std::size_t header_at = kMagic + kLength;
  if (length == 0 || length > bytes.size() - header_at) return std::nullopt;
  const std::string_view header = bytes.substr(header_at, length);
  const std::size_t body_at = std::min(bytes.size(), header_at + length + kDigest);
  const std::string_view body = bytes.substr(body_at);
  std::optional<std::string> out;
  accepted([&] {
    json::Value envelope = json::parse(header);
    const json::Value* arrays = envelope.is_object() ? envelope.find("arrays") : nullptr;
    if (arrays != nullptr && arrays->is_array()) {
      json::Value::Array fixed = arrays->as_array();
      std::size_t at = 0;
      for (json::Value& descriptor : fixed) {
        const json::Value* nbytes = descriptor.is_object() ? descriptor.find("nbytes") : nullptr;
        std::optional<std::int64_t> count =
            nbytes != nullptr && nbytes->is_integer() ? nbytes->as_int64() : std::nullopt;
        if (!count || *count < 0 || static_cast<std::uint64_t>(*count) > body.size() - at) break;
        const std::string digest = io::sha256_hex(body.substr(at, static_cast<std::size_t>(*count)));
        descriptor = with_member(descriptor, "sha256", json::Value::make_string_ascii(digest));
        at += static_cast<std::size_t>(*count);
      }
      envelope = with_member(envelope, "arrays", json::Value::make_array(std::move(fixed)));
    }
    const std::string canonical = json::canonical_json(envelope);
    std::string file(bytes.substr(0, kMagic));
    for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((canonical.size() >> (8 * i)) & 0xFF));
    file += canonical;
    const io::Sha256Digest digest = io::sha256(canonical);
    file.append(reinterpret_cast<const char*>(digest.data()), digest.size());
    file += body;
    out = std::move(file);
  });
  return out;
}

}  // namespace samebits::fuzz
