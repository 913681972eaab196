// Tenants and cache_salt over real sockets: with several tokens in --auth-token-file each
// token is a tenant, and a tenant's requests (and a request with its own cache_salt)
// never hit what another cached, so no response's timing tells what another asked; a
// tenant's /v1/cache/clear drops its own entries only, and its /v1/cache/tree shows its
// own. Hits are read off
// canopy_cache_hits_total rather than timed.

#include "canopy_process.hpp"
#include "cli_runner.hpp"
#include "http_test_client.hpp"
#include "shared_fixtures.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

using namespace canopy::testing;
using namespace std::chrono_literals;

namespace {

const std::string first_token = "tenant-one-token-0001";
const std::string second_token = "tenant-two-token-0002";

struct tenants : ::testing::Test {
  scratch_dir dir;
  std::unique_ptr<serve_process> server;

  void SetUp() override {
    const auto tokens = dir.path() / "tokens";
    // Blank lines and surrounding whitespace are no part of any token.
    std::ofstream(tokens) << first_token << "\n\n  " << second_token << " \n";
    server = std::make_unique<serve_process>(std::vector<std::string>{
        "--backend", "mock", "--vocab_size", "64", "--context_length", "32",
        "--auth-token-file", tokens.string()});
  }
  void TearDown() override { EXPECT_EQ(server->stop(10s), 0) << server->err(); }

  test_response post(const std::string& token, const std::string& target,
                     const std::string& body) {
    return exchange(
        server->port(),
        make_request("POST", target, body,
                     "Content-Type: application/json\r\nAuthorization: Bearer " + token +
                         "\r\n"));
  }

  void ask(const std::string& token, const std::string& body) {
    const auto reply = post(token, "/v1/logprobs", body);
    ASSERT_EQ(reply.status, 200) << reply.body;
  }

