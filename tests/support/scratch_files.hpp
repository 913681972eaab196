#pragma once
// Files for tests that build their own inputs (often deliberately broken ones): a fresh
// scratch directory removed with everything in it, and whole-file byte I/O.
// Thread contract: test-only helpers, used from the test's own thread.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

namespace canopy::testing {

inline std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A fresh empty directory under the system temp dir (named after the process and the
/// running test), removed with everything in it when the object dies.
class scratch_dir {
public:
  scratch_dir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
      "canopy-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    if (info != nullptr)
      name += std::string("-") + info->name();
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  /// Writes `bytes` to path()/name (creating its folders) and returns that path.
  std::filesystem::path write(const std::string& name, const std::string& bytes) const {
    const auto file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    write_bytes(file, bytes);
    return file;
  }

private:
  std::filesystem::path path_;
};

} // namespace canopy::testing
