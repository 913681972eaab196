// Request bodies: every accepted form with its defaults, and every refusal with its
// code and a message naming the field at fault.

#include <canopy/server/api/api_requests.hpp>

#include "parse_expectations.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <variant>

namespace canopy::server {
namespace {

const request_limits limits{3, 100}; // max_batch 3, max_sample_tokens 100

parsed<logprobs_request> logprobs(const std::string& body) {
  return parse_logprobs_request(body, limits);
}
parsed<sample_request> sample(const std::string& body) {
  return parse_sample_request(body, limits);
}

// ---- accepted forms ----

TEST(api_requests, logprobs_tokens_with_defaults) {
  const auto& r = accepted(logprobs(R"({"tokens": [1, 0, 2147483647, -2147483648]})"));
  ASSERT_EQ(r.sequences.size(), 1u);
  EXPECT_EQ(r.sequences[0].tokens, (cache::token_seq{1, 0, 2147483647, -2147483647 - 1}));
  EXPECT_FALSE(r.sequences[0].text);
  EXPECT_FALSE(r.batch);
  EXPECT_FALSE(r.all_positions);
  EXPECT_FALSE(r.top_k);
  EXPECT_EQ(r.priority, 0);
  EXPECT_EQ(r.deadline_ms, 0);
  EXPECT_EQ(r.dtype, wire_dtype::float32);
}

TEST(api_requests, logprobs_text_and_every_option) {
  const auto& r =
      accepted(logprobs(R"({"text": "héllo", "all_positions": true, "top_k": 5,
      "priority": -7, "deadline_ms": 0.5, "dtype": "float16"})"));
  ASSERT_EQ(r.sequences.size(), 1u);
  EXPECT_EQ(r.sequences[0].text, std::optional<std::string>("héllo"));
  EXPECT_FALSE(r.sequences[0].tokens);
  EXPECT_TRUE(r.all_positions);
  EXPECT_EQ(r.top_k, std::optional<std::size_t>(5));
  EXPECT_EQ(r.priority, -7);
  EXPECT_EQ(r.deadline_ms, 0.5);
  EXPECT_EQ(r.dtype, wire_dtype::float16);
  EXPECT_EQ(accepted(logprobs(R"({"text": "", "dtype": "float32"})")).dtype,
            wire_dtype::float32);
}

TEST(api_requests, logprobs_batch_mixes_token_lists_and_texts) {
  const auto& r = accepted(logprobs(R"({"batch": [[1, 2], "two", [3]]})"));
  EXPECT_TRUE(r.batch);
  ASSERT_EQ(r.sequences.size(), 3u);
  EXPECT_EQ(r.sequences[0].tokens, (cache::token_seq{1, 2}));
  EXPECT_EQ(r.sequences[1].text, std::optional<std::string>("two"));
  EXPECT_EQ(r.sequences[2].tokens, (cache::token_seq{3}));
  // A batch of one is still a batch: the answer has "results".
  EXPECT_TRUE(accepted(logprobs(R"({"batch": [[1]]})")).batch);
}

TEST(api_requests, sample_with_defaults_and_every_option) {
  const auto& d = accepted(sample(R"({"tokens": [5], "max_tokens": 0})"));
  EXPECT_EQ(d.prompts.size(), 1u);
  EXPECT_EQ(d.max_tokens, 0u);
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.seed, 0u);
  EXPECT_TRUE(d.eos_token_ids.empty());
  EXPECT_FALSE(d.batch);

  const auto& r = accepted(sample(R"({"batch": ["a", [1]], "max_tokens": 100,
      "temperature": 0, "seed": 18446744073709551615, "eos_token_ids": [2, 0]})"));
  EXPECT_TRUE(r.batch);
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.max_tokens, 100u);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.seed, 18446744073709551615u);
  EXPECT_EQ(r.eos_token_ids, (std::vector<std::int32_t>{2, 0}));
}

TEST(api_requests, tokenize_detokenize_cache_kv_and_clear) {
  EXPECT_EQ(accepted(parse_tokenize_request(R"({"text": "a b"})")).text, "a b");
  EXPECT_TRUE(accepted(parse_tokenize_request(R"({"text": "a"})")).add_special_tokens);
  EXPECT_FALSE(
      accepted(parse_tokenize_request(R"({"text": "a", "add_special_tokens": false})"))
          .add_special_tokens);
  EXPECT_TRUE(refused(parse_tokenize_request(R"({"text": "a", "add_special_tokens": 1})"),
                      "invalid_request", "add_special_tokens"));
  EXPECT_EQ(accepted(parse_detokenize_request(R"({"tokens": [3, 4]})")).tokens,
            (cache::token_seq{3, 4}));
  // Detokenizing nothing is harmless: no query runs.
  EXPECT_TRUE(accepted(parse_detokenize_request(R"({"tokens": []})")).tokens.empty());
  EXPECT_EQ(accepted(parse_cache_kv_request(R"({"tokens": [9]})")).prompt.tokens,
            (cache::token_seq{9}));
  EXPECT_EQ(accepted(parse_cache_kv_request(R"({"text": "x"})")).prompt.text,
            std::optional<std::string>("x"));
  for (const char* body : {"", " \r\n\t", "{}", R"({"kv_only": false})"})
    EXPECT_FALSE(accepted(parse_cache_clear_request(body)).kv_only) << body;
  EXPECT_TRUE(accepted(parse_cache_clear_request(R"({"kv_only": true})")).kv_only);
}

