// POST /v1/next_byte through `canopy serve` on stories260K, as a byte-level client sees
// it: the answer is issue 30's contract over the row /v1/logprobs serves (its float32
// values are exact in JSON), with the byte vocabulary of /v1/vocab and the EOS ids of
// /v1/model; a batch answers each entry; hostile bodies get 400s naming the fault, and
// the server serves on; a model without a tokenizer refuses by name.

#include "api_error_body.hpp"
#include "canopy_process.hpp"
#include "http_test_client.hpp"
#include "next_byte_reference.hpp"
#include "shared_fixtures.hpp"

#include <canopy/backends/tokenizers/hex_bytes.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace canopy::testing;
using canopy::backends::byte_reduce;
using canopy::backends::next_byte_distribution;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

test_response post(std::uint16_t port, const std::string& target,
                   const std::string& body) {
  return canopy::testing::exchange(
      port, make_request("POST", target, body, "Content-Type: application/json\r\n"));
}

double log_or_none(const json& x) {
  return x.is_null() ? no_mass : x.get<double>();
}

next_byte_distribution read_answer(const json& j) {
  next_byte_distribution d;
  for (int b = 0; b < 256; ++b)
    d.logprobs[b] = log_or_none(j.at("logprobs").at(b));
  d.end_of_token = log_or_none(j.at("end_of_token"));
  if (!j.at("eos").is_null())
    d.eos = j.at("eos").get<double>();
  d.log_mass = log_or_none(j.at("log_mass"));
  return d;
}

TEST(serve_next_byte, answers_the_contract_over_the_served_row_and_refuses_by_name) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  serve_process server({"--model", model.string(), "--max-batch", "4"});
  const auto port = server.port();

  const auto vocab_reply =
      canopy::testing::exchange(port, make_request("GET", "/v1/vocab", "", ""));
  ASSERT_EQ(vocab_reply.status, 200) << vocab_reply.body;
  std::vector<std::optional<std::string>> vocab;
  const auto vocab_body = json::parse(vocab_reply.body);
  for (const auto& hex : vocab_body.at("vocab"))
    vocab.push_back(hex.is_null()
                        ? std::nullopt
                        : canopy::backends::parse_hex_bytes(hex.get<std::string>()));
  const auto model_reply =
      canopy::testing::exchange(port, make_request("GET", "/v1/model", "", ""));
  const auto eos =
      json::parse(model_reply.body).at("eos_token_ids").get<std::vector<std::int32_t>>();
  ASSERT_FALSE(eos.empty());
  ASSERT_EQ(vocab.size(), 512u);

  const std::vector<std::int32_t> tokens{1, 403, 407};
  const auto row_reply = post(port, "/v1/logprobs", json{{"tokens", tokens}}.dump());
  ASSERT_EQ(row_reply.status, 200) << row_reply.body;
  const auto row = json::parse(row_reply.body).at("logprobs").get<std::vector<float>>();

  for (const auto& [prefix, reduce] : {std::pair<std::string, std::string>{"", "sum"},
                                       {"20", "sum"},
                                       {"2074", "max"},
                                       {"ff", "sum"}}) {
    const auto reply =
        post(port, "/v1/next_byte",
             json{{"tokens", tokens}, {"prefix", prefix}, {"reduce", reduce}}.dump());
    ASSERT_EQ(reply.status, 200) << reply.body;
    const auto body = json::parse(reply.body);
    EXPECT_EQ(body.at("tokens").get<std::vector<std::int32_t>>(), tokens);
    EXPECT_EQ(body.at("prefix"), prefix);
    const auto bytes = *canopy::backends::parse_hex_bytes(prefix);
    // Float64 sums of the same float32 values in another order: far within 1e-9.
    expect_same(read_answer(body),
                reference(vocab, eos, row.data(), bytes,
                          reduce == "sum" ? byte_reduce::sum : byte_reduce::max),
                1e-9, "prefix " + prefix + ", " + reduce);
  }

  const auto batch =
      post(port, "/v1/next_byte",
           R"({"batch": [{"tokens": [1, 403]}, {"tokens": [1], "prefix": "20"}]})");
  ASSERT_EQ(batch.status, 200) << batch.body;
  const auto results = json::parse(batch.body).at("results");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[0].at("eos").is_null()); // the empty prefix has EOS
  EXPECT_TRUE(results[1].at("eos").is_null());

  struct hostile {
    const char* body;
    const char* code;
    const char* named;
  };
  const hostile cases[] = {
      {R"({"tokens": [1], "prefix": "2"})", "invalid_request", "prefix is not hex"},
      {R"({"tokens": [1], "prefix": "zz"})", "invalid_request", "prefix is not hex"},
      {R"({"tokens": [1], "reduce": "mean"})", "invalid_request", "reduce"},
      {R"({"batch": []})", "invalid_request", "batch is empty"},
      {R"({"batch": [{"tokens": [1]}, {"tokens": [1]}, {"tokens": [1]}, {"tokens": [1]},
                     {"tokens": [1]}]})",
       "batch_too_large", "batch"},
      {R"({"tokens": [1, 512]})", "token_out_of_range", "512"},
      {R"({"tokens": []})", "empty_sequence", "tokens"},
  };
  for (const auto& c : cases) {
    const auto reply = post(port, "/v1/next_byte", c.body);
    EXPECT_EQ(reply.status, 400) << c.body;
    EXPECT_EQ(error_code(reply), c.code) << c.body;
    if (reply.status == 400) {
      EXPECT_NE(error_message(reply).find(c.named), std::string::npos)
          << c.body << " -> " << error_message(reply);
    }
  }
  EXPECT_EQ(post(port, "/v1/next_byte", R"({"tokens": [1]})").status, 200);

  const auto metrics =
      canopy::testing::exchange(port, make_request("GET", "/metrics", "", "")).body;
  EXPECT_NE(metrics.find("\ncanopy_next_byte_masses_kept "), std::string::npos);
  EXPECT_EQ(server.stop(10s), 0) << server.err();
}

TEST(serve_next_byte, a_model_without_a_tokenizer_refuses_by_name) {
  serve_process server({"--backend", "mock", "--vocab_size", "64"});
  const auto reply = post(server.port(), "/v1/next_byte", R"({"tokens": [1, 2]})");
  EXPECT_EQ(error_code(reply), "no_tokenizer") << reply.body;
  EXPECT_EQ(server.stop(10s), 0) << server.err();
}

} // namespace
