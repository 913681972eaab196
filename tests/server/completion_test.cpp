// POST /v1/completions' request parsing and answer encoding (pure functions): prompt
// forms, limits and neutral OpenAI fields; token spellings, offsets over multi-byte
// text, stop strings, echo scores and the streamed chunks.

#include <canopy/server/openai/completion_request.hpp>
#include <canopy/server/openai/completion_response.hpp>

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
  EXPECT_EQ(parse_ok(R"({"model": "m", "prompt": [1, 2, 3]})").prompts[0].tokens->size(),
            3u);
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
  const auto message_of = [](const std::string& body) {
    return parse_error(body).message;
  };
  EXPECT_EQ(parse_error(R"({"prompt": "hi"})").message, "model is required");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": []})").code, "empty_sequence");
  EXPECT_EQ(parse_error(R"({"model": "m", "prompt": [1, 3000000000]})").code,
            "token_out_of_range");
  EXPECT_NE(
      message_of(R"({"model": "m", "prompt": "a", "logprobs": 21})").find("logprobs"),
      std::string::npos);
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "max_tokens": 101})")
                .find("max_tokens"),
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
            "batch_too_large")
      << "prompts x n past max_batch";
  EXPECT_NE(message_of(R"({"model": "m", "prompt": "a", "stream_options": {}})")
                .find("only allowed with stream"),
            std::string::npos);
  EXPECT_NE(
      message_of(R"({"model": "m", "prompt": "a", "functions": []})").find("functions"),
      std::string::npos);
}

// Ids: 0 "<s>" (control), 1 "Hi", 2 " caf", 3 "\xc3" and 4 "\xa9" (the halves of é),
// 5 " end", 6 "!".
const std::vector<std::optional<std::string>> bytes = {
    std::nullopt, "Hi", " caf", "\xc3", "\xa9", " end", "!"};
const std::vector<std::optional<std::string>> special = {"<s>", {}, {}, {}, {}, {}, {}};
const token_texts texts{bytes, special};

token_score scored(std::int32_t id, float logprob) {
  return {id, logprob, {{id, logprob}}};
}

/// The pieces' bytes, one string each.
std::vector<std::string> bytes_of(const std::vector<token_piece>& pieces) {
  std::vector<std::string> out;
  for (const auto& p : pieces)
    out.push_back(p.bytes);
  return out;
}

/// Appends `more` to `all`.
void keep(std::vector<token_piece>& all, std::vector<token_piece> more) {
  all.insert(all.end(), more.begin(), more.end());
}

using strings = std::vector<std::string>;

TEST(completion_response, spells_tokens_and_counts_offsets_in_code_points) {
  EXPECT_EQ(token_spelling(texts, 0), "<s>");
  EXPECT_EQ(token_spelling(texts, 2), " caf");
  EXPECT_EQ(token_spelling(texts, 3), "bytes:\\xc3");
  choice_pieces choice({}, texts);
  auto pieces = choice.echo({0, 1}, {scored(1, -1.5f)});
  EXPECT_EQ(bytes_of(pieces), strings({"", "Hi"}));
  // With no stop strings, a generated token is final at once.
  for (const auto& [id, logprob] :
       {std::pair{2, -0.5f}, {3, -0.25f}, {4, -0.125f}, {6, -2.0f}}) {
    auto given = choice.add(id, scored(id, logprob));
    ASSERT_EQ(given.size(), 1u);
    keep(pieces, given);
  }
  EXPECT_TRUE(choice.flush().empty());
  const auto json_choice =
      completion_choice(pieces, 3, true, texts, choice.finish_reason(false));
  EXPECT_EQ(json_choice["text"], "Hi caf\xc3\xa9!");
  EXPECT_EQ(json_choice["index"], 3);
  EXPECT_EQ(json_choice["finish_reason"], "length");
  const auto& lp = json_choice["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"<s>", "Hi", " caf", "bytes:\\xc3", "bytes:\\xa9", "!"}));
  EXPECT_EQ(lp["token_logprobs"], json({nullptr, -1.5, -0.5, -0.25, -0.125, -2.0}));
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["top_logprobs"][1], json({{"Hi", -1.5}}));
  // é is one code point: "!" starts at 7 ("Hi caf" is 6), and é's second byte starts
  // inside the character it completes.
  EXPECT_EQ(lp["text_offset"], json({0, 0, 2, 6, 7, 7}));
  EXPECT_TRUE(completion_choice(pieces, 0, false, texts, "stop")["logprobs"].is_null());
}

