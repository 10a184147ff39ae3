// Test support for GGUF files: a writer that lays a file out as gguf-py's GGUFWriter does, with the pieces
// (metadata, tensor infos, data) kept editable for refusal tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace samebits::testing {

inline void put(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline void put_str(std::string& out, const std::string& s) {
  put(out, s.size(), 8);
  out += s;
}
// The head of an ARRAY value (type 9): its element type and count; the caller appends the elements.
inline std::string array_head(std::uint32_t element_type, std::uint64_t count) {
  std::string head;
  put(head, element_type, 4);
  put(head, count, 8);
  return head;
}

// A GGUF file laid out as GGUFWriter writes it; the pieces stay editable for the refusal tests.
struct Builder {
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;
  std::string kvs, infos, data;
  std::uint64_t n_kv = 0, n_tensors = 0;

  Builder& kv(const std::string& key, std::uint32_t type, const std::string& value) {
    put_str(kvs, key);
    put(kvs, type, 4);
    kvs += value;
    ++n_kv;
    return *this;
  }
  Builder& kv_u32(const std::string& key, std::uint32_t v) {
    std::string value;
    put(value, v, 4);
    return kv(key, 4, value);
  }
  Builder& kv_str(const std::string& key, const std::string& s) {
    std::string value;
    put_str(value, s);
    return kv(key, 8, value);
  }
  Builder& tensor(const std::string& name, const std::vector<std::uint64_t>& ne, std::uint32_t type,
                  const std::string& payload) {
    put_str(infos, name);
    put(infos, ne.size(), 4);
    for (std::uint64_t d : ne) put(infos, d, 8);
    put(infos, type, 4);
    put(infos, data.size(), 8);
    data += payload;
    while (data.size() % alignment != 0) data += '\0';
    ++n_tensors;
    return *this;
  }
  std::string build() const {
    std::string out = "GGUF";
    put(out, version, 4);
    put(out, n_tensors, 8);
    put(out, n_kv, 8);
    out += kvs + infos;
    if (n_tensors > 0)
      while (out.size() % alignment != 0) out += '\0';
    return out + data;
  }
};

}  // namespace samebits::testing
