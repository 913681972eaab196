#pragma once
// A whole file mapped read-only into memory (mmap), so multi-gigabyte checkpoints are
// neither copied nor read up front: pages come in as the model touches them and are
// shared between processes. Move-only; unmaps on destruction.
// Caution: if another process truncates the file while it is mapped, touching the lost
// pages raises SIGBUS; checkpoints are expected to be immutable files.
// Thread contract: opening is a pure function of the file system; the bytes of an
// open mapped_file may be read from any number of threads.

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace canopy::backends {

class mapped_file {
public:
  /// Maps `path`; throws checkpoint_error naming the path when it cannot be opened,
  /// is not a regular file or cannot be mapped. An empty file maps to no bytes.
  explicit mapped_file(const std::filesystem::path& path);
  ~mapped_file();
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::filesystem::path& path() const { return path_; }

private:
  void release() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace canopy::backends
