// POST /v1/completions' request parsing and answer encoding (pure functions): prompt
// forms, limits and neutral OpenAI fields; token spellings, offsets over multi-byte
// text, stop strings, echo scores and the streamed chunks.

#include <canopy/server/completion_request.hpp>
#include <canopy/server/completion_response.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace canopy::server;
using nlohmann::json;

const request_limits limits{8, 100};

completion_request parse_ok(const std::string& body) {
  auto r = parse_completion_request(body, limits);
  if (auto* e = std::get_if<api_error>(&r))
    ADD_FAILURE() << body << ": " << e->message;
  return std::get<completion_request>(r);
}

api_error parse_error(const std::string& body) {
  auto r = parse_completion_request(body, limits);
  if (std::holds_alternative<completion_request>(r)) {
    ADD_FAILURE() << body << " parsed";
    return {};
  }
  return std::get<api_error>(r);
}

TEST(completion_request, takes_each_prompt_form_and_openai_defaults) {
  auto one = parse_ok(R"({"model": "m", "prompt": "hi"})");
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(*one.prompts[0].text, "hi");
  EXPECT_EQ(one.max_tokens, 16u);
  EXPECT_FALSE(one.logprobs.has_value());
  EXPECT_EQ(parse_ok(R"({"model": "m", "prompt": [1, 2, 3]})").prompts[0].tokens->size(), 3u);
  auto many = parse_ok(R"({"model": "m", "prompt": ["a", [4, 5]], "n": 2, "logprobs": 0,
                           "echo": true, "max_tokens": 0, "stop": "x", "user": "u",
                           "best_of": 2, "logit_bias": {}, "temperature": null})");
  EXPECT_EQ(many.prompts.size(), 2u);
  EXPECT_EQ(*many.prompts[1].tokens, (canopy::cache::token_seq{4, 5}));
  EXPECT_EQ(many.logprobs, std::optional<std::size_t>{0});
  EXPECT_EQ(many.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(many.temperature, 1.0) << "null reads as absent";
}

TEST(completion_request, refuses_what_it_cannot_honour_naming_the_field) {
  const auto message_of = [](const std::string& body) { return parse_error(body).message; };
  EXPECT_EQ(parse_error(R"({"prompt": "hi"})").message, "model is required");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": []})").code, "empty_sequence");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": [1, 3000000000]})").code,
            "token_out_of_range");
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "logprobs": 21})").find("logprobs"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "max_tokens": 101})").find("max_tokens"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "top_p": 0})").find("top_p"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "stop": ["a","b","c","d","e"]})")
              .find("stop has 5"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "presence_penalty": 1})")
              .find("presence_penalty"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "best_of": 3})").find("best_of"),
            std::string::npos);
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": ["a","b","c"], "n": 3})").code,
            "batch_too_large") << "prompts x n past max_batch";
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "stream_options": {}})")
              .find("only allowed with stream"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "functions": []})").find("functions"),
            std::string::npos);
}

// Ids: 0 "<s>" (control), 1 "Hi", 2 " caf", 3 "\xc3" and 4 "\xa9" (the halves of é),
// 5 " end", 6 "!".
const std::vector<std::optional<std::string>> bytes = {
  std::nullopt, "Hi", " caf", "\xc3", "\xa9", " end", "!"};
const std::vector<std::optional<std::string>> special = {"<s>", {}, {}, {}, {}, {}, {}};
const token_texts texts{bytes, special};

token_score scored(std::int32_t id, float logprob) { return {id, logprob, {{id, logprob}}}; }

TEST(completion_response, spells_tokens_and_counts_offsets_in_code_points) {
  EXPECT_EQ(token_spelling(texts, 0), "<s>");
  EXPECT_EQ(token_spelling(texts, 2), " caf");
  EXPECT_EQ(token_spelling(texts, 3), "bytes:\\xc3");
  completion_result r{{0, 1}, {scored(1, -1.5f)}, {2, 3, 4, 6}, {}, false};
  r.generated_scores = {scored(2, -0.5f), scored(3, -0.25f), scored(4, -0.125f), scored(6, -2)};
  const auto choice = completion_choice(r, 3, {true, true, {}}, texts);
  EXPECT_EQ(choice["text"], "Hi caf\xc3\xa9!");
  EXPECT_EQ(choice["index"], 3);
  EXPECT_EQ(choice["finish_reason"], "length");
  const auto& lp = choice["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"<s>", "Hi", " caf", "bytes:\\xc3", "bytes:\\xa9", "!"}));
  EXPECT_EQ(lp["token_logprobs"], json({nullptr, -1.5, -0.5, -0.25, -0.125, -2.0}));
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["top_logprobs"][1], json({{"Hi", -1.5}}));
  // é is one code point: "!" starts at 7 ("Hi caf" is 6), and é's second byte starts
  // inside the character it completes.
  EXPECT_EQ(lp["text_offset"], json({0, 0, 2, 6, 7, 7}));
}

TEST(completion_response, a_stop_string_ends_the_text_and_the_tokens_before_it) {
  const completion_result r{{1}, {}, {2, 5, 6, 6}, {}, false};
  const completion_format format{false, true, {"nd!", "zzz"}};
  EXPECT_EQ(stop_position(texts, r.generated, format.stop), std::optional<std::size_t>{6});
  const auto choice = completion_choice(r, 0, format, texts);
  EXPECT_EQ(choice["text"], " caf e");
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["logprobs"]["tokens"], json({" caf", " end"})) << "tokens starting before it";
  // ends_in_stop sees a stop completed by the last token only.
  EXPECT_FALSE(ends_in_stop(texts, {2, 5}, {"nd!"}));
  EXPECT_TRUE(ends_in_stop(texts, {2, 5, 6}, {"nd!"}));
  EXPECT_TRUE(ends_in_stop(texts, {2, 5, 6}, {"!"}));
  EXPECT_FALSE(ends_in_stop(texts, {2, 6, 5}, {"!"})) << "an earlier stop was asked then";
  EXPECT_TRUE(ends_in_stop(texts, {1, 2, 3, 4}, {"Hi caf\xc3\xa9"})) << "across four tokens";
}

TEST(completion_response, chunks_carry_one_token_each_then_the_finish_reason) {
  const completion_result r{{1}, {}, {2, 5}, {scored(2, -1), scored(5, -2)}, true};
  const auto chunks = completion_chunks(r, 1, {true, true, {}}, texts);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0]["text"], "Hi");
  EXPECT_TRUE(chunks[0]["logprobs"]["token_logprobs"][0].is_null());
  EXPECT_EQ(chunks[2]["text"], " end");
  EXPECT_EQ(chunks[2]["logprobs"]["text_offset"], json({6}));
  EXPECT_TRUE(chunks[2]["finish_reason"].is_null());
  EXPECT_EQ(chunks[3]["text"], "");
  EXPECT_EQ(chunks[3]["finish_reason"], "stop");
  EXPECT_EQ(chunks[3]["index"], 1);
}

} // namespace
