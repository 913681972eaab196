#pragma once
// The deterministic mutation corpora of the fuzz entries' tests: from valid inputs,
// every single-bit flip, every truncation, runs replaced by hostile values, dropped
// and doubled characters, seeded random byte edits; and the entry run on each input,
// failing the test when an exception escapes it. The same corpus every run, so a
// failure names an input that fails again.
// Thread contract: pure functions, but for run_fuzz_entry, which reports to the
// GoogleTest test running on the calling thread.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

// The libFuzzer entry of the fuzz target the test links (tests/fuzz/*_fuzz.cpp).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace canopy::testing {

/// SplitMix64's finaliser: a well-mixed 64-bit value from a counter.
inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline void append(std::vector<std::string>& out, std::vector<std::string> more) {
  out.insert(out.end(), std::make_move_iterator(more.begin()),
             std::make_move_iterator(more.end()));
}

/// `text` with each bit of its first `bytes` bytes flipped in turn, byte by byte.
inline std::vector<std::string> bit_flips(const std::string& text,
                                          std::size_t bytes = std::string::npos) {
  std::vector<std::string> out;
  for (std::size_t byte = 0; byte < std::min(bytes, text.size()); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::string m = text;
      m[byte] = static_cast<char>(m[byte] ^ (1 << bit));
      out.push_back(std::move(m));
    }
  return out;
}

/// Every proper prefix of `text`, the empty one first.
inline std::vector<std::string> truncations(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t n = 0; n < text.size(); ++n)
    out.push_back(text.substr(0, n));
  return out;
}

/// `text` with every run of characters matching `in_run(text, i)` replaced, in turn,
/// by each of `replacements` (one input per run and replacement).
template <class InRun>
std::vector<std::string> replaced_runs(const std::string& text, const InRun& in_run,
                                       const std::vector<std::string>& replacements) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size();) {
    if (!in_run(text, i)) {
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    while (end < text.size() && in_run(text, end))
      ++end;
    for (const std::string& r : replacements)
      out.push_back(text.substr(0, i) + r + text.substr(end));
    i = end;
  }
  return out;
}

/// `text` with each character dropped, then doubled, character by character.
inline std::vector<std::string> dropped_and_doubled(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    out.push_back(text.substr(0, i) + text.substr(i + 1));
    out.push_back(text.substr(0, i + 1) + text.substr(i));
  }
  return out;
}

/// `text` (not empty) with 1 to 4 bytes anywhere replaced by random ones, drawn from
/// mix(++state).
inline std::string random_byte_edits(std::string text, std::uint64_t& state) {
  const int edits = 1 + static_cast<int>(mix(++state) % 4);
  for (int e = 0; e < edits; ++e) {
    const std::uint64_t r = mix(++state);
    text[r % text.size()] = static_cast<char>(r >> 56);
  }
  return text;
}

/// Runs the fuzz entry on `input`, number `index` of the corpus: the entry must only
/// return, so an exception escaping it fails the test (a crash kills it).
inline void run_fuzz_entry(const std::string& input, std::size_t index) {
  try {
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()),
                           input.size());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "input " << index << ": exception escaped the entry: " << e.what();
  } catch (...) {
    ADD_FAILURE() << "input " << index << ": non-standard exception escaped the entry";
  }
}

} // namespace canopy::testing
