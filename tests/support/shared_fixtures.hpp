#pragma once
// Access to ../shared (models and oracle fixtures) for tests.
// A user's clone has no ../shared: fixture tests then skip with a clear message.
// CI sets CANOPY_REQUIRE_FIXTURES=1: a missing fixture is then a failure, so a
// broken path can never turn the fidelity suite into silent skips.
// Thread contract: pure functions (read the environment and the file system).

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace canopy::testing {

/// The shared directory named by CANOPY_SHARED_DIR (set by ctest), or empty when it
/// is unset or does not exist.
inline std::filesystem::path shared_dir() {
  const char* dir = std::getenv("CANOPY_SHARED_DIR");
  if (dir == nullptr || *dir == '\0')
    return {};
  std::filesystem::path path(dir);
  return std::filesystem::is_directory(path) ? path : std::filesystem::path{};
}

inline bool fixtures_required() {
  const char* flag = std::getenv("CANOPY_REQUIRE_FIXTURES");
  return flag != nullptr && std::string(flag) == "1";
}

} // namespace canopy::testing

/// Declares `var` as the path of `relative` under the shared directory, or ends the
/// test: skipped when fixtures are optional, failed when CANOPY_REQUIRE_FIXTURES=1.
#define CANOPY_SHARED_PATH_OR_SKIP(var, relative)                                        \
  const std::filesystem::path var = ::canopy::testing::shared_dir() / (relative);        \
  if (::canopy::testing::shared_dir().empty() || !std::filesystem::exists(var)) {        \
    if (::canopy::testing::fixtures_required())                                          \
      FAIL() << "fixture missing: " << (relative)                                        \
             << " under CANOPY_SHARED_DIR (required: CANOPY_REQUIRE_FIXTURES=1)";        \
    else                                                                                 \
      GTEST_SKIP() << "fixture absent: " << (relative)                                   \
                   << " (needs ../shared beside the checkout; CANOPY_SHARED_DIR)";       \
  }
