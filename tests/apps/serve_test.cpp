// `canopy serve` as a client sees it: the real program on a free loopback port, real
// sockets, hostile input. Each hostile case gets its 4xx with {"error": {"code",
// "message"}}, and the server keeps serving everyone else; a valid answer equals the
// mock model's row; SIGTERM answers what is in flight and exits 0; a client that goes
// away has its queries cancelled.

#include "api_error_body.hpp"
#include "canopy_process.hpp"
#include "http_test_client.hpp"
#include "shared_fixtures.hpp"

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/mock_backend.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

using namespace canopy::testing;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> mock_flags = {
    "--backend", "mock", "--vocab_size", "64", "--context_length", "32"};

std::vector<std::string> with(std::vector<std::string> more) {
  return flags_with(std::move(more), mock_flags);
}

/// The mock's row after `tokens` under the flags above.
std::vector<float> mock_row(const std::vector<std::int32_t>& tokens) {
  canopy::engine_config config;
  config.backend = "mock";
  config.vocab_size = 64;
  config.context_length = 32;
  auto spec = canopy::actors::backend_spec_for(config, "cpu");
  return canopy::backends::mock_logprobs(spec.mock, tokens.data(), tokens.size());
}

/// A POST of a JSON body, as the API's clients send it.
std::string json_post(const std::string& target, const std::string& body,
                      const std::string& headers = "") {
  return make_request("POST", target, body,
                      "Content-Type: application/json\r\n" + headers);
}

struct served : ::testing::Test {
  static inline std::unique_ptr<serve_process> server;
  static void SetUpTestSuite() {
    server = std::make_unique<serve_process>(
        with({"--max-body-bytes", "4096", "--max-header-bytes", "1024",
              "--header-timeout-ms", "300", "--max-batch", "4"}));
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server->stop(10s), 0) << server->err();
    server.reset();
  }
  std::uint16_t port() const { return server->port(); }

  test_response post(const std::string& target, const std::string& body) {
    return exchange(port(), json_post(target, body));
  }

  /// A valid query still gets the right answer.
  void expect_still_serving() {
    auto reply = post("/v1/logprobs", R"({"tokens": [3, 1, 4]})");
    ASSERT_EQ(reply.status, 200) << reply.body;
    auto values = json::parse(reply.body).at("logprobs").get<std::vector<float>>();
    EXPECT_EQ(values, mock_row({3, 1, 4}));
  }
};

