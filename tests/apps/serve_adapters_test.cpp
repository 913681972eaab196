// LoRA adapters over real sockets, on the mock (whose rows under an adapter are those of
// mock_adapted over the directory's two files): loaded at start with --adapters and
// while serving with POST /v1/adapters, listed by /v1/models as models whose parent is
// the served one, named by "adapter" in /v1/logprobs and /v1/sample and by "model" in
// completions, unloaded with POST /v1/adapters/remove; an unknown one is a 404 naming
// what is loaded; an open server (no bearer token) loads and unloads nothing.

#include "api_error_body.hpp"
#include "canopy_process.hpp"
#include "http_test_client.hpp"
#include "mock_adapter.hpp"
#include "shared_fixtures.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

using namespace canopy::testing;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string token = "adapter-admin-token-0001";

/// The mock's row after `tokens` under the adapter in `dir` (the flags below).
std::vector<float> adapted_row(const scratch_dir& dir,
                               const std::vector<std::int32_t>& tokens) {
  canopy::engine_config config;
  config.backend = "mock";
  config.vocab_size = 64;
  config.context_length = 32;
  return mock_adapted_row(config, dir, tokens);
}

struct served_adapters : ::testing::Test {
  scratch_dir files, a, b;
  std::unique_ptr<serve_process> server;

  void SetUp() override {
    write_mock_adapter(a, "weights of a");
    write_mock_adapter(b, "weights of b");
    const auto tokens = files.path() / "tokens";
    std::ofstream(tokens) << token << "\n";
    server = std::make_unique<serve_process>(std::vector<std::string>{
        "--backend", "mock", "--vocab_size", "64", "--context_length", "32",
        "--auth-token-file", tokens.string(), "--adapters", "a=" + a.path().string()});
  }
  void TearDown() override { EXPECT_EQ(server->stop(10s), 0) << server->err(); }

  test_response post(const std::string& target, const json& body) {
    return exchange(server->port(), make_request("POST", target, body.dump(),
                                                 "Content-Type: application/json\r\n"
                                                 "Authorization: Bearer " +
                                                     token + "\r\n"));
  }
  std::vector<std::string> listed_models() {
    const auto reply =
        exchange(server->port(), make_request("GET", "/v1/models", "",
                                              "Authorization: Bearer " + token + "\r\n"));
    EXPECT_EQ(reply.status, 200) << reply.body;
    std::vector<std::string> ids;
    const auto listed = json::parse(reply.body);
    for (const auto& m : listed.at("data")) {
      if (ids.empty())
        EXPECT_FALSE(m.contains("parent")) << "the served model comes first";
      else
        EXPECT_EQ(m.value("parent", ""), ids.front());
      ids.push_back(m.at("id"));
    }
    return ids;
  }
  std::vector<float> row(const json& body) {
    const auto reply = post("/v1/logprobs", body);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.status == 200
               ? json::parse(reply.body).at("logprobs").get<std::vector<float>>()
               : std::vector<float>{};
  }
};

TEST_F(served_adapters, are_loaded_listed_queried_and_removed) {
  ASSERT_EQ(listed_models().size(), 2u);
  EXPECT_EQ(listed_models().at(1), "a");
  EXPECT_EQ(row({{"tokens", {3, 1, 4}}, {"adapter", "a"}}), adapted_row(a, {3, 1, 4}));

  const auto unknown = post("/v1/logprobs", {{"tokens", {3}}, {"adapter", "b"}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(error_code(unknown), "unknown_adapter");
  EXPECT_NE(unknown.body.find("(loaded: a)"), std::string::npos) << unknown.body;

  const auto loaded = post("/v1/adapters", {{"name", "b"}, {"path", b.path().string()}});
  ASSERT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_EQ(json::parse(loaded.body).at("adapters"), json({"a", "b"}));
  EXPECT_EQ(row({{"tokens", {3, 1, 4}}, {"adapter", "b"}}), adapted_row(b, {3, 1, 4}));
  const auto twice = post("/v1/adapters", {{"name", "b"}, {"path", b.path().string()}});
  EXPECT_EQ(twice.status, 400);
  const auto nowhere = post("/v1/adapters", {{"name", "c"}, {"path", "/no/such/dir"}});
  EXPECT_EQ(nowhere.status, 400);
  EXPECT_NE(nowhere.body.find("no adapter_config.json"), std::string::npos)
      << nowhere.body;

  // Greedy sampling follows the adapter's rows.
  const auto sampled =
      post("/v1/sample",
           {{"tokens", {3}}, {"max_tokens", 1}, {"temperature", 0}, {"adapter", "b"}});
  ASSERT_EQ(sampled.status, 200) << sampled.body;
  const auto b_row = adapted_row(b, {3});
  const auto argmax = std::max_element(b_row.begin(), b_row.end()) - b_row.begin();
  EXPECT_EQ(json::parse(sampled.body).at("tokens"), json({argmax})) << sampled.body;
  // Completions take the adapter as "model" (the mock has no tokenizer, so they get
  // as far as that, where an unknown model is a 404).
  const auto completion = post("/v1/completions", {{"model", "b"}, {"prompt", "x"}});
  EXPECT_EQ(error_code(completion), "no_tokenizer") << completion.body;

  const auto removed = post("/v1/adapters/remove", {{"name", "a"}});
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(json::parse(removed.body).at("adapters"), json({"b"}));
  EXPECT_EQ(post("/v1/logprobs", {{"tokens", {3}}, {"adapter", "a"}}).status, 404);
  EXPECT_EQ(error_code(post("/v1/adapters/remove", {{"name", "a"}})), "unknown_adapter");
  EXPECT_EQ(listed_models().size(), 2u);
}

TEST(serve_adapters, an_open_server_neither_loads_nor_removes_adapters) {
  scratch_dir a;
  write_mock_adapter(a, "weights of a");
  serve_process server(
      {"--backend", "mock", "--vocab_size", "64", "--context_length", "32"});
  for (const auto& [target, body] :
       {std::pair<std::string, json>{"/v1/adapters",
                                     {{"name", "a"}, {"path", a.path().string()}}},
        {"/v1/adapters/remove", {{"name", "a"}}}}) {
    const auto reply = exchange(server.port(), make_request("POST", target, body.dump(),
                                                            "Content-Type: "
                                                            "application/json\r\n"));
    EXPECT_EQ(reply.status, 403) << target;
    EXPECT_NE(reply.body.find("--auth-token-file"), std::string::npos) << reply.body;
  }
  EXPECT_EQ(server.stop(10s), 0);
}

} // namespace
