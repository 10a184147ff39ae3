// samebits::Error: the one exception type every samebits call throws (and a thrower per kind); its kind
// says which Python exception the binding raises (ValueError, TypeError, NotImplementedError, RuntimeError,
// MemoryError).
#pragma once

#include <stdexcept>
#include <string>

namespace samebits {

// What went wrong, in Python's terms: refused input (Value), a wrong type (Type), an unsupported call
// (NotImplemented), a broken engine invariant (Runtime), an allocation the system refused (Memory), a file
// or directory that does not exist (NotFound: FileNotFoundError), a name a table lacks (Key: KeyError).
enum class ErrorKind { Value, Type, NotImplemented, Runtime, Memory, NotFound, Key };

// A refusal with a message that names the call, the argument or file field, and the problem. Nothing the
// call was given (a state included) has changed when it is thrown.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// One thrower per kind, so a refusal reads as one line at its check.
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
[[noreturn]] inline void throw_not_found(const std::string& message) { throw Error(ErrorKind::NotFound, message); }
[[noreturn]] inline void throw_key_error(const std::string& message) { throw Error(ErrorKind::Key, message); }

}  // namespace samebits