TEST(completion_response,
     tokens_wait_while_a_stop_string_could_begin_in_them_and_it_cuts_the_text) {
  choice_pieces choice({"nd!", "zzz"}, texts);
  // " caf": a stop string of 3 bytes could still begin in its last 2.
  EXPECT_TRUE(choice.add(2, std::nullopt).empty());
  // " caf end": " caf" is final now; " end" waits.
  EXPECT_EQ(bytes_of(choice.add(5, std::nullopt)), strings({" caf"}));
  EXPECT_FALSE(choice.cut());
  // "!" completes "nd!", which begins inside " end": the text ends before it.
  EXPECT_EQ(bytes_of(choice.add(6, std::nullopt)), strings({" e"}));
  EXPECT_TRUE(choice.cut());
  EXPECT_TRUE(choice.add(6, std::nullopt).empty()) << "nothing reads after the stop";
  EXPECT_TRUE(choice.flush().empty());
  EXPECT_STREQ(choice.finish_reason(false), "stop");
}

TEST(completion_response, a_stop_string_is_found_once_and_across_tokens) {
  {
    // "!" appears with the second token; the third comes after the stop and reads not.
    choice_pieces choice({"!"}, texts);
    EXPECT_EQ(bytes_of(choice.add(2, std::nullopt)), strings({" caf"}));
    EXPECT_TRUE(choice.add(6, std::nullopt).empty());
    EXPECT_TRUE(choice.cut());
    EXPECT_TRUE(choice.add(5, std::nullopt).empty());
  }
  {
    // A stop string spelled by four tokens, é split in two: the text is empty.
    choice_pieces choice({"Hi caf\xc3\xa9"}, texts);
    for (const std::int32_t id : {1, 2, 3})
      EXPECT_TRUE(choice.add(id, std::nullopt).empty());
    EXPECT_FALSE(choice.cut());
    EXPECT_TRUE(choice.add(4, std::nullopt).empty());
    EXPECT_TRUE(choice.cut());
  }
  {
    // Two stop strings completed by one token: the one that begins first cuts.
    choice_pieces choice({"d!", "end!"}, texts);
    EXPECT_TRUE(choice.add(2, std::nullopt).empty());
    EXPECT_EQ(bytes_of(choice.add(5, std::nullopt)), strings({" caf"}));
    EXPECT_EQ(bytes_of(choice.add(6, std::nullopt)), strings({" "}));
  }
}

TEST(completion_response, what_waits_for_a_stop_string_is_given_when_generation_ends) {
  choice_pieces choice({"zzz"}, texts);
  EXPECT_TRUE(choice.add(2, scored(2, -1)).empty());
  const auto rest = choice.flush();
  EXPECT_EQ(bytes_of(rest), strings({" caf"}));
  ASSERT_TRUE(rest[0].score);
  EXPECT_EQ(rest[0].score->logprob, -1);
  EXPECT_STREQ(choice.finish_reason(false), "length");
  EXPECT_STREQ(choice.finish_reason(true), "stop") << "an EOS id";
}

TEST(completion_response, a_chunk_carries_one_token_and_the_last_one_the_finish_reason) {
  choice_pieces choice({}, texts);
  auto echoed = choice.echo({1}, {});
  auto generated = choice.add(5, scored(5, -2));
  ASSERT_EQ(generated.size(), 1u);
  const auto first = chunk_choice(echoed[0], 1, true, texts);
  EXPECT_EQ(first["text"], "Hi");
  EXPECT_TRUE(first["logprobs"]["token_logprobs"][0].is_null());
  const auto chunk = chunk_choice(generated[0], 1, true, texts);
  EXPECT_EQ(chunk["text"], " end");
  EXPECT_EQ(chunk["logprobs"]["text_offset"], json({2}));
  EXPECT_EQ(chunk["logprobs"]["token_logprobs"], json({-2.0}));
  EXPECT_TRUE(chunk["finish_reason"].is_null());
  EXPECT_TRUE(chunk_choice(generated[0], 1, false, texts)["logprobs"].is_null());
  const auto last = finish_chunk_choice(1, "stop");
  EXPECT_EQ(last["text"], "");
  EXPECT_EQ(last["finish_reason"], "stop");
  EXPECT_EQ(last["index"], 1);
}

} // namespace
