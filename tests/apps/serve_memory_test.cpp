// The memory a client can make `canopy serve` hold (docs/http-api.md: "Memory a client
// can make the server hold"): an answer larger than --max-answer-bytes is refused before
// it is computed; answers and bodies past their budgets get 503; a client that stops
// reading is closed after --write-stall-timeout-ms and its answer's bytes go back; and a
// flood of such clients keeps the process under the documented bound.

#include "api_error_body.hpp"
#include "canopy_process.hpp"
#include "http_test_client.hpp"

#include <canopy/server/server_options.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

using namespace canopy::testing;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string logprobs_request(std::size_t tokens, bool all_positions,
                             const std::string& extra_headers = "",
                             const std::string& extra_fields = "") {
  json body = {{"tokens", std::vector<int>(tokens, 7)}, {"all_positions", all_positions}};
  auto text = body.dump();
  text.insert(text.size() - 1, extra_fields);
  return make_request("POST", "/v1/logprobs", text,
                      "Content-Type: application/json\r\n" + extra_headers);
}

/// A process's memory figure from /proc (kB there), in bytes.
std::size_t proc_status_bytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0)
      return std::stoull(line.substr(field.size() + 1)) * 1024;
  return 0;
}

// A GPT-2-sized vocabulary: one all-positions row set of 80 tokens is 64 MB of JSON.
const std::vector<std::string> big_vocab = {
    "--backend", "mock", "--vocab_size", "50257", "--context_length", "256"};

TEST(serve_memory,
     an_answer_past_the_byte_limit_is_413_naming_the_limit_and_others_pass) {
  serve_process server({"--backend", "mock", "--vocab_size", "64", "--context_length",
                        "32", "--max-answer-bytes", "2000"});
  // Three JSON rows of 64 values can take 3 x 64 x 16 bytes.
  auto refused = exchange(server.port(), logprobs_request(3, true));
  EXPECT_EQ(refused.status, 413) << refused.body;
  EXPECT_EQ(error_code(refused), "answer_too_large");
  EXPECT_NE(refused.body.find("limit of 2000"), std::string::npos) << refused.body;
  EXPECT_EQ(exchange(server.port(), logprobs_request(3, false)).status, 200);
  // The same rows as float16 in the binary format are 384 bytes of values.
  auto binary = exchange(server.port(),
                         logprobs_request(3, true, "Accept: application/octet-stream\r\n",
                                          R"(,"dtype":"float16")"));
  EXPECT_EQ(binary.status, 200) << binary.body;
  EXPECT_EQ(binary.headers["content-type"], "application/octet-stream");
  EXPECT_EQ(
      exchange(server.port(), logprobs_request(3, true, "", R"(,"top_k":2)")).status,
      200);
  EXPECT_EQ(server.stop(10s), 0) << server.err();
}

TEST(serve_memory, a_reader_that_stalls_holds_the_answer_budget_until_it_is_closed) {
  // Room for one 80-row answer (about 64 MB of JSON and the 16 MB of rows), not two.
  serve_process server(flags_with(
      {"--answer-budget-bytes", "120000000", "--write-stall-timeout-ms", "1000"},
      big_vocab));
  test_client stalled(server.port());
  ASSERT_TRUE(stalled.send(logprobs_request(80, true)));
  ASSERT_TRUE(stalled.readable_within(20s)) << "its answer is being written";
  auto busy = exchange(server.port(), logprobs_request(80, true));
  EXPECT_EQ(busy.status, 503) << busy.body.substr(0, 300);
  EXPECT_EQ(error_code(busy), "server_busy");
  EXPECT_EQ(busy.headers["retry-after"], "1");
  EXPECT_NE(busy.body.find("--answer-budget-bytes"), std::string::npos) << busy.body;
  // Small answers still fit beside it.
  EXPECT_EQ(exchange(server.port(), logprobs_request(1, false)).status, 200);
  // /metrics shows what it holds.
  const auto metrics = exchange(server.port(), make_request("GET", "/metrics")).body;
  const std::string used = "canopy_http_budget_used{budget=\"answers\",unit=\"bytes\"} ";
  const auto at = metrics.find(used);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GT(std::stoull(metrics.substr(at + used.size())), 60'000'000u);
  EXPECT_NE(metrics.find(
                "canopy_http_budget_limit{budget=\"answers\",unit=\"bytes\"} 120000000"),
            std::string::npos);
  EXPECT_NE(metrics.find("canopy_http_budget_used{budget=\"bodies\",unit=\"bytes\"}"),
            std::string::npos);
  EXPECT_NE(
      metrics.find("canopy_http_budget_used{budget=\"generation\",unit=\"tokens\"} 0"),
      std::string::npos);
  // The stalled reader is closed after a second; then the same answer fits again.
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (status != 200 && std::chrono::steady_clock::now() - start < 20s) {
    std::this_thread::sleep_for(100ms);
    status = exchange(server.port(), logprobs_request(80, true)).status;
  }
  EXPECT_EQ(status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 800ms) << "it waited for the stall";
  EXPECT_EQ(server.stop(10s), 0) << server.err();
}