TEST(api_requests, brackets_inside_strings_do_not_count_as_nesting) {
  const std::string text(1000, '[');
  EXPECT_EQ(accepted(logprobs(R"({"text": ")" + text + R"(\"[{"})")).sequences[0].text,
            text + "\"[{");
}

// ---- malformed bodies ----

TEST(api_requests, malformed_json_gives_the_parsers_position) {
  EXPECT_TRUE(refused(logprobs("{\"tokens\": [1,}"), "malformed_json", "column 15"));
  EXPECT_TRUE(refused(logprobs("{\"tokens\": [1]"), "malformed_json", "column 15"));
  EXPECT_TRUE(refused(logprobs(""), "malformed_json", "column 1"));
  EXPECT_TRUE(refused(logprobs("{\"tokens\": [1]} x"), "malformed_json", "line 1"));
  EXPECT_TRUE(refused(logprobs("{'tokens': [1]}"), "malformed_json", "line 1"));
  EXPECT_TRUE(refused(parse_cache_clear_request("{"), "malformed_json", "column"));
  // A body that is only whitespace is {} for cache/clear alone.
  EXPECT_TRUE(refused(parse_tokenize_request("  "), "malformed_json", "column"));
}

TEST(api_requests, any_bytes_give_a_clean_error) {
  const std::string bad_utf8 = "{\"text\": \"a\xff\xfe\"}";
  const std::string overlong = "{\"text\": \"\xc0\xaf\"}";
  const std::string surrogate = "{\"text\": \"\xed\xa0\x80\"}";
  static const char nul_bytes[] = "{\"text\": \"a\0b\"}";
  const std::string nul(nul_bytes, sizeof nul_bytes - 1);
  const std::string bytes_outside = "{\"text\": \"a\"}\x80";
  for (const std::string& body : {bad_utf8, overlong, surrogate, nul, bytes_outside}) {
    const auto result = logprobs(body);
    EXPECT_TRUE(refused(result, "malformed_json", "column")) << body;
    // The message may quote the bytes: the error response must still be valid JSON.
    const http_response response = to_response(std::get<api_error>(result));
    EXPECT_EQ(response.status, 400);
    EXPECT_TRUE(nlohmann::json::accept(response.body)) << response.body;
  }
  // Escaped non-UTF-8 text is fine JSON; "\ud800" alone is not.
  EXPECT_TRUE(refused(logprobs(R"({"text": "\ud800"})"), "malformed_json", "column"));
}

TEST(api_requests, nesting_is_bounded_before_parsing) {
  // Hostile nesting: refused quickly with the byte where it went too deep.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_TRUE(refused(logprobs(deep), "invalid_request", "nests deeper than 8 levels"));
  EXPECT_TRUE(refused(logprobs("{\"x\":" + std::string(100000, '{')), "invalid_request",
                      "(at byte 12)"));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [[[[[[[[1]]]]]]]]})"), "invalid_request",
                      "nests deeper"));
  // Depth 8 itself parses (and is then refused for what it says).
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [[[[[[[1]]]]]]]})"), "invalid_request",
                      "tokens[0] is not an integer"));
}

TEST(api_requests, top_level_must_be_an_object) {
  for (const char* body : {"[1, 2]", "5", "\"tokens\"", "null", "true"})
    EXPECT_TRUE(refused(logprobs(body), "invalid_request", "not an object")) << body;
  EXPECT_TRUE(
      refused(parse_cache_clear_request("[]"), "invalid_request", "not an object"));
}

// ---- fields ----

