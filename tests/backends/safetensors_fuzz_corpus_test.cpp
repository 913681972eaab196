// The fuzz entry (tests/fuzz/safetensors_header_fuzz.cpp) on a deterministic set of
// several thousand mutated valid files: bit flips, truncations, absurd lengths, evil
// numbers and dtypes in the JSON, random byte edits. The entry must only ever return
// (accepting, with its invariants checked, or refusing with checkpoint_error); any
// other exception fails here, a broken invariant or crash kills the test. Parsing the
// same inputs directly checks both outcomes really occur and refusals name the file.

#include <canopy/backends/safetensors.hpp>

#include "checkpoint_test_support.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using namespace canopy::backends;
using canopy::testing::le64;

/// A valid file exercising every header feature: metadata, all dtypes, a scalar, an
/// empty tensor, padding.
std::string seed_file() {
  static const float f32[6] = {1, 2, 3, 4, 5, 6};
  static const std::uint16_t half[4] = {0x3C00, 0x4000, 0x4200, 0x4400};
  const auto* a = reinterpret_cast<const std::byte*>(f32);
  const auto* b = reinterpret_cast<const std::byte*>(half);
  return encode_safetensors(
      {{"model.embed_tokens.weight", {weight_dtype::f32, {2, 3}, a}},
       {"h.0.attn.bias", {weight_dtype::f16, {1, 1, 2, 2}, b}},
       {"bf", {weight_dtype::bf16, {3}, b}},
       {"scalar", {weight_dtype::f32, {}, a}},
       {"empty", {weight_dtype::f32, {0, 4}, a}}},
      {{"format", "pt"}});
}

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// The file with its JSON header replaced (length field recomputed).
std::string with_header(const std::string& file, const std::string& json) {
  const std::uint64_t old_length = file.size() >= 8 ? [&] {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
      v = (v << 8) | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
    return v;
  }() : 0;
  return le64(json.size()) + json + file.substr(8 + old_length);
}

std::vector<std::string> mutations() {
  const std::string base = seed_file();
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length =
        (length << 8) | static_cast<unsigned char>(base[static_cast<std::size_t>(i)]);
  const std::string json = base.substr(8, length);
  std::vector<std::string> out{base};

  // Every single-bit flip of the length field and the header, and a few in the data.
  for (std::size_t byte = 0; byte < 8 + length + 16 && byte < base.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::string m = base;
      m[byte] = static_cast<char>(m[byte] ^ (1 << bit));
      out.push_back(std::move(m));
    }
  // Every truncation.
  for (std::size_t n = 0; n < base.size(); ++n)
    out.push_back(base.substr(0, n));
  // Absurd and off-by-one header lengths.
  for (std::uint64_t bad :
       {std::uint64_t{0}, std::uint64_t{1}, length - 1, length + 1,
        std::uint64_t(base.size() - 8), std::uint64_t(base.size() - 7),
        std::uint64_t{1} << 32, std::uint64_t{1} << 63, ~std::uint64_t{0},
        max_safetensors_header_bytes, max_safetensors_header_bytes + 1})
    out.push_back(le64(bad) + base.substr(8));
  // Every number in the JSON replaced by an evil value; every dtype by another.
  const std::vector<std::string> evil_numbers{"-1",
                                              "0",
                                              "1.5",
                                              "1e30",
                                              "-0",
                                              "9223372036854775807",
                                              "9223372036854775808",
                                              "18446744073709551615",
                                              "18446744073709551616",
                                              "null",
                                              "\"7\"",
                                              "[]",
                                              "{}",
                                              "true"};
  for (std::size_t i = 0; i < json.size();) {
    if (!std::isdigit(static_cast<unsigned char>(json[i]))) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < json.size() && std::isdigit(static_cast<unsigned char>(json[end])))
      ++end;
    for (const std::string& value : evil_numbers)
      out.push_back(with_header(base, json.substr(0, i) + value + json.substr(end)));
    i = end;
  }
  for (const char* dtype : {"F32", "F16", "BF16"})
    for (const char* other : {"F64", "I8", "BOOL", "", "f32", "F8_E4M3", "U16"}) {
      const std::size_t at = json.find(std::string("\"") + dtype + "\"");
      if (at != std::string::npos)
        out.push_back(
            with_header(base, json.substr(0, at + 1) + other +
                                  json.substr(at + 1 + std::string(dtype).size())));
    }
  // Structural edits: drop or duplicate each character of the header.
  for (std::size_t i = 0; i < json.size(); ++i) {
    out.push_back(with_header(base, json.substr(0, i) + json.substr(i + 1)));
    out.push_back(with_header(base, json.substr(0, i + 1) + json.substr(i)));
  }
  // Random edits: 1 to 4 bytes replaced anywhere, seeded.
  std::uint64_t state = 0x5AFE7E45;
  for (int k = 0; k < 2000; ++k) {
    std::string m = base;
    const int edits = 1 + static_cast<int>(mix(++state) % 4);
    for (int e = 0; e < edits; ++e) {
      const std::uint64_t r = mix(++state);
      m[r % m.size()] = static_cast<char>(r >> 56);
    }
    out.push_back(std::move(m));
  }
  return out;
}

TEST(SafetensorsFuzzCorpus, EntryOnlyReturnsOrRefusesWithCheckpointError) {
  const std::vector<std::string> inputs = mutations();
  ASSERT_GT(inputs.size(), 3000u);
  std::size_t accepted = 0, refused = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& input = inputs[i];
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()),
                             input.size());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "input " << i << ": exception escaped the entry: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "input " << i << ": non-standard exception escaped the entry";
    }
    try {
      parse_safetensors_header(input, "corpus.safetensors");
      ++accepted;
    } catch (const checkpoint_error& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).rfind("corpus.safetensors: ", 0), 0u) << e.what();
    }
  }
  // Both outcomes must really occur: flips in the data section and harmless header
  // edits are accepted; most header damage is refused.
  EXPECT_GT(accepted, 100u);
  EXPECT_GT(refused, inputs.size() / 2);
}

} // namespace
