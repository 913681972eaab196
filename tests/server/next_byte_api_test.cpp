// POST /v1/next_byte's body and answer: the accepted forms with their defaults, every
// refusal naming its field, and the JSON answer (null for log 0, a bound that holds).

#include <canopy/server/api/api_requests.hpp>
#include <canopy/server/api/next_byte_encoding.hpp>

#include "parse_expectations.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <variant>

namespace canopy::server {
namespace {

using backends::byte_reduce;
using backends::next_byte_distribution;

const request_limits limits{3, 100}; // max_batch 3

next_byte_request accepted(std::string_view body) {
  return accepted(parse_next_byte_request(body, limits));
}

::testing::AssertionResult refused(std::string_view body, const std::string& code,
                                   const std::string& text) {
  return refused(parse_next_byte_request(body, limits), code, text);
}

TEST(next_byte_api, one_question_with_defaults) {
  const auto r = accepted(R"({"tokens": [1, 2]})");
  ASSERT_EQ(r.items.size(), 1u);
  EXPECT_EQ(r.items[0].tokens, (cache::token_seq{1, 2}));
  EXPECT_EQ(r.items[0].prefix, "");
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(r.reduce, byte_reduce::sum);
  EXPECT_EQ(r.priority, 0);
  EXPECT_EQ(r.deadline_ms, 0);
}

TEST(next_byte_api, prefixes_are_hex_of_any_bytes_in_either_case) {
  const auto r = accepted(
      R"({"tokens": [1], "prefix": "48Ff00", "reduce": "max", "priority": 2,
          "deadline_ms": 50, "cache_salt": "s"})");
  EXPECT_EQ(r.items[0].prefix, std::string("H\xff\0", 3));
  EXPECT_EQ(r.reduce, byte_reduce::max);
  EXPECT_EQ(r.priority, 2);
  EXPECT_EQ(r.deadline_ms, 50);
  EXPECT_EQ(r.cache_salt, "s");
}

TEST(next_byte_api, a_batch_holds_its_own_prefixes) {
  const auto r =
      accepted(R"({"batch": [{"tokens": [1], "prefix": "61"}, {"tokens": [2]}]})");
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_TRUE(r.batch);
  EXPECT_EQ(r.items[0].prefix, "a");
  EXPECT_EQ(r.items[1].tokens, (cache::token_seq{2}));
  EXPECT_EQ(r.items[1].prefix, "");
}

TEST(next_byte_api, refusals_name_what_is_wrong) {
  EXPECT_TRUE(refused(R"({"tokens": [1], "prefix": "6"})", "invalid_request",
                      "prefix is not hex"));
  EXPECT_TRUE(refused(R"({"tokens": [1], "prefix": "zz"})", "invalid_request",
                      "prefix is not hex"));
  EXPECT_TRUE(refused(R"({"tokens": [1], "prefix": 61})", "invalid_request",
                      "prefix is not a string"));
  EXPECT_TRUE(refused(R"({"tokens": [1], "reduce": "mean"})", "invalid_request",
                      "reduce must be \"sum\" or \"max\""));
  EXPECT_TRUE(refused(R"({"batch": []})", "invalid_request", "batch is empty"));
  EXPECT_TRUE(refused(R"({"batch": [{"tokens": [1]}, {"tokens": [1]}, {"tokens": [1]},
                                     {"tokens": [1]}]})",
                      "batch_too_large", "4 entries, more than the limit of 3"));
  EXPECT_TRUE(
      refused(R"({"batch": [[1, 2]]})", "invalid_request", "batch[0] is not an object"));
  EXPECT_TRUE(refused(R"({"batch": [{"prefix": "61"}]})", "invalid_request",
                      "batch[0].tokens is required"));
  EXPECT_TRUE(refused(R"({"batch": [{"tokens": [1], "prefix": "6g"}]})",
                      "invalid_request", "batch[0].prefix is not hex"));
  EXPECT_TRUE(refused(R"({"batch": [{"tokens": [1], "reduce": "max"}]})",
                      "invalid_request", "batch[0] has an unknown field: reduce"));
  EXPECT_TRUE(refused(R"({"batch": [{"tokens": [1]}], "prefix": "61"})",
                      "invalid_request", "prefix goes inside each batch entry"));
  EXPECT_TRUE(refused(R"({"tokens": []})", "empty_sequence", "tokens"));
  EXPECT_TRUE(
      refused(R"({"batch": [{"tokens": []}]})", "empty_sequence", "batch[0].tokens"));
  EXPECT_TRUE(refused(R"({"text": "hi"})", "invalid_request", "unknown field"));
  EXPECT_TRUE(refused(R"({"prefix": "61"})", "invalid_request",
                      "one of tokens, batch is required"));
}

next_byte_distribution sample_answer() {
  next_byte_distribution d;
  d.logprobs.fill(-7.0);
  d.logprobs['a'] = -0.25;
  d.logprobs['b'] = -std::numeric_limits<double>::infinity();
  d.end_of_token = -std::numeric_limits<double>::infinity();
  d.log_mass = -1.5;
  return d;
}

TEST(next_byte_api, answers_write_log_zero_as_null_and_echo_the_question) {
  const std::vector<next_byte_item> items{{{1, 2}, std::string("\xff", 1)}};
  const auto j =
      nlohmann::json::parse(encode_next_byte_json(items, {sample_answer()}, false));
  EXPECT_EQ(j.at("tokens"), nlohmann::json({1, 2}));
  EXPECT_EQ(j.at("prefix"), "ff");
  ASSERT_EQ(j.at("logprobs").size(), 256u);
  EXPECT_EQ(j.at("logprobs")['a'].get<double>(), -0.25);
  EXPECT_TRUE(j.at("logprobs")['b'].is_null());
  EXPECT_TRUE(j.at("end_of_token").is_null());
  EXPECT_TRUE(j.at("eos").is_null());
  EXPECT_EQ(j.at("log_mass").get<double>(), -1.5);
  auto with_eos = sample_answer();
  with_eos.eos = -3.0;
  const std::vector<next_byte_item> two{items[0], {{3}, ""}};
  const auto b = nlohmann::json::parse(
      encode_next_byte_json(two, {with_eos, sample_answer()}, true));
  EXPECT_EQ(b.at("results").size(), 2u);
  EXPECT_EQ(b.at("results")[0].at("eos").get<double>(), -3.0);
  EXPECT_THROW(encode_next_byte_json(items, {sample_answer(), sample_answer()}, false),
               std::invalid_argument);
}

TEST(next_byte_api, the_bound_holds_for_the_longest_numbers_tokens_and_prefixes) {
  next_byte_distribution longest;
  for (auto& x : longest.logprobs)
    x = -2.2250738585072014e-308;
  longest.end_of_token = longest.log_mass = -2.2250738585072014e-308;
  longest.eos = -2.2250738585072014e-308;
  const std::vector<next_byte_item> items{
      {cache::token_seq(50, std::numeric_limits<std::int32_t>::min()),
       std::string(40, 'x')},
      {{1}, ""}};
  const auto text = encode_next_byte_json(items, {longest, longest}, true);
  EXPECT_LE(text.size(), next_byte_json_bound(items));
  EXPECT_GT(text.size(), next_byte_json_bound(items) / 2) << "a bound far too loose";
}

} // namespace
} // namespace canopy::server