TEST(api_requests, unknown_fields_are_named) {
  EXPECT_TRUE(refused(logprobs(R"({"tokenz": [1]})"), "invalid_request",
                      "unknown field 'tokenz'"));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "max_tokens": 3})"), "invalid_request",
                      "unknown field 'max_tokens'"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 3, "top_k": 2})"),
                      "invalid_request", "unknown field 'top_k'"));
  EXPECT_TRUE(refused(parse_tokenize_request(R"({"tokens": [1]})"), "invalid_request",
                      "unknown field 'tokens'"));
  EXPECT_TRUE(refused(parse_cache_kv_request(R"({"batch": [[1]]})"), "invalid_request",
                      "unknown field 'batch'"));
  EXPECT_TRUE(refused(parse_cache_clear_request(R"({"all": true})"), "invalid_request",
                      "unknown field 'all'"));
  // A huge name is quoted cut short.
  const auto result = logprobs("{\"" + std::string(100000, 'k') + "\": 1}");
  ASSERT_TRUE(refused(result, "invalid_request", "unknown field 'kkkk"));
  EXPECT_LT(std::get<api_error>(result).message.size(), 200u);
}

TEST(api_requests, exactly_one_of_tokens_text_batch) {
  EXPECT_TRUE(refused(logprobs("{}"), "invalid_request",
                      "one of tokens, text, batch is required"));
  EXPECT_TRUE(refused(logprobs(R"({"top_k": 2})"), "invalid_request",
                      "one of tokens, text, batch is required"));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "text": "a"})"), "invalid_request",
                      "only one of tokens, text, batch may be given"));
  EXPECT_TRUE(refused(sample(R"({"text": "a", "batch": ["b"], "max_tokens": 1})"),
                      "invalid_request", "only one of tokens, text, batch may be given"));
  EXPECT_TRUE(refused(parse_cache_kv_request("{}"), "invalid_request",
                      "one of tokens, text is required"));
  EXPECT_TRUE(refused(parse_cache_kv_request(R"({"tokens": [1], "text": "a"})"),
                      "invalid_request", "only one of tokens, text may be given"));
  EXPECT_TRUE(
      refused(parse_tokenize_request("{}"), "invalid_request", "text is required"));
  EXPECT_TRUE(
      refused(parse_detokenize_request("{}"), "invalid_request", "tokens is required"));
}

TEST(api_requests, token_lists_must_hold_int32_integers) {
  EXPECT_TRUE(refused(logprobs(R"({"tokens": "1 2"})"), "invalid_request",
                      "tokens is not a list of token ids"));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": {"0": 1}})"), "invalid_request",
                      "tokens is not a list of token ids"));
  for (const char* bad : {"1.5", "\"7\"", "true", "null", "[1]", "{}", "7.0", "1e2"})
    EXPECT_TRUE(refused(logprobs(std::string(R"({"tokens": [0, 1, 2, )") + bad + "]}"),
                        "invalid_request", "tokens[3] is not an integer"))
        << bad;
  for (const char* big :
       {"2147483648", "-2147483649", "4294967296", "9223372036854775808",
        "-9223372036854775808", "18446744073709551616", "99999999999999999999",
        "-99999999999999999999", "1e20"})
    EXPECT_TRUE(refused(logprobs(std::string(R"({"tokens": [0, )") + big + "]}"),
                        "token_out_of_range", "tokens[1] is outside the int32 range"))
        << big;
  EXPECT_TRUE(
      refused(logprobs(R"({"tokens": []})"), "empty_sequence", "tokens is empty"));
  EXPECT_TRUE(refused(parse_cache_kv_request(R"({"tokens": []})"), "empty_sequence",
                      "tokens is empty"));
  EXPECT_TRUE(refused(parse_detokenize_request(R"({"tokens": [1.5]})"), "invalid_request",
                      "tokens[0] is not an integer"));
  EXPECT_TRUE(refused(parse_detokenize_request(R"({"tokens": [-2147483649]})"),
                      "token_out_of_range", "tokens[0] is outside the int32 range"));
}

TEST(api_requests, text_must_be_a_string) {
  EXPECT_TRUE(
      refused(logprobs(R"({"text": 5})"), "invalid_request", "text is not a string"));
  EXPECT_TRUE(refused(parse_tokenize_request(R"({"text": ["a"]})"), "invalid_request",
                      "text is not a string"));
  EXPECT_TRUE(refused(parse_cache_kv_request(R"({"text": null})"), "invalid_request",
                      "text is not a string"));
}

TEST(api_requests, batch_entries_are_named_by_index) {
  EXPECT_TRUE(
      refused(logprobs(R"({"batch": "a"})"), "invalid_request", "batch is not a list"));
  EXPECT_TRUE(refused(logprobs(R"({"batch": []})"), "invalid_request", "batch is empty"));
  EXPECT_TRUE(refused(logprobs(R"({"batch": [[1], 5]})"), "invalid_request",
                      "batch[1] is neither a list of token ids nor a text"));
  EXPECT_TRUE(refused(logprobs(R"({"batch": [[1], []]})"), "empty_sequence",
                      "batch[1] is empty"));
  EXPECT_TRUE(refused(logprobs(R"({"batch": [[1, 2, "3"]]})"), "invalid_request",
                      "batch[0][2] is not an integer"));
  EXPECT_TRUE(refused(logprobs(R"({"batch": ["a", [1, 3000000000]]})"),
                      "token_out_of_range", "batch[1][1] is outside the int32 range"));
}

