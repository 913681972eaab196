#pragma once
// Files for tests that build their own inputs (often deliberately broken ones): a fresh
// scratch directory removed with everything in it, and whole-file byte I/O.
// Thread contract: test-only helpers, used from the test's own thread.

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include <ftw.h>
#include <sys/stat.h>
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

/// The system's folder for temporary files: $TMPDIR, else /tmp.
inline std::filesystem::path temp_root() {
  const char* tmpdir = std::getenv("TMPDIR");
  return (tmpdir != nullptr && *tmpdir != '\0') ? tmpdir : "/tmp";
}

/// A fresh empty directory under temp_root() (named after the running test), removed with
/// everything in it when the object dies.
///
/// Made and removed with POSIX calls (mkdtemp, nftw), not std::filesystem: pip's CUDA
/// LibTorch before 2.9 exports its own static copy of std::filesystem's directory
/// iteration (pytorch/pytorch#133437), and a process that loads it and calls remove_all
/// or temp_directory_path mixes two layouts and crashes (free(): invalid pointer, on the
/// GPU machine). The engine itself never iterates directories.
class scratch_dir {
public:
  scratch_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "canopy-";
    if (info != nullptr)
      name += std::string(info->name()) + "-";
    std::replace(name.begin(), name.end(), '/', '_'); // parameterised tests: "Case/param"
    std::string pattern = (temp_root() / (name + "XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    path_ = pattern;
  }
  ~scratch_dir() {
    // Children before their folder (FTW_DEPTH), links themselves not their targets.
    ::nftw(
        path_.c_str(),
        [](const char* entry, const struct stat*, int, struct FTW*) {
          return std::remove(entry);
        },
        16, FTW_DEPTH | FTW_PHYS);
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
