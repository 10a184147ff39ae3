// FileBytes: read-only mappings of checkpoint files, refused by name when the path cannot hold one.
#include "io/file_bytes.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <samebits/errors.hpp>

namespace samebits::io {

FileBytes::FileBytes(const std::string& path, const std::string& where, const std::string& noun,
                     std::uint64_t min_bytes, const std::function<std::string(std::uint64_t)>& too_short) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(path, error)) throw_not_found(where + " does not exist");
  if (fs::is_directory(path, error)) throw_value_error(where + " is a directory, not " + noun);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_value_error(where + " cannot be opened: " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw_value_error(where + " is not a regular file");
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size < min_bytes || size == 0) {
    ::close(fd);
    throw_value_error(where + too_short(size));
  }
  map_ = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw_value_error(where + " cannot be mapped: " + std::strerror(errno));
  }
  data_ = static_cast<const unsigned char*>(map_);
  size_ = size;
}

FileBytes::FileBytes(std::string bytes, const std::string& where, std::uint64_t min_bytes,
                     const std::function<std::string(std::uint64_t)>& too_short)
    : owned_(std::move(bytes)) {
  if (owned_.size() < min_bytes) throw_value_error(where + too_short(owned_.size()));
  data_ = reinterpret_cast<const unsigned char*>(owned_.data());
  size_ = owned_.size();
}

FileBytes::~FileBytes() {
  if (map_ != nullptr) ::munmap(map_, static_cast<std::size_t>(size_));
}

}  // namespace samebits::io
