#pragma once
// Helpers for the tokenizer tests: the oracle vectors in
// ../shared/oracle/tokenizers.json, and hex (scratch files for hand-made tokenizer files
// come from scratch_files.hpp). Thread contract: test-only helpers, used from the test's
// own thread.

#include <canopy/cache/types.hpp>

#include "oracle.hpp"
#include "scratch_files.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace canopy::testing {

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

inline std::string to_hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

inline std::vector<cache::token_id> ids_of(const nlohmann::json& array) {
  return array.get<std::vector<cache::token_id>>();
}

} // namespace canopy::testing