  std::uint64_t hits() {
    const auto metrics = exchange(server->port(), make_request("GET", "/metrics", "",
                                                               "Authorization: Bearer " +
                                                                   first_token + "\r\n"))
                             .body;
    const std::string name = "\ncanopy_cache_hits_total ";
    const auto at = metrics.find(name);
    EXPECT_NE(at, std::string::npos) << metrics;
    return at == std::string::npos ? 0 : std::stoull(metrics.substr(at + name.size()));
  }
};

TEST_F(tenants, a_tenant_never_hits_what_another_cached) {
  ask(first_token, R"({"tokens": [1, 2, 3]})");
  ask(second_token, R"({"tokens": [1, 2, 3]})");
  EXPECT_EQ(hits(), 0u) << "the second tenant hit the first one's row";
  ask(first_token, R"({"tokens": [1, 2, 3]})");
  ask(second_token, R"({"tokens": [1, 2, 3]})");
  EXPECT_EQ(hits(), 2u) << "each tenant hits its own";

  // genlm's cache_kv and sampling are partitioned the same way.
  ASSERT_EQ(post(first_token, "/v1/cache/kv", R"({"tokens": [4, 5]})").status, 200);
  ask(second_token, R"({"tokens": [4, 5]})");
  EXPECT_EQ(hits(), 2u);
  ASSERT_EQ(post(first_token, "/v1/sample", R"({"tokens": [9], "max_tokens": 1})").status,
            200);
  ask(second_token, R"({"tokens": [9]})");
  EXPECT_EQ(hits(), 2u);
}

TEST_F(tenants, a_cache_salt_is_a_partition_of_its_own_within_the_tenant) {
  ask(first_token, R"({"tokens": [6, 7]})");
  ask(first_token, R"({"tokens": [6, 7], "cache_salt": "mine"})");
  EXPECT_EQ(hits(), 0u) << "a salted request hit the unsalted row";
  ask(first_token, R"({"tokens": [6, 7], "cache_salt": "mine"})");
  EXPECT_EQ(hits(), 1u);
  ask(second_token, R"({"tokens": [6, 7], "cache_salt": "mine"})");
  EXPECT_EQ(hits(), 1u) << "one salt in two tenants is two partitions";

  const auto empty =
      post(first_token, "/v1/logprobs", R"({"tokens": [6], "cache_salt": ""})");
  EXPECT_EQ(empty.status, 400);
  EXPECT_NE(empty.body.find("cache_salt"), std::string::npos) << empty.body;
  const auto long_salt =
      post(first_token, "/v1/logprobs",
           R"({"tokens": [6], "cache_salt": ")" + std::string(257, 's') + R"("})");
  EXPECT_EQ(long_salt.status, 400);
  EXPECT_NE(long_salt.body.find("cache_salt has 257 bytes"), std::string::npos)
      << long_salt.body;
}

TEST_F(tenants, a_tenants_cache_clear_drops_its_own_entries_only) {
  ask(first_token, R"({"tokens": [8, 9]})");
  ask(second_token, R"({"tokens": [8, 9]})");
  ASSERT_EQ(post(second_token, "/v1/cache/clear", "{}").status, 200);
  ask(first_token, R"({"tokens": [8, 9]})");
  EXPECT_EQ(hits(), 1u) << "the second tenant's clear dropped the first one's row";
  ask(second_token, R"({"tokens": [8, 9]})");
  EXPECT_EQ(hits(), 1u) << "the second tenant's clear kept its own row";
}

// POST /v1/cache/tree (the page's cache view) shows a tenant its own partition only,
// salted or not, with what each node holds; its limits are checked by name.
TEST_F(tenants, a_tenants_cache_tree_is_its_own) {
  ask(first_token, R"({"tokens": [3, 4, 5]})");
  ask(second_token, R"({"tokens": [3, 6]})");
  ask(first_token, R"({"tokens": [3, 4, 7], "cache_salt": "mine"})");
  const auto tree = [&](const std::string& token, const std::string& body) {
    const auto reply = post(token, "/v1/cache/tree", body);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return nlohmann::json::parse(reply.body);
  };
  const auto first = tree(first_token, R"({"tokens": [3], "depth": 2})");
  EXPECT_EQ(first.at("tokens"), nlohmann::json::array({3}));
  EXPECT_EQ(first.at("truncated"), false);
  const auto& nodes = first.at("nodes");
  ASSERT_EQ(nodes.size(), 3u) << first.dump() << ": 3, then 4, then 5";
  EXPECT_EQ(nodes[1].at("token"), 4);
  EXPECT_EQ(nodes[1].at("parent"), 0);
  EXPECT_EQ(nodes[2].at("token"), 5);
  EXPECT_EQ(nodes[2].at("parent"), 1);
  EXPECT_GT(nodes[2].at("row_bytes").get<std::uint64_t>(), 0u);
  ASSERT_EQ(nodes[2].at("kv").size(), 1u);
  EXPECT_EQ(nodes[2].at("kv")[0].at("tier"), "device");
  EXPECT_EQ(nodes[2].at("kv")[0].at("worker"), 0);

  const auto second = tree(second_token, R"({"depth": 1})").at("nodes");
  ASSERT_EQ(second.size(), 2u) << second.dump() << ": the root and 3";
  EXPECT_EQ(second[1].at("children"), 1) << "6 only, not the other tenant's 4";
  const auto salted =
      tree(first_token, R"({"tokens": [3, 4], "cache_salt": "mine", "depth": 1})");
  ASSERT_EQ(salted.at("nodes").size(), 2u);
  EXPECT_EQ(salted.at("nodes")[1].at("token"), 7);
  EXPECT_TRUE(tree(second_token, R"({"tokens": [3, 4]})").at("nodes").empty());

  const auto deep = post(first_token, "/v1/cache/tree", R"({"depth": 9})");
  EXPECT_EQ(deep.status, 400);
  EXPECT_NE(deep.body.find("depth must be at most 8"), std::string::npos) << deep.body;
  const auto both = post(first_token, "/v1/cache/tree", R"({"tokens": [], "text": "a"})");
  EXPECT_EQ(both.status, 400) << both.body;
  const auto adapter = post(first_token, "/v1/cache/tree", R"({"adapter": "nobody"})");
  EXPECT_EQ(adapter.status, 404) << adapter.body;
}

TEST(serve_tenants, a_token_repeated_in_the_file_is_refused_at_start) {
  scratch_dir dir;
  const auto tokens = dir.path() / "tokens";
  std::ofstream(tokens) << first_token << "\n"
                        << second_token << "\n"
                        << first_token << "\n";
  const auto refused = run_canopy({"serve", "--port", "0", "--backend", "mock",
                                   "--auth-token-file", tokens.string()});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("token 3 repeats an earlier one"), std::string::npos)
      << refused.err;
}

} // namespace
