// Errors thrown at the io/api boundary; the kind tells the Python binding which exception type to raise.
#pragma once

#include <stdexcept>
#include <string>

namespace samebits {

enum class ErrorKind { Value, Type, NotImplemented, Runtime, Memory };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void throw_value_error(const std::string& message) {
  throw Error(ErrorKind::Value, message);
}
[[noreturn]] inline void throw_type_error(const std::string& message) {
  throw Error(ErrorKind::Type, message);
}
[[noreturn]] inline void throw_not_implemented(const std::string& message) {
  throw Error(ErrorKind::NotImplemented, message);
}
[[noreturn]] inline void throw_runtime_error(const std::string& message) {
  throw Error(ErrorKind::Runtime, message);
}
// An allocation the system refused (Python: MemoryError, as numpy raises for arrays that do not fit).
[[noreturn]] inline void throw_memory_error(const std::string& message) {
  throw Error(ErrorKind::Memory, message);
}

}  // namespace samebits