TEST_F(served, a_valid_query_answers_the_models_row_as_json_and_binary) {
  auto reply = post("/v1/logprobs", R"({"tokens": [5, 9]})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto body = json::parse(reply.body);
  EXPECT_EQ(body.at("tokens").get<std::vector<int>>(), (std::vector<int>{5, 9}));
  EXPECT_EQ(body.at("logprobs").get<std::vector<float>>(), mock_row({5, 9}));
  EXPECT_NE(reply.header("server-timing").find("engine;dur="), std::string::npos);

  auto binary = exchange(port(), json_post("/v1/logprobs", R"({"tokens": [5, 9]})",
                                           "Accept: application/octet-stream\r\n"));
  ASSERT_EQ(binary.status, 200) << binary.body;
  EXPECT_EQ(binary.header("content-type"), "application/octet-stream");
  ASSERT_GE(binary.body.size(), 32u);
  EXPECT_EQ(binary.body.substr(0, 4), "CNPY");
  // Header, two sequence fields (length 2 and its ids), then 64 float32 values.
  const std::size_t values_at = 32 + 4 + 2 * 4;
  ASSERT_EQ(binary.body.size(), values_at + 64 * 4);
  std::vector<float> values(64);
  std::memcpy(values.data(), binary.body.data() + values_at, 64 * 4);
  EXPECT_EQ(values, mock_row({5, 9}));
}

TEST_F(served,
       malformed_json_wrong_types_and_missing_fields_are_400s_that_name_the_fault) {
  struct hostile {
    const char* body;
    const char* code;
    const char* named; // what the message must mention
  };
  const hostile cases[] = {
      {R"({"tokens": [1, 2)", "malformed_json", ""},
      {"\xff\xfe{", "malformed_json", ""},
      {R"([1, 2, 3])", "invalid_request", ""},
      {R"({"tokens": "1 2 3"})", "invalid_request", "tokens"},
      {R"({"tokens": [1, "2"]})", "invalid_request", "tokens[1]"},
      {R"({"tokens": [1, 2.5]})", "invalid_request", "tokens[1]"},
      {R"({})", "invalid_request", ""},
      {R"({"tokenz": [1]})", "invalid_request", "tokenz"},
      {R"({"tokens": [1], "top_k": 0})", "invalid_request", "top_k"},
  };
  for (const auto& c : cases) {
    auto reply = post("/v1/logprobs", c.body);
    EXPECT_EQ(reply.status, 400) << c.body;
    EXPECT_EQ(error_code(reply), c.code) << c.body;
    if (reply.status == 400) {
      EXPECT_NE(error_message(reply).find(c.named), std::string::npos)
          << c.body << " -> " << error_message(reply);
    }
  }
  expect_still_serving();
}

TEST_F(served, token_lists_the_engine_refuses_are_400s_with_the_engines_code) {
  struct hostile {
    std::string body;
    const char* code;
  };
  const hostile cases[] = {
      {R"({"tokens": []})", "empty_sequence"},
      {R"({"tokens": [1, -1]})", "token_out_of_range"},
      {R"({"tokens": [1, 64]})", "token_out_of_range"},
      {R"({"tokens": [1, 99999999999]})", "token_out_of_range"},
      {json{{"tokens", std::vector<int>(33, 1)}}.dump(), "sequence_too_long"},
      {R"({"batch": [[1], [2], [3], [4], [5]]})", "batch_too_large"},
      {R"({"batch": [[1], [2, 64]]})", "token_out_of_range"},
      {R"({"text": "hello"})", "no_tokenizer"},
  };
  for (const auto& c : cases) {
    auto reply = post("/v1/logprobs", c.body);
    EXPECT_EQ(reply.status, 400) << c.body << " -> " << reply.body;
    EXPECT_EQ(error_code(reply), c.code) << c.body;
  }
  auto reply = post("/v1/logprobs", R"({"tokens": [1, 64]})");
  EXPECT_NE(error_message(reply).find("token id 64"), std::string::npos) << reply.body;
  expect_still_serving();
}

TEST_F(served, a_body_over_the_limit_is_refused_before_it_is_sent) {
  test_client c(port());
  // Only the header section: the server must answer from Content-Length alone.
  ASSERT_TRUE(
      c.send("POST /v1/logprobs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
             "Content-Length: 100000\r\n\r\n"));
  auto reply = c.read_response(5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(error_code(*reply), "payload_too_large");
  expect_still_serving();
}

TEST_F(served, a_header_section_over_the_limit_is_431) {
  auto reply =
      exchange(port(), make_request("GET", "/healthz", "",
                                    "X-Filler: " + std::string(2000, 'a') + "\r\n"));
  EXPECT_EQ(reply.status, 431);
  EXPECT_EQ(error_code(reply), "header_too_large");
  expect_still_serving();
}

TEST_F(served, a_header_section_that_never_finishes_times_out_and_others_are_unaffected) {
  test_client slow(port());
  ASSERT_TRUE(slow.send("POST /v1/logprobs HTTP/1.1\r\nHost: t\r\n"));
  // Meanwhile another client is served at once.
  expect_still_serving();
  auto started = std::chrono::steady_clock::now();
  auto reply = slow.read_response(5s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 408);
  EXPECT_EQ(error_code(*reply), "request_timeout");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  EXPECT_TRUE(slow.closed_within(2s));
}

TEST_F(served, unknown_routes_are_404_and_wrong_methods_405_with_allow) {
  auto missing = exchange(port(), make_request("GET", "/v1/nothing"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(error_code(missing), "not_found");
  auto wrong = exchange(port(), make_request("GET", "/v1/logprobs"));
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(error_code(wrong), "method_not_allowed");
  EXPECT_EQ(wrong.header("allow"), "POST");
  auto traversal = exchange(port(), make_request("GET", "/../../etc/passwd"));
  EXPECT_EQ(traversal.status, 404);
  expect_still_serving();
}

TEST_F(served, keep_alive_serves_many_requests_on_one_connection) {
  test_client c(port());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.send(json_post("/v1/logprobs", json{{"tokens", {i % 64, 7}}}.dump())));
    auto reply = c.read_response();
    ASSERT_TRUE(reply) << "request " << i;
    ASSERT_EQ(reply->status, 200);
    EXPECT_EQ(json::parse(reply->body).at("logprobs").get<std::vector<float>>(),
              mock_row({i % 64, 7}));
  }
}

TEST_F(served, model_health_vocab_and_metrics_describe_the_server) {
  auto model = json::parse(exchange(port(), make_request("GET", "/v1/model")).body);
  EXPECT_EQ(model.at("vocab_size"), 64);
  EXPECT_EQ(model.at("context_length"), 32);
  EXPECT_EQ(model.at("tokenizer"), false);
  EXPECT_EQ(model.at("kv_dtype"), nullptr) << "the mock stores no KV";
  EXPECT_EQ(model.at("bos_token_id"), nullptr) << "the mock has no special tokens";
  EXPECT_EQ(model.at("eos_token_ids"), json::array());
  EXPECT_EQ(model.at("devices"), json::array({"cpu"}));
  EXPECT_EQ(
      json::parse(exchange(port(), make_request("GET", "/healthz")).body).at("status"),
      "ok");
  for (const char* document :
       {"/v1/vocab", "/v1/tokenizer/merges", "/v1/tokenizer/chat_templates"}) {
    auto reply = exchange(port(), make_request("GET", document));
    EXPECT_EQ(reply.status, 400) << document;
    EXPECT_EQ(error_code(reply), "no_tokenizer") << document;
  }
  auto metrics = exchange(port(), make_request("GET", "/metrics"));
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.header("content-type").find("text/plain"), std::string::npos);
  EXPECT_NE(metrics.body.find("canopy_queries_total"), std::string::npos) << metrics.body;
}

TEST_F(served, sample_with_a_seed_is_reproducible_and_greedy_follows_the_argmax) {
  auto once = post("/v1/sample", R"({"tokens": [1, 2], "max_tokens": 5, "seed": 7})");
  auto again = post("/v1/sample", R"({"tokens": [1, 2], "max_tokens": 5, "seed": 7})");
  ASSERT_EQ(once.status, 200) << once.body;
  EXPECT_EQ(json::parse(once.body).at("tokens"), json::parse(again.body).at("tokens"));
  EXPECT_EQ(json::parse(once.body).at("tokens").size(), 5u);

  auto greedy =
      post("/v1/sample", R"({"tokens": [1, 2], "max_tokens": 3, "temperature": 0})");
  ASSERT_EQ(greedy.status, 200) << greedy.body;
  std::vector<std::int32_t> context{1, 2};
  for (auto token : json::parse(greedy.body).at("tokens").get<std::vector<int>>()) {
    auto row = mock_row(context);
    EXPECT_EQ(token, std::max_element(row.begin(), row.end()) - row.begin());
    context.push_back(token);
  }
}

// Parsing and tokenizing run on handler threads: a body that takes seconds to tokenize
// (Llama 3's pre-tokenizer on 4 MB of spaces: seconds) holds no I/O thread.
TEST(serve_threads, a_slow_body_leaves_health_and_other_requests_prompt) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  serve_process server(
      flags_with({"--tokenizer", tokenizer.string()}, {"--backend", "mock"}));
  test_client slow(server.port());
  ASSERT_TRUE(slow.send(
      json_post("/v1/tokenize", json{{"text", std::string(4u << 20, ' ')}}.dump())));
  std::this_thread::sleep_for(300ms); // its body is in, and being tokenized
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(exchange(server.port(), make_request("GET", "/healthz")).status, 200);
  EXPECT_EQ(
      exchange(server.port(), json_post("/v1/tokenize", R"({"text": "Hello"})")).status,
      200);
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_LT(waited, 1s) << "the I/O thread was held";
  const auto reply = slow.read_response(120s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
}

TEST(serve_auth, a_bearer_token_guards_everything_but_health) {
  scratch_dir dir;
  const auto token_file = dir.path() / "token";
  std::ofstream(token_file) << "s3cret-token\n";
  serve_process server(with({"--auth-token-file", token_file.string()}));
  const std::string body = R"({"tokens": [1]})";
  auto none = exchange(server.port(), json_post("/v1/logprobs", body));
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(error_code(none), "unauthorized");
  auto wrong =
      exchange(server.port(),
               json_post("/v1/logprobs", body, "Authorization: Bearer s3cret-tokeX\r\n"));
  EXPECT_EQ(wrong.status, 401);
  auto prefix = exchange(
      server.port(), json_post("/v1/logprobs", body, "Authorization: Bearer s3cret\r\n"));
  EXPECT_EQ(prefix.status, 401);
  auto right =
      exchange(server.port(),
               json_post("/v1/logprobs", body, "Authorization: Bearer s3cret-token\r\n"));
  EXPECT_EQ(right.status, 200) << right.body;
  EXPECT_EQ(exchange(server.port(), make_request("GET", "/healthz")).status, 200);
  EXPECT_EQ(exchange(server.port(), make_request("GET", "/metrics")).status, 401);
  EXPECT_EQ(server.stop(10s), 0);
}

TEST(serve_auth, a_short_token_is_warned_about_at_start) {
  scratch_dir dir;
  const auto short_token = dir.path() / "short";
  std::ofstream(short_token) << "s3cret\n";
  serve_process warned(with({"--auth-token-file", short_token.string()}));
  EXPECT_NE(warned.err().find("auth token 1 has 6 characters"), std::string::npos)
      << warned.err();
  const auto long_token = dir.path() / "long";
  std::ofstream(long_token) << std::string(32, 'k') << "\n";
  serve_process quiet(with({"--auth-token-file", long_token.string()}));
  EXPECT_EQ(quiet.err().find("auth token has"), std::string::npos) << quiet.err();
}

TEST(serve_auth, a_token_file_with_surrounding_whitespace_holds_the_token_alone) {
  scratch_dir dir;
  const auto token_file = dir.path() / "token";
  std::ofstream(token_file) << "  s3cret-token \t\r\n";
  serve_process server(with({"--auth-token-file", token_file.string()}));
  auto right =
      exchange(server.port(), json_post("/v1/logprobs", R"({"tokens": [1]})",
                                        "Authorization: Bearer s3cret-token\r\n"));
  EXPECT_EQ(right.status, 200) << right.body;
  EXPECT_EQ(server.stop(10s), 0);
}

TEST(serve_startup, listening_on_every_address_without_a_token_warns) {
  serve_process open(with({"--host", "0.0.0.0"}));
  EXPECT_EQ(open.stop(10s), 0);
  EXPECT_NE(open.err().find("WARNING: listening on 0.0.0.0 with no --auth-token-file"),
            std::string::npos)
      << open.err();
  serve_process local(mock_flags);
  EXPECT_EQ(local.stop(10s), 0);
  EXPECT_EQ(local.err().find("WARNING"), std::string::npos) << local.err();
}

TEST(serve_lifecycle, sigterm_answers_the_request_in_flight_then_exits_0) {
  // Every pass takes 400 ms, so the request is surely in flight when SIGTERM lands.
  serve_process server(with({"--mock_cost_per_pass_us", "400000"}));
  test_client c(server.port());
  ASSERT_TRUE(c.send(json_post("/v1/logprobs", R"({"tokens": [2, 7]})")));
  std::this_thread::sleep_for(100ms);
  ::kill(server.pid(), SIGTERM);
  auto reply = c.read_response(10s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(json::parse(reply->body).at("logprobs").get<std::vector<float>>(),
            mock_row({2, 7}));
  EXPECT_EQ(server.wait(10s), 0) << server.err();
}

TEST(serve_lifecycle, a_client_that_leaves_has_its_queries_cancelled) {
  // Queries wait 500 ms for a batch, long enough to leave first.
  serve_process server(with({"--flush_when_idle", "false", "--batch_timeout_ms", "500"}));
  {
    test_client c(server.port());
    ASSERT_TRUE(c.send(json_post("/v1/logprobs", R"({"batch": [[1, 2, 3], [4, 5]]})")));
    std::this_thread::sleep_for(100ms);
    c.reset(); // gone with the request in flight (a half-close would be answered)
  }
  std::this_thread::sleep_for(800ms);
  auto metrics = exchange(server.port(), make_request("GET", "/metrics")).body;
  EXPECT_NE(metrics.find("canopy_tokens_computed_total 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("code=\"cancelled\""), std::string::npos) << metrics;
  EXPECT_EQ(server.stop(10s), 0);
}

// A client that closes normally (FIN, as HTTP libraries do on a timeout) reads as a
// half-close; the probes tell it from one that still reads (Note [departed clients]).
TEST(serve_lifecycle, a_client_that_closes_normally_stops_its_generation) {
  // 100 ms a pass: 400 tokens would take 40 s.
  serve_process server(
      with({"--mock_cost_per_pass_us", "100000", "--context_length", "1024"}));
  {
    test_client c(server.port());
    ASSERT_TRUE(
        c.send(json_post("/v1/sample", R"({"tokens": [1, 2], "max_tokens": 400})")));
    std::this_thread::sleep_for(200ms);
  }                                // closed: FIN, no reset
  std::this_thread::sleep_for(4s); // two probes, the second fails
  auto passes = [&] {
    const auto metrics = exchange(server.port(), make_request("GET", "/metrics")).body;
    const auto at = metrics.find("\ncanopy_tokens_computed_total ");
    return at == std::string::npos ? -1 : std::stol(metrics.substr(at + 30));
  };
  const auto after_leaving = passes();
  ASSERT_GT(after_leaving, 0) << "the generation had started";
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(passes(), after_leaving) << "it stopped computing, at " << after_leaving;
  EXPECT_LT(after_leaving, 60) << "stopped within seconds, not after 400 tokens";
  EXPECT_EQ(server.stop(10s), 0);
}

TEST(serve_lifecycle, a_half_closed_client_still_gets_its_answer_after_the_probes) {
  serve_process server(with({"--mock_cost_per_pass_us", "100000"}));
  test_client c(server.port());
  ASSERT_TRUE(c.send(json_post("/v1/sample", R"({"tokens": [1, 2], "max_tokens": 25})")));
  c.shutdown_send(); // still reading
  std::optional<test_response> reply;
  int interim = 0;
  while ((reply = c.read_response(10s)) && reply->status == 100)
    ++interim;
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body;
  EXPECT_EQ(json::parse(reply->body).at("tokens").size(), 25u);
  EXPECT_GE(interim, 1) << "2.5 s of computing: probed at least once";
}

// One 84-byte request asked for 1024 x 511 tokens; all requests together are bounded
// too, as their answers' bytes are.
TEST(serve_limits, generation_is_bounded_per_request_and_in_all) {
  serve_process server(
      with({"--max-generated-tokens", "100", "--generation-budget-tokens", "120",
            "--mock_cost_per_pass_us", "100000", "--context_length", "1024"}));
  auto big = exchange(server.port(), json_post("/v1/sample", R"({"batch": [[1], [2]],
                                                   "max_tokens": 51})"));
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(error_code(big), "generation_too_large");
  EXPECT_NE(big.body.find("102 tokens"), std::string::npos) << big.body;
  // 100 tokens in flight (10 s at 100 ms a pass); 30 more do not fit in 120.
  test_client first(server.port());
  ASSERT_TRUE(
      first.send(json_post("/v1/sample", R"({"tokens": [1], "max_tokens": 100})")));
  std::this_thread::sleep_for(300ms);
  auto second = exchange(server.port(), json_post("/v1/sample", R"({"tokens": [2],
                                                    "max_tokens": 30})"));
  EXPECT_EQ(second.status, 503);
  EXPECT_EQ(error_code(second), "server_busy");
  EXPECT_NE(second.body.find("tokens (--generation-budget-tokens)"), std::string::npos)
      << second.body;
  first.reset(); // leaves: its tokens go back to the budget
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(exchange(server.port(), json_post("/v1/sample", R"({"tokens": [2],
                                                 "max_tokens": 3})"))
                .status,
            200);
}

TEST(serve_limits, a_completion_counts_every_choice_it_generates) {
  CANOPY_SHARED_PATH_OR_SKIP(gpt2, "models/gpt2-synthetic");
  serve_process server(
      flags_with({"--tokenizer", gpt2.string(), "--max-generated-tokens", "100"},
                 {"--backend", "mock"}));
  const auto ask = [&](int n) {
    return exchange(server.port(), json_post("/v1/completions", json{{"model", "mock"},
                                                                     {"prompt", {1, 2}},
                                                                     {"n", n},
                                                                     {"max_tokens", 30}}
                                                                    .dump()));
  };
  const auto many = ask(4);
  EXPECT_EQ(many.status, 400) << many.body;
  EXPECT_EQ(error_code(many), "generation_too_large");
  EXPECT_EQ(ask(3).status, 200) << "90 tokens fit";
}

TEST(serve_limits,
     a_prompt_id_outside_the_vocabulary_is_refused_before_anything_is_sent) {
  CANOPY_SHARED_PATH_OR_SKIP(gpt2, "models/gpt2-synthetic");
  serve_process server(flags_with({"--tokenizer", gpt2.string()}, {"--backend", "mock"}));
  for (const bool stream : {false, true}) {
    const auto reply =
        exchange(server.port(), json_post("/v1/completions", json{{"model", "mock"},
                                                                  {"prompt", {1, 99999}},
                                                                  {"echo", true},
                                                                  {"max_tokens", 0},
                                                                  {"stream", stream}}
                                                                 .dump()));
    EXPECT_EQ(reply.status, 400) << "stream " << stream << ": " << reply.body;
    EXPECT_EQ(error_code(reply), "token_out_of_range");
    EXPECT_NE(reply.body.find("token id 99999 at position 1"), std::string::npos)
        << reply.body;
  }
}

TEST(serve_limits, an_unknown_model_is_named_back_but_not_whole) {
  serve_process server(mock_flags);
  const auto reply = exchange(
      server.port(),
      json_post("/v1/completions",
                json{{"model", std::string(1u << 20, 'm')}, {"prompt", "x"}}.dump()));
  EXPECT_EQ(reply.status, 404);
  EXPECT_EQ(error_code(reply), "model_not_found");
  EXPECT_LT(reply.body.size(), 1000u) << "the 1 MB name was echoed";
  EXPECT_NE(reply.body.find("mmm..."), std::string::npos) << reply.body;
}

TEST(serve_startup, a_port_in_use_is_a_clear_error) {
  serve_process first(mock_flags);
  auto taken =
      run_canopy({"serve", "--port", std::to_string(first.port()), "--backend", "mock"});
  EXPECT_NE(taken.exit_code, 0);
  EXPECT_NE(taken.err.find(std::to_string(first.port())), std::string::npos)
      << describe(taken);
}

} // namespace
