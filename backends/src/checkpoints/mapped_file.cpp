#include <canopy/backends/checkpoints/mapped_file.hpp>

#include <canopy/backends/checkpoints/checkpoint_error.hpp>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace canopy::backends {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int err) {
  throw checkpoint_error(path.string() + ": " + what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

mapped_file::mapped_file(const std::filesystem::path& path) : path_(path) {
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0)
    fail(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0)
    fail(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode))
    throw checkpoint_error(path.string() + ": not a regular file");
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0)
    return; // mmap refuses length 0; an empty file simply has no bytes
  void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (addr == MAP_FAILED)
    fail(path, "cannot map", errno);
  data_ = static_cast<const std::byte*>(addr);
}

mapped_file::~mapped_file() {
  release();
}

mapped_file::mapped_file(mapped_file&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void mapped_file::release() noexcept {
  if (data_ != nullptr)
    ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace canopy::backends
