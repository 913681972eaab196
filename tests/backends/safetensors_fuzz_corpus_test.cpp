// The fuzz entry (tests/fuzz/safetensors_header_fuzz.cpp) on a deterministic set of
// several thousand mutated valid files: bit flips, truncations, absurd lengths, evil
// numbers and dtypes in the JSON, random byte edits. The entry must only ever return
// (accepting, with its invariants checked, or refusing with checkpoint_error); any
// other exception fails here, a broken invariant or crash kills the test. Parsing the
// same inputs directly checks both outcomes really occur and refusals name the file.

#include <canopy/backends/checkpoints/safetensors.hpp>

#include "checkpoint_test_support.hpp"
#include "mutation_corpus.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace canopy::backends;
using namespace canopy::testing;

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

/// The file's length field (little-endian, its first 8 bytes); 0 when it is shorter.
std::uint64_t header_length(const std::string& file) {
  if (file.size() < 8)
    return 0;
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length =
        (length << 8) | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
  return length;
}

/// The file with its JSON header replaced (length field recomputed).
std::string with_header(const std::string& file, const std::string& json) {
  return le64(json.size()) + json + file.substr(8 + header_length(file));
}

std::vector<std::string> mutations() {
  const std::string base = seed_file();
  const std::uint64_t length = header_length(base);
  const std::string json = base.substr(8, length);
  std::vector<std::string> out{base};

  // Every single-bit flip of the length field and the header, and a few in the data.
  append(out, bit_flips(base, 8 + length + 16));
  append(out, truncations(base));
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
  const auto in_number = [](const std::string& s, std::size_t i) {
    return std::isdigit(static_cast<unsigned char>(s[i])) != 0;
  };
  for (const std::string& edited : replaced_runs(json, in_number, evil_numbers))
    out.push_back(with_header(base, edited));
  for (const char* dtype : {"F32", "F16", "BF16"})
    for (const char* other : {"F64", "I8", "BOOL", "", "f32", "F8_E4M3", "U16"}) {
      const std::size_t at = json.find(std::string("\"") + dtype + "\"");
      if (at != std::string::npos)
        out.push_back(
            with_header(base, json.substr(0, at + 1) + other +
                                  json.substr(at + 1 + std::string(dtype).size())));
    }
  // Structural edits: drop or duplicate each character of the header.
  for (const std::string& edited : dropped_and_doubled(json))
    out.push_back(with_header(base, edited));
  // Random edits: 1 to 4 bytes replaced anywhere, seeded.
  std::uint64_t state = 0x5AFE7E45;
  for (int k = 0; k < 2000; ++k)
    out.push_back(random_byte_edits(base, state));
  return out;
}

TEST(safetensors_fuzz_corpus, entry_only_returns_or_refuses_with_checkpoint_error) {
  const std::vector<std::string> inputs = mutations();
  ASSERT_GT(inputs.size(), 3000u);
  std::size_t accepted = 0, refused = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& input = inputs[i];
    run_fuzz_entry(input, i);
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
