// The fuzz entry (tests/fuzz/api_request_fuzz.cpp) on a deterministic set of several
// thousand mutated valid bodies: bit flips, truncations, evil numbers and strings
// (bytes that are not UTF-8, lone surrogates, values past every range), deep nesting,
// dropped and doubled characters, random byte edits. The entry must only ever return;
// an exception escaping fails here, a broken promise or crash kills the test. Parsing
// the same inputs directly checks that acceptance and every refusal code really occur.

#include "mutation_corpus.hpp"

#include <canopy/server/api/api_requests.hpp>
#include <canopy/server/openai/completion_request.hpp>

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace canopy::server {
namespace {

using namespace canopy::testing;

const std::vector<std::string> seeds{
    R"({"tokens": [1, 20, 300], "all_positions": true, "top_k": 5, "priority": -2,)"
    R"( "deadline_ms": 250.5, "dtype": "float16"})",
    R"({"batch": [[1, 2], "some text \u00e9", [3]]})",
    R"({"text": "hello", "max_tokens": 16, "temperature": 0.7, "seed": 42,)"
    R"( "eos_token_ids": [2]})",
    R"({"batch": [[7], "a"], "max_tokens": 3})",
    R"({"batch": [[1], [2], "three", [4], [5]], "top_k": 1})", // over max_batch 4
    R"({"kv_only": true})",
    R"({"tokens": []})",
    R"({"model": "m", "prompt": ["Once upon", [1, 2, 3]], "max_tokens": 5, "echo": true,)"
    R"( "logprobs": 3, "temperature": 0.5, "top_p": 0.9, "seed": 7, "n": 2, "stop": ["
",)"
    R"( "The"], "stream": true, "stream_options": {"include_usage": true}, "user": "u",)"
    R"( "best_of": 2, "frequency_penalty": 0, "logit_bias": {}})",
    R"({"model": "m", "prompt": [[4, 5], [6]], "n": 3, "stop": "x", "suffix": null})",
    R"({"model": "a model", "prompt": "some text to score", "max_tokens": 0})",
};

std::vector<std::string> mutations() {
  const std::vector<std::string> evil_numbers{"-1",
                                              "0",
                                              "1.5",
                                              "7.0",
                                              "-0",
                                              "1e2",
                                              "1e20",
                                              "1e999",
                                              "-1e999",
                                              "1e-400",
                                              "2147483647",
                                              "2147483648",
                                              "-2147483649",
                                              "4294967296",
                                              "9223372036854775808",
                                              "18446744073709551615",
                                              "18446744073709551616",
                                              "99999999999999999999",
                                              "null",
                                              "\"7\"",
                                              "[]",
                                              "[[]]",
                                              "{}",
                                              "true",
                                              ""};
  const std::vector<std::string> evil_strings{"\"\"",
                                              "\"\xff\xfe\"",
                                              "\"\xc0\xaf\"",
                                              "\"\xed\xa0\x80\"",
                                              "\"\\ud800\"",
                                              "\"\\u0000\"",
                                              std::string("\"\0\"", 3),
                                              "\"\x01\"",
                                              "\"\\\"",
                                              "\"" + std::string(5000, 'x') + "\"",
                                              "[1]",
                                              "1",
                                              "\"[[[[[[[[[[\""};
  std::vector<std::string> out;
  for (const std::string& seed : seeds) {
    out.push_back(seed);
    append(out, bit_flips(seed));
    append(out, truncations(seed));
    append(out, replaced_runs(
                    seed,
                    [](const std::string& s, std::size_t i) {
                      return std::isdigit(static_cast<unsigned char>(s[i])) ||
                             s[i] == '.' ||
                             (s[i] == '-' && i + 1 < s.size() &&
                              std::isdigit(static_cast<unsigned char>(s[i + 1])));
                    },
                    evil_numbers));
    // Every string (names included) by an evil one.
    std::vector<bool> in_string(seed.size(), false);
    for (std::size_t i = 0, open = 0; i < seed.size(); ++i)
      if (seed[i] == '"' && (i == 0 || seed[i - 1] != '\\')) {
        if (open == 0) {
          open = i + 1;
        } else {
          for (std::size_t j = open - 1; j <= i; ++j)
            in_string[j] = true;
          open = 0;
        }
      }
    append(out, replaced_runs(
                    seed, [&](const std::string&, std::size_t i) { return in_string[i]; },
                    evil_strings));
    append(out, dropped_and_doubled(seed));
    // Nesting around the body and around its first value, up to past the bound.
    for (std::size_t depth = 1; depth <= 12; ++depth) {
      out.push_back(std::string(depth, '[') + seed + std::string(depth, ']'));
      const std::size_t colon = seed.find(':');
      if (colon != std::string::npos)
        out.push_back(seed.substr(0, colon + 1) + std::string(depth, '[') + "1" +
                      std::string(depth, ']') +
                      seed.substr(seed.find_first_of(",}", colon)));
    }
  }
  out.push_back(std::string(100000, '['));
  out.push_back(std::string(100000, '{'));
  out.push_back("{\"batch\": [" + std::string(20000, '"') + "]}");
  // Random edits: 1 to 4 bytes replaced anywhere, seeded.
  std::uint64_t state = 0xB0D1E5;
  for (int k = 0; k < 3000; ++k) {
    const std::string& seed = seeds[mix(++state) % seeds.size()];
    out.push_back(random_byte_edits(seed, state));
  }
  return out;
}

TEST(api_request_fuzz_corpus, entry_only_returns_and_every_outcome_occurs) {
  const std::vector<std::string> inputs = mutations();
  ASSERT_GT(inputs.size(), 8000u);
  const request_limits limits{4, 64};
  std::size_t accepted = 0, completions_accepted = 0;
  std::set<std::string> codes, completion_codes;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& input = inputs[i];
    run_fuzz_entry(input, i);
    const auto logprobs = parse_logprobs_request(input, limits);
    const auto sample = parse_sample_request(input, limits);
    const auto completion = parse_completion_request(input, limits);
    for (const api_error* error :
         {std::get_if<api_error>(&logprobs), std::get_if<api_error>(&sample)}) {
      if (error == nullptr)
        ++accepted;
      else
        codes.insert(error->code);
    }
    if (const auto* error = std::get_if<api_error>(&completion))
      completion_codes.insert(error->code);
    else
      ++completions_accepted;
  }
  EXPECT_GT(accepted, 300u); // harmless edits (bits of text, numbers in range)
  EXPECT_GT(completions_accepted, 100u);
  // The second completion seed is over max_batch 4 (2 prompts x n 3).
  EXPECT_EQ(completion_codes, codes);
  EXPECT_EQ(codes,
            (std::set<std::string>{"malformed_json", "invalid_request", "empty_sequence",
                                   "token_out_of_range", "batch_too_large"}));
}

} // namespace
} // namespace canopy::server