TEST(serve_memory, bodies_past_the_body_budget_get_503_before_they_are_read) {
  serve_process server({"--backend", "mock", "--vocab_size", "64", "--context_length",
                        "32", "--body-budget-bytes", "1000000", "--max-body-bytes",
                        "800000"});
  const std::string head =
      "POST /v1/logprobs HTTP/1.1\r\nHost: t\r\n"
      "Content-Type: application/json\r\nContent-Length: 600000\r\n\r\n";
  test_client slow(server.port());
  ASSERT_TRUE(slow.send(head + std::string(1000, ' ')));
  std::this_thread::sleep_for(200ms); // its header is read: its body is reserved
  test_client second(server.port());
  ASSERT_TRUE(second.send(head));
  auto busy = second.read_response(5s);
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(error_code(*busy), "server_busy");
  EXPECT_NE(busy->body.find("--body-budget-bytes"), std::string::npos) << busy->body;
  // A chunked body is held as it arrives: past the budget, it is refused too.
  test_client chunked(server.port());
  ASSERT_TRUE(chunked.send("POST /v1/logprobs HTTP/1.1\r\nHost: t\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n61a80\r\n" +
                           std::string(400000, ' ') + "\r\n61a80\r\n" +
                           std::string(400000, ' ') + "\r\n"));
  auto refused = chunked.read_response(5s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  // The slow body finishes (a valid request once its spaces are JSON) and is answered;
  // its bytes go back, so the next large body is read.
  ASSERT_TRUE(slow.send(R"({"tokens":[1,2]})" + std::string(600000 - 1000 - 16, ' ')));
  auto answered = slow.read_response(10s);
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200) << answered->body.substr(0, 300);
  // The handler thread lets the slow body go just after it hands the request on, which
  // may be after its answer reached the client: the next body fits soon, not at once.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::optional<test_response> third_reply;
  for (;;) {
    test_client third(server.port());
    ASSERT_TRUE(third.send(head + R"({"tokens":[3]})" + std::string(600000 - 14, ' ')));
    third_reply = third.read_response(10s);
    ASSERT_TRUE(third_reply);
    if (third_reply->status != 503 || std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(third_reply->status, 200) << third_reply->body.substr(0, 300);
  EXPECT_EQ(server.stop(10s), 0) << server.err();
}

/// MALLOC_CONF for the processes spawned while this lives (the earlier value after).
class scoped_malloc_conf {
public:
  explicit scoped_malloc_conf(const char* conf) {
    if (const char* old = std::getenv("MALLOC_CONF"))
      old_ = old;
    ::setenv("MALLOC_CONF", conf, 1);
  }
  ~scoped_malloc_conf() {
    if (old_)
      ::setenv("MALLOC_CONF", old_->c_str(), 1);
    else
      ::unsetenv("MALLOC_CONF");
  }
  scoped_malloc_conf(const scoped_malloc_conf&) = delete;
  scoped_malloc_conf& operator=(const scoped_malloc_conf&) = delete;

private:
  std::optional<std::string> old_;
};

/// A server under the budgets of `limits` and these cache budgets, warmed by one answer,
/// and docs/http-api.md's bound on its memory from its resident size then.
///
/// The bound is on what Canopy holds. jemalloc, the program's allocator, also keeps freed
/// pages for up to 10 s in each of its arenas (4 per core): on the 16-core GPU machine
/// the long all_positions case peaked 63 MB over the bound with its defaults, 226 MB over
/// the start, where Canopy held about 55. So the server here returns freed pages at once,
/// as docs/http-api.md tells an operator who needs the bound to be hard: the peak is then
/// what Canopy holds, the same on 2 cores or 16.
struct budgeted_server {
  static constexpr std::size_t logprob_budget = 64u << 20, kv_budget = 16u << 20;

  budgeted_server(const canopy::server::server_options& limits,
                  const std::vector<std::string>& model,
                  std::vector<std::string> more = {})
      : server(flags_with(with_budgets(limits, std::move(more)), model)) {
    // One ordinary answer first, so the baseline has the engine and its threads warm.
    EXPECT_EQ(exchange(server.port(), logprobs_request(2, false)).status, 200);
    baseline = proc_status_bytes(server.pid(), "VmRSS");
    bound = baseline + canopy::server::server_memory_bound(limits) + logprob_budget +
            kv_budget;
  }

  static std::vector<std::string>
  with_budgets(const canopy::server::server_options& limits,
               std::vector<std::string> more) {
    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::size_t>>{
             {"--max-connections", limits.max_connections},
             {"--answer-budget-bytes", limits.answer_budget_bytes},
             {"--body-budget-bytes", limits.body_budget_bytes},
             {"--max-body-bytes", limits.max_body_bytes},
             {"--logprob_budget_bytes", logprob_budget},
             {"--kv_budget_bytes", kv_budget}}) {
      more.push_back(flag);
      more.push_back(std::to_string(value));
    }
    return more;
  }

  scoped_malloc_conf freed_pages_returned_at_once{"dirty_decay_ms:0,muzzy_decay_ms:0"};
  serve_process server;
  std::size_t baseline = 0;
  std::size_t bound = 0;
};

TEST(serve_memory,
     a_flood_of_hostile_clients_keeps_the_process_under_the_documented_bound) {
  canopy::server::server_options limits;
  limits.max_connections = 300;
  limits.answer_budget_bytes = 200u << 20;
  limits.body_budget_bytes = 30u
                             << 20; // three of the 8 MB bodies, and room for small ones
  limits.max_body_bytes = 8u << 20;
  budgeted_server budgeted(limits, big_vocab, {"--write-stall-timeout-ms", "30000"});
  auto& server = budgeted.server;
  const auto baseline = budgeted.baseline, bound = budgeted.bound;

  std::vector<std::unique_ptr<test_client>> flood;
  // Readers that never read answers of 64 MB each (distinct, so none is a cache hit).
  for (int i = 0; i < 12; ++i) {
    flood.push_back(std::make_unique<test_client>(server.port()));
    json body = {{"tokens", std::vector<int>(80, 100 + i)}, {"all_positions", true}};
    flood.back()->send(make_request("POST", "/v1/logprobs", body.dump(),
                                    "Content-Type: application/json\r\n"));
  }
  // Bodies of 8 MB that stop half-way.
  const std::string half_body =
      "POST /v1/logprobs HTTP/1.1\r\nHost: t\r\nContent-Length: " +
      std::to_string(limits.max_body_bytes) + "\r\n\r\n" +
      std::string(limits.max_body_bytes / 2, ' ');
  for (int i = 0; i < 12; ++i) {
    flood.push_back(std::make_unique<test_client>(server.port()));
    flood.back()->send(half_body);
  }
  // And connections that fill their header buffers and wait.
  while (flood.size() < limits.max_connections - 10) {
    flood.push_back(std::make_unique<test_client>(server.port()));
    flood.back()->send("POST /v1/logprobs HTTP/1.1\r\nHost: t\r\nX-Pad: " +
                       std::string(limits.max_header_bytes - 100, 'x'));
  }
  std::this_thread::sleep_for(3s); // every admitted answer computed and written
  const auto peak = proc_status_bytes(server.pid(), "VmHWM");
  EXPECT_LE(peak, bound) << "baseline " << baseline << ", peak " << peak;
  EXPECT_EQ(exchange(server.port(), logprobs_request(2, false)).status, 200)
      << "it still serves";
  std::fprintf(stderr, "baseline %zu MB, peak %zu MB, bound %zu MB\n", baseline >> 20,
               peak >> 20, bound >> 20);
  flood.clear();
  EXPECT_EQ(server.stop(10s), 0) << server.err();
}

// Every row of an all_positions sequence is a query carrying its prefix: asked all at
// once, 2 x 4,096 tokens held 64 MiB of queries per request, outside every budget.
TEST(serve_memory,
     long_all_positions_sequences_keep_the_process_under_the_documented_bound) {
  canopy::server::server_options limits;
  limits.max_connections = 64;
  limits.answer_budget_bytes = 64u << 20;
  limits.body_budget_bytes = 16u << 20;
  budgeted_server budgeted(
      limits, {"--backend", "mock", "--vocab_size", "64", "--context_length", "4096"});
  auto& server = budgeted.server;
  const auto baseline = budgeted.baseline, bound = budgeted.bound;

  std::vector<std::unique_ptr<test_client>> clients;
  for (int i = 0; i < 40; ++i) {
    std::vector<std::vector<int>> batch(2, std::vector<int>(4096));
    for (std::size_t s = 0; s < batch.size(); ++s)
      for (std::size_t t = 0; t < 4096; ++t)
        batch[s][t] = static_cast<int>((i * 7 + s * 3 + t) % 64); // distinct: no hits
    json body = {{"batch", batch}, {"all_positions", true}, {"top_k", 1}};
    clients.push_back(std::make_unique<test_client>(server.port()));
    clients.back()->send(make_request("POST", "/v1/logprobs", body.dump(),
                                      "Content-Type: application/json\r\n"));
  }
  std::size_t answered = 0;
  for (auto& c : clients) {
    const auto reply = c->read_response(120s);
    ASSERT_TRUE(reply) << "every request gets an answer";
    EXPECT_TRUE(reply->status == 200 || reply->status == 503) << reply->status;
    answered += reply->status == 200;
  }
  EXPECT_GT(answered, 0u);
  const auto peak = proc_status_bytes(server.pid(), "VmHWM");
  EXPECT_LE(peak, bound) << "baseline " << baseline << ", peak " << peak;
  std::fprintf(stderr, "answered %zu of 40; baseline %zu MB, peak %zu MB, bound %zu MB\n",
               answered, baseline >> 20, peak >> 20, bound >> 20);
  clients.clear();
  EXPECT_EQ(server.stop(10s), 0) << server.err();
}

} // namespace
