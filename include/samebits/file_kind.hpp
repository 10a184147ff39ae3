// What kind of file a path holds, judged from its first and last bytes (no full parse), so that every
// file-taking entry point can say "PATH is a <kind>; <command> wants a <kind>" (docs/cli.md §4).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace samebits {

// The kinds told apart; a file of a known kind may still fail its reader's checks.
enum class FileKind {
  SambaArchive,   // streamed Samba checkpoint (v2 archive, "MOJOLEARN-SAMBA" magic)
  SambaJson,      // legacy Samba JSON checkpoint
  MlpCheckpoint,  // SmallMLPTrainer JSON checkpoint
  Safetensors,    // safetensors file (8-byte header length, then a JSON header)
  Gguf,           // GGUF file ("GGUF" magic)
  Json,           // JSON document of no known schema
  Text,           // text: no NUL byte and no other control byte but tab, newline, carriage return, form feed
  Empty,          // zero bytes
  Binary,         // anything else
};

// The kind of the file at `path`. A missing, directory or unreadable path throws samebits::Error (a
// ValueError in Python) with one sentence: "cannot read <noun> 'PATH': <reason>".
FileKind detect_file_kind(const std::string& path, const std::string& noun = "file");

// The same judgement on bytes already read: `head` the file's first bytes (up to 4096 are looked at) and
// `tail` its last (up to 256; only a file starting with '{' needs them).
FileKind classify_file_bytes(std::string_view head, std::string_view tail);

// The kind with its article, for messages: "a Samba checkpoint (v2 archive)", "an MLP checkpoint", ...
std::string describe_file_kind(FileKind kind);

// detect_file_kind, then throws samebits::Error "PATH is <kind>; <command> wants <wanted_text>" unless the
// kind is one of `wanted`. Returns the kind.
FileKind require_file_kind(const std::string& path, const std::string& command,
                           const std::vector<FileKind>& wanted, const std::string& wanted_text,
                           const std::string& noun = "file");

}  // namespace samebits