TEST(api_requests, batch_over_the_limit_is_too_large) {
  EXPECT_EQ(accepted(logprobs(R"({"batch": [[1], [2], [3]]})")).sequences.size(), 3u);
  EXPECT_TRUE(refused(logprobs(R"({"batch": [[1], [2], [3], [4]]})"), "batch_too_large",
                      "batch has 4 sequences, more than the limit of 3"));
  EXPECT_TRUE(refused(sample(R"({"batch": ["a", "b", "c", "d"], "max_tokens": 1})"),
                      "batch_too_large", "more than the limit of 3"));
}

TEST(api_requests, logprobs_options_are_checked) {
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "all_positions": 1})"),
                      "invalid_request", "all_positions is not a boolean"));
  for (const char* k : {"0", "-1", "-99999999999999999999"})
    EXPECT_TRUE(refused(logprobs(std::string(R"({"tokens": [1], "top_k": )") + k + "}"),
                        "invalid_request", "top_k must be at least 1"))
        << k;
  for (const char* k : {"1.5", "\"3\"", "null"})
    EXPECT_TRUE(refused(logprobs(std::string(R"({"tokens": [1], "top_k": )") + k + "}"),
                        "invalid_request", "top_k is not an integer"))
        << k;
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "top_k": 99999999999999999999})"),
                      "invalid_request", "top_k must be at most"));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "priority": 2147483648})"),
                      "invalid_request", "priority is outside the int32 range"));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "priority": 0.5})"), "invalid_request",
                      "priority is not an integer"));
  for (const char* d : {"0", "-1", "-0.0"})
    EXPECT_TRUE(
        refused(logprobs(std::string(R"({"tokens": [1], "deadline_ms": )") + d + "}"),
                "invalid_request", "deadline_ms must be greater than 0"))
        << d;
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "deadline_ms": "5"})"),
                      "invalid_request", "deadline_ms is not a number"));
  // Too large for a double: refused (JSON has no infinity to pass through).
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "deadline_ms": 1e999})"),
                      "invalid_request", "1e999"));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "dtype": "bfloat16"})"),
                      "invalid_request", "dtype must be \"float32\" or \"float16\""));
  EXPECT_TRUE(refused(logprobs(R"({"tokens": [1], "dtype": 16})"), "invalid_request",
                      "dtype is not a string"));
}

TEST(api_requests, sample_options_are_checked) {
  EXPECT_TRUE(
      refused(sample(R"({"tokens": [1]})"), "invalid_request", "max_tokens is required"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 101})"), "invalid_request",
                      "max_tokens must be at most 100"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": -1})"), "invalid_request",
                      "max_tokens must be at least 0"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 2.5})"), "invalid_request",
                      "max_tokens is not an integer"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 1, "temperature": -0.01})"),
                      "invalid_request", "temperature must be at least 0"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 1, "temperature": "1"})"),
                      "invalid_request", "temperature is not a number"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 1, "temperature": 1e400})"),
                      "invalid_request", "1e400"));
  for (const char* seed : {"-1", "18446744073709551616", "1e20"})
    EXPECT_TRUE(refused(
        sample(std::string(R"({"tokens": [1], "max_tokens": 1, "seed": )") + seed + "}"),
        "invalid_request", "seed is outside the uint64 range"))
        << seed;
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 1, "seed": "1"})"),
                      "invalid_request", "seed is not an integer"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [1], "max_tokens": 1, "eos_token_ids": 2})"),
                      "invalid_request", "eos_token_ids is not a list of token ids"));
  EXPECT_TRUE(
      refused(sample(R"({"tokens": [1], "max_tokens": 1, "eos_token_ids": [2, "x"]})"),
              "invalid_request", "eos_token_ids[1] is not an integer"));
  EXPECT_TRUE(refused(
      sample(R"({"tokens": [1], "max_tokens": 1, "eos_token_ids": [4294967296]})"),
      "token_out_of_range", "eos_token_ids[0] is outside the int32 range"));
  EXPECT_TRUE(refused(sample(R"({"tokens": [], "max_tokens": 1})"), "empty_sequence",
                      "tokens is empty"));
}

TEST(api_requests, cache_clear_option_is_checked) {
  EXPECT_TRUE(refused(parse_cache_clear_request(R"({"kv_only": 1})"), "invalid_request",
                      "kv_only is not a boolean"));
  EXPECT_TRUE(refused(parse_cache_clear_request("x"), "malformed_json", "column 1"));
}

} // namespace
} // namespace canopy::server
