#pragma once
// Reading tokenizer files whole, with errors that name the file (internal to
// canopy_backends). Thread contract: pure functions over the file system.

#include <canopy/backends/tokenizers/tokenizer.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace canopy::backends::tokenizer_detail {

/// tokenizer_error "<path>: <what>".
[[noreturn]] inline void fail(const std::filesystem::path& path,
                              const std::string& what) {
  throw tokenizer_error(path.string() + ": " + what);
}

/// The whole file as bytes; tokenizer_error when it cannot be opened or read.
inline std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(path, "is a directory, expected a tokenizer file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(path, "cannot open tokenizer file");
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (in.bad())
    fail(path, "read error");
  return bytes;
}

} // namespace canopy::backends::tokenizer_detail
